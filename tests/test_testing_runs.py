"""The test-run builder cannot drift from ``evalkit run``: its run directory is written by
the runner's own manifest and record writers, checked here against a real run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalkit.reports import load_run
from evalkit.run.execute import execute
from evalkit.rundir import RunDir
from evalkit.testing.runs import Rec, write_run
from tests._run_dirs import BENCH, Counting, expected_ids, run_config, write_set

N = 4


def _shape(value: Any) -> Any:
    """Keys all the way down, and the type of each leaf (None: any type, unset here)."""
    if isinstance(value, dict):
        return {k: _shape(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_shape(v) for v in value[:1]]
    return None if value is None else type(value).__name__


def _differences(a: Any, b: Any, where: str = "") -> list[str]:
    if isinstance(a, dict) and isinstance(b, dict):
        out = [f"{where}{k}: only in one" for k in sorted(set(a) ^ set(b))]
        for k in sorted(set(a) & set(b)):
            out += _differences(a[k], b[k], f"{where}{k}.")
        return out
    if isinstance(a, list) and isinstance(b, list):
        return _differences(a[0], b[0], where) if a and b else []
    return [] if a is None or b is None or a == b else [f"{where}: {a} vs {b}"]


@pytest.mark.timeout(120)
def test_the_builders_run_has_the_manifest_of_a_real_run(tmp_path: Path) -> None:
    write_set(tmp_path, N)
    real = execute(run_config(tmp_path), engine=Counting()).path
    recs = [Rec(sid, 1.0, {"data_source": "MyOwnSet"}) for sid in expected_ids(N)]
    built = write_run(tmp_path / "built", "letter-a", {BENCH: recs})
    docs = [RunDir(p).manifest().dump() for p in (real, built)]
    assert _differences(_shape(docs[0]), _shape(docs[1])) == []
    assert docs[0]["specs"].keys() == docs[1]["specs"].keys() == {BENCH}
    reports = [load_run(p, bootstrap=2).benchmarks[BENCH] for p in (real, built)]
    assert [r.aggregation for r in reports] == [reports[0].aggregation] * 2
    assert [r.counts.total for r in reports] == [N, N]
