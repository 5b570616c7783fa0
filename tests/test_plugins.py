"""Plug-ins from other packages: a tiny package, installed into a temp target, adds a
benchmark, its official rule and an engine through entry points, seen by a fresh
interpreter (``evalkit bench list``, ``evalkit score``, ``evalkit run``). One that cannot
load (broken, shadowing an entry evalkit has, calling sys.exit, raising KeyboardInterrupt,
hanging at import) is skipped with one line naming it: listings warn and go on, a run or
``score`` stops in its preflight (exit 2, no run directory, no engine).

The package is written and installed by the test (``pip install --target --no-deps
--no-build-isolation --no-index``: setuptools from this environment, no network).
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
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
from pydantic import BaseModel

from evalkit.engines import EngineSpec
from evalkit.engines.base import Completion

SPEC = EngineSpec("toy_echo", "toy_plugin.engine:Echo", "toy_plugin.engine:EchoConfig",
                  local_checkpoint=False)


class EchoConfig(BaseModel):
    model: str


class Echo:
    \"\"\"Answers every request "A or B" (no model: the run path without vLLM).\"\"\"

    def __init__(self, config):
        self.config = config

    async def generate(self, request):
        return Completion(request_id=request.id, texts=["A or B"])

    async def close(self):
        return None
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
        (src / pkg / name).parent.mkdir(parents=True, exist_ok=True)
        (src / pkg / name).write_text(text)
    return src


def _env(*targets: Path, **extra: str) -> dict[str, str]:
    """This environment with ``targets`` first on the path (the evalkit under test stays:
    the installed one, or the checkout a PYTHONPATH names), and ``extra`` variables."""
    path = [*map(str, targets), *filter(None, [os.environ.get("PYTHONPATH")])]
    return {**os.environ, "PYTHONPATH": os.pathsep.join(path), **extra}


def _evalkit(
    target: Path | list[Path], *args: str, cwd: Path, timeout: float = 300, **env: str
) -> subprocess.CompletedProcess[str]:
    """``python -m evalkit ARGS`` in a fresh interpreter that sees ``target`` (or several)."""
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *args],
        cwd=cwd,
        env=_env(*(target if isinstance(target, list) else [target]), **env),
        capture_output=True,
        text=True,
        timeout=timeout,
    )


def _python(target: Path, code: str, **env: str) -> subprocess.CompletedProcess[str]:
    """``python -c CODE`` in a fresh interpreter that sees ``target``."""
    return subprocess.run(
        [sys.executable, "-c", code],
        env=_env(target, **env),
        capture_output=True,
        text=True,
        timeout=300,
    )


def _install(root: Path, dist: str, pkg: str, entry_points: str, files: dict[str, str]) -> Path:
    """``dist`` built from ``files`` and installed into a target of its own (returned)."""
    src = _package(root, dist, pkg, entry_points, files)
    subprocess.run([*PIP, "--target", str(root / f"{dist}-target"), str(src)], check=True)
    return root / f"{dist}-target"


@pytest.fixture(scope="module")
def toy_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A temp target holding the installed toy plug-in package."""
    root = tmp_path_factory.mktemp("plugin")
    files = {"rules.py": RULES, "engine.py": ENGINE, "family.py": FAMILY}
    files["specs/toybench.yaml"] = SPEC
    return _install(root, "toy-plugin", "toy_plugin", TOY_ENTRY_POINTS, files)


def _toy_data(folder: Path) -> list[str]:
    """ToyBench's annotations (two samples, answers B and A) under ``folder``/data, and
    the ``score`` arguments of a predictions file replying "A or B" to both."""
    qa = [{"qid": f"q{i}", "q": "Which?", "a0": "yes", "a1": "no", "ans": i} for i in (1, 0)]
    (folder / "data").mkdir()
    (folder / "data" / "qa.json").write_text(json.dumps(qa))
    preds = [{"id": "q1", "prediction": "A or B"}, {"id": "q0", "prediction": "A or B"}]
    (folder / "p.jsonl").write_text("".join(json.dumps(p) + "\n" for p in preds))
    return ["score", "--bench", "toy-bench", "--data-root", "data", "--predictions", "p.jsonl"]


@pytest.fixture(scope="module")
def toy_scored(toy_target: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``evalkit score`` of ToyBench under the plug-in's rule: the run directory."""
    cwd = tmp_path_factory.mktemp("scored")
    argv = _toy_data(cwd)
    proc = _evalkit(toy_target, *argv, "--run-id", "r", "--model", "m", cwd=cwd)
    assert proc.returncode == 0, proc.stderr
    return cwd / "runs" / "r"


def test_an_installed_plugin_benchmark_is_listed(toy_target: Path, tmp_path: Path) -> None:
    proc = _evalkit(toy_target, "bench", "list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "ToyBench" in proc.stdout
    assert "ToyBench" not in _evalkit(tmp_path, "bench", "list", cwd=tmp_path).stdout


def test_an_installed_plugin_rule_scores_its_benchmark(toy_scored: Path) -> None:
    lines = (toy_scored / "ToyBench.jsonl").read_text().splitlines()
    recs = {r["id"]: r for r in map(json.loads, lines)}
    assert {r["rule"] for r in recs.values()} == {"toybench"}  # the plug-in's, as headline
    assert (recs["q1"]["score"]["value"], recs["q0"]["score"]["value"]) == (1.0, 0.0)
    assert recs["q1"]["rules"]["evalkit"]["value"] == 0.0  # evalkit's read it otherwise


def test_the_manifest_records_the_plugins_a_run_loaded(toy_scored: Path) -> None:
    plugins = json.loads((toy_scored / "config.json").read_text())["plugins"]
    got = {(p["distribution"], p["version"], p["group"], p["name"]) for p in plugins}
    assert got == {
        ("toy-plugin", "0.1", "evalkit.benchmarks", "toy"),
        ("toy-plugin", "0.1", "evalkit.rules", "toy"),
        ("toy-plugin", "0.1", "evalkit.engines", "toy_echo"),
    }
    (rules,) = [p for p in plugins if p["group"] == "evalkit.rules"]
    assert rules["registered"] == {"extraction rule": ["toybench for multiple_choice"]}


def test_a_report_says_when_the_headline_rule_comes_from_a_plugin(
    toy_scored: Path, toy_target: Path, tmp_path: Path
) -> None:
    out = tmp_path / "rep"
    argv = ["report", str(toy_scored), "--format", "md,json", "--out", str(out)]
    proc = _evalkit(toy_target, *argv, cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    text = (out / "report.md").read_text()
    assert "| ToyBench | 50.00 ± 50.00 (plug-in rule) |" in text  # next to the number
    assert "headline rule toybench comes from plug-in 'toy' = 'toy_plugin.rules'" in text
    doc = json.loads((out / "report.json").read_text())
    (run,) = doc["runs"]
    said = run["benchmarks"]["ToyBench"]["headline_plugin"]
    assert said.startswith("headline rule toybench comes from plug-in 'toy' = ")


def test_an_installed_plugin_engine_is_a_registered_backend(toy_target: Path) -> None:
    code = (
        "from evalkit.engines import engine_choices, engine_spec; "
        "print('toy_echo' in engine_choices(), engine_spec('toy_echo').local_checkpoint)"
    )
    proc = _python(toy_target, code)
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
    "group, argv, code, shown",
    [
        ("evalkit.families", ["models"], 0, "qwen2_5_vl"),  # a listing warns and goes on
        ("evalkit.benchmarks", ["bench", "list"], 0, "LVBench"),
        ("evalkit.rules", ["bench", "show", "LVBench"], 0, "LVBench"),
        ("evalkit.engines", ["run", "--bench", "LVBench", "--model", "m"], 2, ""),  # flags
    ],
)
def test_a_broken_plugin_is_one_line_naming_it_and_evalkit_still_imports(
    tmp_path: Path, group: str, argv: list[str], code: int, shown: str
) -> None:
    entry = f'[project.entry-points."{group}"]\nbroken = "broken_plugin.specs"\n'
    files = {"specs/__init__.py": "import not_a_module_anywhere\n"}
    target = _install(tmp_path, "broken-plugin", "broken_plugin", entry, files)
    imported = subprocess.run([sys.executable, "-c", "import evalkit.bench"], env=_env(target))
    assert imported.returncode == 0
    proc = _evalkit(target, *argv, cwd=tmp_path)
    assert proc.returncode == code, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "plug-in 'broken' = 'broken_plugin.specs' of broken-plugin 0.1" in line
    assert "not_a_module_anywhere" in line and "pip uninstall broken-plugin" in line
    assert ("warning" in line) == (code == 0)
    assert shown in proc.stdout if code == 0 else not (tmp_path / "runs").exists()


# -- plug-ins that must not load: shadowing, exiting, interrupting, hanging ---------------

GROUPS = {
    "benchmarks": "evalkit.benchmarks",
    "rules": "evalkit.rules",
    "tasks": "evalkit.tasks",
    "aggregations": "evalkit.aggregations",
    "engines": "evalkit.engines",
    "extras": "evalkit.extra_metrics",
}

SHADOW = """\
from evalkit.scoring.rules import rule
from evalkit.scoring.types import Score


@rule("shadowextra", "multiple_choice", source="a plug-in")  # gone again when it is refused
def first(prediction, target, sample):
    return Score(0.0)


@rule("videomme", "multiple_choice", source="a plug-in replacing the official rule")
def always_right(prediction, target, sample):
    \"\"\"Every reply right.\"\"\"
    return Score(1.0, answer=str(target))
"""

REGISTRIES = """\
import json
from evalkit import tasks
from evalkit.bench.registry import registry
from evalkit.bench.aggregations import AGGREGATIONS
from evalkit.engines import ENGINE_SPECS
from evalkit.scoring.extras import EXTRAS
from evalkit.scoring.rules import RULES

errors = []
for reg in (registry(), tasks.TASKS, RULES, AGGREGATIONS, ENGINE_SPECS, EXTRAS):
    try:
        len(reg)
    except Exception as exc:
        errors.append(str(exc))
print(json.dumps({"errors": errors, "rules": {n: RULES.get(n).source for n in RULES.names()}}))
"""


@pytest.fixture(scope="module")
def shadow_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A package registering Video-MME's official rule name from an entry point of each
    group evalkit reads for a run (each module a plug-in of its own)."""
    entries = "".join(
        f'[project.entry-points."{group}"]\n{short} = "shadow_plugin.in_{short}"\n'
        for short, group in GROUPS.items()
    )
    files = {f"in_{short}/__init__.py": SHADOW for short in GROUPS}
    root = tmp_path_factory.mktemp("shadow")
    return _install(root, "shadow-plugin", "shadow_plugin", entries, files)


@pytest.mark.parametrize("command", [["run"], ["sweep", "--grid", "frames.nframes=8,16"]])
def test_a_plugin_shadowing_an_official_rule_from_any_group_stops_a_run_before_it_starts(
    shadow_target: Path, tmp_path: Path, command: list[str]
) -> None:
    proc = _evalkit(shadow_target, *command, "--bench", "Video-MME", "--model", "m", cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    for short, group in GROUPS.items():
        named = f"'{short}' = 'shadow_plugin.in_{short}' of shadow-plugin 0.1 (entry points "
        assert f"{named}'{group}') refused: extraction rule 'videomme for multiple_choice'" in line
    assert "pip uninstall shadow-plugin" in line
    assert not (tmp_path / "runs").exists()


def test_a_refused_plugin_leaves_every_builtin_rule_and_nothing_of_its_own(
    shadow_target: Path, tmp_path: Path
) -> None:
    clean = json.loads(_python(tmp_path, REGISTRIES).stdout)
    proc = _python(shadow_target, REGISTRIES)
    got = json.loads(proc.stdout)
    assert got["errors"] == [] and clean["errors"] == []
    assert got["rules"] == clean["rules"]  # every built-in rule, the official ones as shipped
    assert "videomme for multiple_choice" in got["rules"]
    assert proc.stderr.count("PluginWarning") == len(GROUPS)  # each named, none raised


CHILD = """\
import json
from evalkit.scoring.bounded import BoundedScorer


def rules(sample, completion):  # in the scoring child, which reads the rules first here
    from evalkit.scoring.rules import RULES

    return {n: RULES.get(n).source for n in RULES.names()}


scorer = BoundedScorer(rules, 60)
print(json.dumps(scorer(None, None)))
scorer.close()
"""


def test_the_scoring_child_refuses_a_shadowing_plugin_too(
    shadow_target: Path, tmp_path: Path
) -> None:
    clean = json.loads(_python(tmp_path, CHILD).stdout)
    proc = _python(shadow_target, CHILD)
    assert json.loads(proc.stdout) == clean, proc.stderr
    assert "videomme for multiple_choice" in clean


def test_a_listing_with_a_shadowing_plugin_warns_and_lists_the_builtins(
    shadow_target: Path, tmp_path: Path
) -> None:
    proc = _evalkit(shadow_target, "bench", "list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "Video-MME" in proc.stdout and "VSI-Bench" in proc.stdout
    lines = proc.stderr.strip().splitlines()
    assert lines and all(x.startswith("evalkit bench: warning: plug-in '") for x in lines)
    assert "refused: extraction rule 'videomme for multiple_choice'" in lines[0]


RUDE_ENTRY_POINTS = """\
[project.entry-points."evalkit.benchmarks"]
exits = "rude_plugin.exits"
interrupts = "rude_plugin.interrupts"
"""


def test_plugins_that_exit_or_interrupt_at_import_are_named_and_skipped(tmp_path: Path) -> None:
    files = {
        "exits.py": "import sys\nsys.exit(0)\n",
        "interrupts.py": "raise KeyboardInterrupt\n",
    }
    target = _install(tmp_path, "rude-plugin", "rude_plugin", RUDE_ENTRY_POINTS, files)
    proc = _evalkit(target, "bench", "list", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr
    assert "LVBench" in proc.stdout  # the listing went on
    exits, interrupts = proc.stderr.strip().splitlines()
    assert "plug-in 'exits' = 'rude_plugin.exits' of rude-plugin 0.1" in exits
    assert "SystemExit: 0" in exits
    assert "plug-in 'interrupts' = 'rude_plugin.interrupts' of rude-plugin 0.1" in interrupts
    assert "KeyboardInterrupt" in interrupts


SLOW_ENTRY_POINTS = """\
[project.entry-points."evalkit.benchmarks"]
hangs = "slow_plugin.hangs"
late = "slow_plugin.late"  # packages of specs, as a benchmarks entry point names
"""
HANGS = """\
import os
import pathlib
import time

if os.environ.get("HANGS_MARK"):  # the test knows the import has begun
    pathlib.Path(os.environ["HANGS_MARK"]).touch()
time.sleep(60)
"""
LATE = """\
import time

time.sleep(2)
from evalkit.scoring.rules import rule  # after its bound: refused, nothing registered


@rule("late", "multiple_choice", source="a slow plug-in")
def late(prediction, target, sample):
    return None
"""


@pytest.fixture(scope="module")
def slow_target(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A package with a plug-in sleeping 60 s at import, and one registering after 2 s."""
    files = {"hangs/__init__.py": HANGS, "late/__init__.py": LATE}
    root = tmp_path_factory.mktemp("slow")
    return _install(root, "slow-plugin", "slow_plugin", SLOW_ENTRY_POINTS, files)


def test_a_plugin_hanging_at_import_is_skipped_after_its_bound(
    slow_target: Path, tmp_path: Path
) -> None:
    # the subprocess timeout only guards the test against a hang: no time is asserted
    proc = _evalkit(
        slow_target, "bench", "list", cwd=tmp_path, timeout=45, EVALKIT_PLUGIN_TIMEOUT_S="0.5"
    )
    assert proc.returncode == 0, proc.stderr
    assert "LVBench" in proc.stdout
    hangs, late = proc.stderr.strip().splitlines()
    assert "plug-in 'hangs' = 'slow_plugin.hangs' of slow-plugin 0.1" in hangs
    assert "still importing after 0.5 s" in hangs and "EVALKIT_PLUGIN_TIMEOUT_S" in hangs
    assert "plug-in 'late'" in late


def test_a_users_ctrl_c_while_a_plugin_imports_still_stops_evalkit(
    slow_target: Path, tmp_path: Path
) -> None:
    # the control of the two above: only the plug-in's own interrupt is caught, not the user's
    mark = tmp_path / "importing"
    env = _env(slow_target, EVALKIT_PLUGIN_TIMEOUT_S="120", HANGS_MARK=str(mark))
    argv = [sys.executable, "-m", "evalkit", "bench", "list"]
    pipe = subprocess.PIPE
    with subprocess.Popen(argv, cwd=tmp_path, env=env, stdout=pipe, stderr=pipe, text=True) as proc:
        while not mark.exists() and proc.poll() is None:
            time.sleep(0.05)
        proc.send_signal(signal.SIGINT)
        out, err = proc.communicate(timeout=60)
    assert proc.returncode == 130, err
    assert "evalkit bench: interrupted (SIGINT)" in err and "Traceback" not in err
    assert "LVBench" not in out  # stopped there, not after listing without the plug-in


def test_what_a_plugin_registers_after_its_bound_is_refused(slow_target: Path) -> None:
    code = (
        "import threading\n"
        "from evalkit.scoring.rules import RULES\n"
        "from evalkit.bench.registry import registry\n"
        "registry().names()\n"
        "for t in threading.enumerate():\n"
        "    if t.name.endswith(':late'):\n"
        "        t.join()\n"  # the plug-in's import has ended: what it registered is decided
        "print('late for multiple_choice' in RULES.names())\n"
    )
    proc = _python(slow_target, code, EVALKIT_PLUGIN_TIMEOUT_S="0.3")
    assert proc.stdout.split() == ["False"], proc.stderr


BROKEN_RULES = """\
[project.entry-points."evalkit.rules"]
broken = "broken_rules.rules"
"""


@pytest.fixture
def broken_rules(tmp_path: Path) -> Path:
    """A package whose rules module does not import."""
    files = {"rules.py": "import not_a_module_anywhere\n"}
    return _install(tmp_path, "broken-rules", "broken_rules", BROKEN_RULES, files)


def test_score_with_a_plugin_whose_rules_do_not_import_stops_before_a_run_directory(
    toy_target: Path, broken_rules: Path, tmp_path: Path
) -> None:
    argv = [*_toy_data(tmp_path), "--run-id", "r", "--model", "m"]
    proc = _evalkit([toy_target, broken_rules], *argv, cwd=tmp_path)
    assert not (tmp_path / "runs").exists()
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "plug-in 'broken' = 'broken_rules.rules' of broken-rules 0.1" in line


def test_run_with_a_plugin_whose_rules_do_not_import_stops_before_its_engine_starts(
    toy_target: Path, broken_rules: Path, tmp_path: Path
) -> None:
    argv = ["run", "--bench", "toy-bench", "--data-root", "data", "--engine", "toy_echo"]
    argv += ["--model", "m", "--run-id", "r"]
    _toy_data(tmp_path)
    ran = _evalkit(toy_target, *argv, cwd=tmp_path)  # the control: it runs without vLLM
    assert ran.returncode == 0, ran.stderr
    assert len((tmp_path / "runs" / "r" / "ToyBench.jsonl").read_text().splitlines()) == 2
    argv[-1] = "r2"
    proc = _evalkit([toy_target, broken_rules], *argv, cwd=tmp_path)
    assert proc.returncode == 2, proc.stderr
    (line,) = proc.stderr.strip().splitlines()
    assert "plug-in 'broken' = 'broken_rules.rules' of broken-rules 0.1" in line
    assert not (tmp_path / "runs" / "r2").exists()
