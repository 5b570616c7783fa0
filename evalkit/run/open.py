"""Opening a run directory: its manifest recorded (or checked against the recorded one),
its invalid rows written."""

from __future__ import annotations

from evalkit.run.config import RunConfig
from evalkit.run.plan import BenchRun, run_manifest
from evalkit.rundir import RunDir


def open_run(cfg: RunConfig, rundir: RunDir, benches: list[BenchRun]) -> str:
    """Record (or check) the run's manifest and its invalid rows; the fingerprint."""
    fingerprint = rundir.open(run_manifest(cfg, benches), force=cfg.force)
    for b in benches:  # invalid rows, for the report (invalid/<benchmark>.jsonl)
        rundir.write_problems(b.name, b.problems)
    return fingerprint
