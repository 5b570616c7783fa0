"""Plug-ins from other packages: a tiny package, installed into a temp target, adds a
benchmark, its official rule and an engine through entry points, seen by a fresh
interpreter (``evalkit bench list``, ``evalkit score``); a broken one is one line.

The package is written and installed by the test (``pip install --target --no-deps
--no-build-isolation --no-index``: setuptools from this environment, no network).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

PIP = [sys.executable, "-m", "pip", "--disable-pip-version-check", "-q", "install"]
PIP += ["--no-deps", "--no-build-isolation", "--no-index"]

PYPROJECT = """\
[build-system]
requires = ["setuptools"]
build-backend = "setuptools.build_meta"

[project]
name = "{dist}"
version = "0.1"

{entry_points}

[tool.setuptools.package-data]
"{pkg}.specs" = ["*.yaml"]
"""

TOY_ENTRY_POINTS = """\
[project.entry-points."evalkit.benchmarks"]
toy = "toy_plugin.specs"

[project.entry-points."evalkit.rules"]
toy = "toy_plugin.rules"

[project.entry-points."evalkit.engines"]
toy_echo = "toy_plugin.engine:SPEC"

[project.entry-points."evalkit.families"]
toy_vl = "toy_plugin.family:SPEC"
"""

FAMILY = """\
from evalkit.engines.family import FamilySpec, FrameReference

SPEC = FamilySpec(
    name="toy_vl",
    title="Toy-VL",
    model_types=("toy_vl",),
    architectures=("ToyVLForConditionalGeneration",),
    reference=FrameReference(source="the toy plug-in's own card", nframes=8, size=224),
    prompt="frames as images, each after 'Frame{i}: '",
    grid="fixed",
    feed="images",
)
"""

RULES = '''\
from evalkit.scoring.rules import rule
from evalkit.scoring.types import Score


@rule("toybench", "multiple_choice", source="toy_plugin/rules.py")
def last_capital(prediction, target, sample):
    """The last capital letter of the reply (evalkit's rule reads no letter in 'A or B')."""
    letters = [c for c in prediction if c.isupper()]
    answer = letters[-1] if letters else ""
    return Score(float(answer == target), answer=answer)
'''

ENGINE = """\
from evalkit.engines import EngineSpec

SPEC = EngineSpec("toy_echo", "toy_plugin.engine:Echo", "toy_plugin.engine:EchoConfig",
                  local_checkpoint=False)
"""

SPEC = """\
name: ToyBench
aliases: [toy-bench]
citation: none (a test's benchmark)
data: {local_path: .}
layout: "qa.json: [{qid, q, a0, a1, ans}]"
files: [{path: qa.json}]
mapping:
  id: {template: "{qid}"}
  question: q
  option_fields: [a0, a1]
  target: ans
  target_kind: index
  task_type: multiple_choice
aggregation: {name: mean, source: the test}
"""


def _package(root: Path, dist: str, pkg: str, entry_points: str, files: dict[str, str]) -> Path:
    src = root / dist
    (src / pkg / "specs").mkdir(parents=True)
    (src / "pyproject.toml").write_text(
        PYPROJECT.format(dist=dist, pkg=pkg, entry_points=entry_points)
    )
    for name, text in {"__init__.py": "", "specs/__init__.py": "", **files}.items():
        (src / pkg / name).write_text(text)
    return src


def _env(target: Path) -> dict[str, str]:
    """This environment with ``target`` first on the path (the evalkit under test stays:
    the installed one, or the checkout a PYTHONPATH names)."""
    path = [str(target), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path)}


def _evalkit(target: Path, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    """``python -m evalkit ARGS`` in a fresh interpreter that sees ``target``."""
    env = _env(target)
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.fixture(scope="module")
def toy_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temp target holding the installed toy plug-in package."""
    root = tmp_path_factory.mktemp("plugin")
    files = {"rules.py": RULES, "engine.py": ENGINE, "family.py": FAMILY}
    files["specs/toybench.yaml"] = SPEC
    src = _package(root, "toy-plugin", "toy_plugin", TOY_ENTRY_POINTS, files)
    subprocess.run([*PIP, "--target", str(root / "target"), str(src)], check=True)
    return root / "target"


def test_an_installed_plugin_benchmark_is_listed(toy_target: Path, tmp_path: Path) -> None:
    proc = _evalkit(toy_target, "bench", "list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ToyBench" in proc.stdout
    assert "ToyBench" not in _evalkit(tmp_path, "bench", "list", cwd=tmp_path).stdout


def test_an_installed_plugin_rule_scores_its_benchmark(toy_target: Path, tmp_path: Path) -> None:
    qa = [{"qid": f"q{i}", "q": "Which?", "a0": "yes", "a1": "no", "ans": i} for i in (1, 0)]
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "qa.json").write_text(json.dumps(qa))
    preds = [{"id": "q1", "prediction": "A or B"}, {"id": "q0", "prediction": "A or B"}]
    (tmp_path / "p.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    argv = ["score", "--bench", "toy-bench", "--data-root", "data", "--predictions", "p.jsonl"]
    proc = _evalkit(toy_target, *argv, "--run-id", "r", "--model", "m", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    lines = (tmp_path / "runs" / "r" / "ToyBench.jsonl").read_text().splitlines()
    recs = {r["id"]: r for r in map(json.loads, lines)}
    assert {r["rule"] for r in recs.values()} == {"toybench"}  # the plug-in's, as headline
    assert (recs["q1"]["score"]["value"], recs["q0"]["score"]["value"]) == (1.0, 0.0)
    assert recs["q1"]["rules"]["evalkit"]["value"] == 0.0  # evalkit's read it otherwise


def test_an_installed_plugin_engine_is_a_registered_backend(toy_target: Path) -> None:
    code = (
        "from evalkit.engines import engine_choices, engine_spec; "
        "print('toy_echo' in engine_choices(), engine_spec('toy_echo').local_checkpoint)"
    )
    env = _env(toy_target)
    proc = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, timeout=300
    )
    assert proc.stdout.split() == ["True", "False"], proc.stderr


def test_an_installed_plugin_family_feeds_its_checkpoints(toy_target: Path, tmp_path: Path) -> None:
    proc = _evalkit(toy_target, "models", "toy_vl", "--json", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    (row,) = json.loads(proc.stdout)
    assert row["title"] == "Toy-VL" and row["reference"] == "8 frames (qwen), 224x224"
    assert "frames as images" in row["video"]
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "config.json").write_text(json.dumps({"model_type": "toy_vl"}))
    code = (
        "from evalkit.engines.family import detect_family; "
        "f = detect_family('ckpt'); print(f.family.title, f.size)"
    )
    done = subprocess.run(
        [sys.executable, "-c", code],
        env=_env(toy_target),
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert done.stdout.strip() == "Toy-VL (224, 224)", done.stderr


@pytest.mark.parametrize(
    "group, argv",
    [
        ("evalkit.families", ["models"]),
        ("evalkit.benchmarks", ["bench", "list"]),
        ("evalkit.rules", ["bench", "show", "LVBench"]),
        ("evalkit.engines", ["run", "--bench", "LVBench", "--model", "m"]),  # flags: engines
    ],
)
def test_a_broken_plugin_is_one_line_naming_it_and_evalkit_still_imports(
    tmp_path: Path, group: str, argv: list[str]
) -> None:
    entry = f'[project.entry-points."{group}"]\nbroken = "broken_plugin.specs"\n'
    files = {"specs/__init__.py": "import not_a_module_anywhere\n"}
    src = _package(tmp_path, "broken-plugin", "broken_plugin", entry, files)
    target = tmp_path / "target"
    subprocess.run([*PIP, "--target", str(target), str(src)], check=True)
    env = _env(target)
    imported = subprocess.run([sys.executable, "-c", "import evalkit.bench"], env=env)
    assert imported.returncode == 0
    proc = _evalkit(target, *argv, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "plug-in 'broken' = 'broken_plugin.specs' of broken-plugin" in line
    assert "not_a_module_anywhere" in line and "pip uninstall broken-plugin" in line
