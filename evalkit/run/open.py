"""Opening a run directory for a plan: the one writer's lock, the manifest recorded (or
checked against the recorded one: ``--force`` records a change as an amendment), the
invalid rows written, the samples whose media are missing recorded failed
(``--allow-missing``), and the results stores. The in-process runner and the Ray driver
open a run through :func:`open_run` alike; replicas open none (they return records)."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.run.config import RunConfig
from evalkit.run.plan import RunPlan
from evalkit.run.preflight import record_missing
from evalkit.rundir import RunDir, new_run_id
from evalkit.store import Store

if TYPE_CHECKING:
    from evalkit.bench.media import MissingMedia


def run_path(cfg: RunConfig) -> Path:
    """The run directory ``cfg`` writes: the one it resumes, or a new one under
    ``runs_dir`` (named ``run_id``, else a new time-stamped id)."""
    return Path(cfg.resume) if cfg.resume else Path(cfg.runs_dir) / (cfg.run_id or new_run_id())


@dataclass
class OpenRun:
    """A run directory opened for a plan by this process, which holds its lock."""

    plan: RunPlan
    dir: RunDir
    fingerprint: str
    """The plan's fingerprint, as ``RunDir.open`` recorded or checked it."""
    media_missing: dict[str, int] = field(default_factory=dict)
    """Samples recorded failed now because their media are missing, per benchmark."""
    _stores: dict[str, Store] = field(default_factory=dict)

    @property
    def path(self) -> Path:
        """The run directory."""
        return self.dir.path

    def store(self, bench: str) -> Store:
        """Benchmark ``bench``'s results store, opened on first use and kept open until
        the run closes (a store not asked for is not created)."""
        if bench not in self._stores:
            self._stores[bench] = self.dir.store(bench)
        return self._stores[bench]

    def close(self) -> None:
        """Close the stores opened (their records are already durable)."""
        for store in self._stores.values():
            store.close()
        self._stores.clear()


@contextlib.contextmanager
def open_run(
    plan: RunPlan,
    path: Path,
    *,
    missing: dict[str, MissingMedia] | None = None,
    on_open: Callable[[Path], None] | None = None,
) -> Iterator[OpenRun]:
    """Open ``path`` for ``plan`` under its lock (held until the block ends): record or
    check the manifest (``plan.config.force`` allows a changed result setting), write each
    benchmark's invalid rows, call ``on_open(path)``, then record the samples whose media
    are ``missing`` as failed and leave them out of ``plan``'s samples."""
    rundir = RunDir(path)
    with rundir.lock():  # before anything is written: one writer per run directory
        fingerprint = rundir.open(plan.manifest, force=plan.config.force)
        for b in plan.benches:  # invalid rows, for the report (invalid/<benchmark>.jsonl)
            rundir.write_problems(b.name, b.problems)
        if on_open is not None:
            on_open(path)
        unseen = record_missing(rundir, plan.benches, missing or {}, fingerprint)
        run = OpenRun(plan, rundir, fingerprint, unseen)
        try:
            yield run
        finally:
            run.close()
