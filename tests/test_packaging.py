"""A built wheel carries everything: specs, adapters, prompt templates, reports, trainer.

The wheel test builds evalkit the way ``pip install evalkit`` gets it, installs it into a
bare target folder and uses it from a process that cannot see this checkout.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest
import tomllib

import evalkit
import evalkit.reports
import evalkit.trainer
from evalkit._layout import SUBPACKAGES, package_folder
from evalkit.bench.registry import benchmarks_dir, registry
from evalkit.cli.main import main
from evalkit.prompts import PROMPTS_DIR, render
from evalkit.sample import Sample, VideoRef

REPO = Path(__file__).resolve().parents[1]
PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q"]
# what the build reads: pyproject's packages live in these (README is the long description)
BUILD_INPUTS = (
    *("pyproject.toml", "README.md"),
    *("evalkit", "benchmarks", "prompts", "reports", "trainer"),
)


def _sample() -> Sample:
    return Sample(
        id="q1",
        task_type="multiple_choice",
        question="What colour is the ball?",
        options=["red", "blue"],
        target="A",
        media=[VideoRef(path="v.mp4")],
    )


def _source_tree_packages() -> set[str]:
    """Every package in the checkout, named as it installs (package-dir applied)."""
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    roots = {"evalkit": REPO / "evalkit"}
    roots.update({name: REPO / folder for name, folder in config["package-dir"].items()})
    found = set()
    for name, folder in roots.items():
        for init in folder.rglob("__init__.py"):
            rel = init.parent.relative_to(folder).parts
            found.add(".".join((name, *rel)))
    return found


def test_pyproject_lists_every_package_of_the_tree() -> None:
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["setuptools"]
    listed = set(config["packages"])
    missing = sorted(_source_tree_packages() - listed)
    assert not missing, f"add {missing} to [tool.setuptools] packages in pyproject.toml"
    assert not sorted(listed - _source_tree_packages()), "pyproject lists a package not in the tree"


def test_data_and_subpackages_come_from_the_tree_evalkit_came_from() -> None:
    # a checkout (python -m pytest) maps them onto the top-level folders; an installed
    # evalkit (tox: pytest --import-mode=append) holds them inside its own folder
    here = Path(evalkit.__file__).parent
    checkout = here == REPO / "evalkit"
    for name, folder in SUBPACKAGES.items():
        expected = REPO / folder if checkout else here / name
        assert package_folder(f"evalkit.{name}") == expected
    assert benchmarks_dir() == package_folder("evalkit.benchmarks")
    assert package_folder("evalkit.prompt_templates") == PROMPTS_DIR
    assert Path(evalkit.reports.__file__).parent == package_folder("evalkit.reports")
    assert Path(evalkit.trainer.__file__).parent == package_folder("evalkit.trainer")


def test_bench_list_without_specs_is_an_error_naming_the_folder(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("EVALKIT_BENCHMARKS", str(tmp_path))
    assert main(["bench", "list"]) == 2
    err = capsys.readouterr().err
    assert "no benchmark specs" in err and str(tmp_path) in err


_CHILD = textwrap.dedent(
    """
    import contextlib, io, json, sys
    sys.path.insert(0, sys.argv[1])
    import evalkit, evalkit.reports, evalkit.trainer.config
    from evalkit.bench.loader import load_hook
    from evalkit.bench.registry import get_benchmark, registry
    from evalkit.cli.main import main
    from evalkit.prompts import PROMPTS_DIR, render
    from evalkit.sample import Sample
    sample = Sample.model_validate_json(sys.argv[2])
    mmvu = get_benchmark("MMVU")
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        code = main(["bench", "list"])
    print(json.dumps({
        "sys_path": sys.path,
        "files": sorted({m.__file__ for n, m in sys.modules.items()
                         if n.split(".")[0] in ("evalkit", "reports", "trainer")
                         and getattr(m, "__file__", None)}),
        "names": registry().names(),
        "list_code": code,
        "list_out": out.getvalue(),
        "prompts_dir": str(PROMPTS_DIR),
        "plain": render(sample, "plain"),
        "thinking": render(sample, "thinking"),
        "adapter_file": load_hook(mmvu, mmvu.adapter).__code__.co_filename,
    }))
    """
)


def _build_wheel(tmp: Path) -> Path:
    """sdist, then a wheel from it: the way tox and a release build evalkit."""
    src = tmp / "src"
    src.mkdir()
    # a copy, so that setuptools' build/ and egg-info never land in (or come from) the checkout
    for name in BUILD_INPUTS:
        path = REPO / name
        if path.is_dir():
            ignore = shutil.ignore_patterns("__pycache__", "*.pyc")
            shutil.copytree(path, src / name, ignore=ignore)
        else:
            shutil.copy2(path, src / name)
    sdist = "from setuptools import build_meta; print(build_meta.build_sdist(sys.argv[1]))"
    subprocess.run(
        [sys.executable, "-c", f"import sys; {sdist}", tmp / "sdist"],
        cwd=src,
        check=True,
        capture_output=True,
    )
    (archive,) = (tmp / "sdist").glob("evalkit-*.tar.gz")
    wheels = tmp / "wheels"
    build = [*PIP, "wheel", "--no-deps", "--no-build-isolation", "-w", wheels, archive]
    subprocess.run(build, check=True)
    (wheel,) = wheels.glob("evalkit-*.whl")
    return wheel


@pytest.fixture(scope="module")
def installed_wheel(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """What a process that imports evalkit from the installed wheel, not this checkout, sees."""
    tmp = tmp_path_factory.mktemp("wheel")
    wheel = _build_wheel(tmp)
    target = tmp / "target"
    subprocess.run([*PIP, "install", "--no-deps", "--target", target, wheel], check=True)
    # -I: no PYTHONPATH, no cwd, no user site; site-packages stays for the dependencies
    proc = subprocess.run(
        [sys.executable, "-I", "-c", _CHILD, str(target), _sample().model_dump_json()],
        cwd=tmp,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert proc.returncode == 0, proc.stderr
    return {"target": target, **json.loads(proc.stdout.strip().splitlines()[-1])}


def test_the_wheel_is_what_the_process_imports(installed_wheel: dict) -> None:
    target = str(installed_wheel["target"])
    assert str(REPO) not in installed_wheel["sys_path"]
    assert installed_wheel["files"], "nothing of evalkit was imported"
    outside = [f for f in installed_wheel["files"] if not f.startswith(target)]
    assert not outside, f"imported from outside the wheel: {outside}"
    # no top-level packages with common names (reports, trainer) in site-packages
    installed = {p.name for p in Path(target).iterdir() if not p.name.endswith(".dist-info")}
    assert installed - {"bin"} == {"evalkit"}  # bin/: the console script


def test_the_wheel_lists_every_shipped_benchmark(installed_wheel: dict) -> None:
    assert installed_wheel["names"] == registry().names()
    assert len(installed_wheel["names"]) == len(list((REPO / "benchmarks").glob("*.yaml")))
    assert installed_wheel["list_code"] == 0
    for name in registry().names():
        assert name in installed_wheel["list_out"]


def test_the_wheel_renders_prompts_from_its_own_templates(installed_wheel: dict) -> None:
    assert installed_wheel["prompts_dir"].startswith(str(installed_wheel["target"]))
    assert installed_wheel["plain"] == render(_sample(), "plain")
    assert installed_wheel["thinking"] == render(_sample(), "thinking")


def test_the_wheel_loads_an_adapter_beside_its_spec(installed_wheel: dict) -> None:
    adapter = Path(installed_wheel["adapter_file"])
    assert adapter.name == "mmvu.py"
    assert adapter.is_relative_to(installed_wheel["target"])


def _wheel_trainer(target: Path, cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m evalkit.trainer ARGS`` from the installed wheel, in a folder of its own."""
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from evalkit.trainer.__main__ import main; sys.exit(main(sys.argv[2:]))"
    )
    argv = [sys.executable, "-I", "-c", code, str(target), *args]
    return subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize(
    ("config", "expected"),
    [
        ("grpo_synthvido", "did you mean 'grpo_synthvideo'"),
        ("trainer/configs/dapo_qwen3vl_8b.yaml", "huggingface-cli download Qwen/Qwen3-VL-8B"),
    ],
    ids=["typo", "checkout-path"],
)
def test_the_wheels_trainer_takes_a_shipped_config_by_name_from_any_folder(
    installed_wheel: dict, tmp_path: Path, config: str, expected: str
) -> None:
    out = _wheel_trainer(installed_wheel["target"], tmp_path, "train", "--config", config)
    assert out.returncode == 2, out.stderr[-2000:]
    errors = [line for line in out.stderr.splitlines() if line.startswith("error:")]
    assert len(errors) == 1 and expected in errors[0]
    assert list(tmp_path.iterdir()) == []  # refused before anything is written
    listed = _wheel_trainer(installed_wheel["target"], tmp_path, "configs")
    assert listed.returncode == 0 and "dapo_qwen3vl_8b" in listed.stdout
