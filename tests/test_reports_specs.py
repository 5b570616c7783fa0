"""Reports aggregate by the spec a run recorded; the live registry only for runs without one,
and the report says so in every format."""

from __future__ import annotations

import html
import importlib
import json
from collections.abc import Callable
from pathlib import Path

import pytest
from rich.console import Console

from evalkit.bench.spec import BenchmarkSpec
from evalkit.reports import build_report, load_run, write_report
from evalkit.testing.runs import Rec, write_run

# 3 of 3 right on task t1, 0 of 1 on t2: pooled mean 75, macro mean over task 50
RECS = [
    Rec(f"{t}{i}", v, {"duration": "short", "domain": "d", "task": t})
    for t, i, v in [("t1", 0, 1.0), ("t1", 1, 1.0), ("t1", 2, 1.0), ("t2", 0, 0.0)]
]


def _edited(spec: BenchmarkSpec) -> BenchmarkSpec:
    """Video-MME's YAML as edited after the run: another aggregate, headline rule, prompt."""
    agg = spec.aggregation.model_copy(update={"name": "macro_mean", "params": {"field": "task"}})
    scoring = spec.scoring.model_copy(update={"rule": "evalkit"})
    prompt = spec.prompt.model_copy(update={"variant": "plain"})
    return spec.model_copy(update={"aggregation": agg, "scoring": scoring, "prompt": prompt})


@pytest.fixture
def edit_yaml(monkeypatch: pytest.MonkeyPatch) -> Callable[[], None]:
    """Call it after the run is written: from then on the registry serves the edited spec."""
    module = importlib.import_module("evalkit.bench.registry")
    real = module.get_benchmark

    def get(name: str) -> BenchmarkSpec:
        spec = real(name)
        return _edited(spec) if spec.name == "Video-MME" else spec

    return lambda: monkeypatch.setattr(module, "get_benchmark", get)


def _without_recorded_specs(run: Path) -> Path:
    """The run as the previous evalkit wrote it: config.json without specs (schema 1)."""
    doc = json.loads((run / "config.json").read_text())
    for key in ("specs", "data_benchmarks", "schema_version", "evalkit_version"):
        doc.pop(key)
    (run / "config.json").write_text(json.dumps(doc))
    return run


def _formats(run: Path, out: Path) -> dict[str, str]:
    console = Console(record=True, width=400, color_system=None, force_terminal=False)
    files = write_report(build_report([run], bootstrap=2), out, ["table", "md", "html"], console)
    return {
        "txt": console.export_text(),
        "md": files["md"].read_text(),
        "html": files["html"].read_text(),
    }


LIVE = "aggregated by the live registry's spec, not the spec as run"


def test_a_run_is_aggregated_by_its_recorded_spec_not_the_edited_yaml(
    tmp_path: Path, edit_yaml: Callable[[], None]
) -> None:
    run = write_run(tmp_path / "r", "m", {"Video-MME": RECS})
    edit_yaml()
    b = load_run(run, bootstrap=2).benchmarks["Video-MME"]
    assert b.aggregation == "mean" and b.overall == pytest.approx(75.0)
    assert b.spec.prompt.variant == "official" and b.spec.scoring.rule == "official"
    assert not b.live_spec and not any("changed since the run" in n for n in b.notes)
    assert not any(LIVE in text for text in _formats(run, tmp_path / "out").values())


def test_a_run_without_recorded_specs_falls_back_to_the_registry_and_says_so(
    tmp_path: Path, edit_yaml: Callable[[], None]
) -> None:
    run = _without_recorded_specs(write_run(tmp_path / "r", "m", {"Video-MME": RECS}))
    edit_yaml()
    report = load_run(run, bootstrap=2)
    b = report.benchmarks["Video-MME"]
    assert b.aggregation == "macro_mean" and b.overall == pytest.approx(50.0)
    assert b.live_spec and report.live_specs == ["Video-MME"]
    line = f"{LIVE} (the run recorded none this evalkit can read): Video-MME"
    for name, text in _formats(run, tmp_path / "out").items():
        assert (html.escape(line) if name == "html" else line) in text, name
