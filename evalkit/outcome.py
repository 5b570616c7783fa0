"""What a finished run amounts to, for the command's exit status and its last line.

A run in which every sample failed has no result to report: ``evalkit run`` (and
``evalkit score``) then exit non-zero with one line saying why, the most common failure
reason with its count, instead of an aggregate of zeros that reads like a model's score.
So does a run whose engine failed on more of its samples than ``--max-engine-failures``
allows: those samples count as wrong in the aggregate, so the number is not the model's.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalkit.records import SampleRecord
    from evalkit.rundir import RunDir

_PATHS = re.compile(r"[^\s(),]*/[^\s(),]*")
_REQUEST = re.compile(r"\brequest [^\s()]+: ")


def reason_of(record: SampleRecord) -> str:
    """A failure's reason with its paths and request ids blanked, so that one cause over
    many files or samples counts as one reason (``media not found: ... (searched ...)``)."""
    error = record.error or "no error recorded"
    first = error.strip().splitlines()[0] if error.strip() else error
    first = _REQUEST.sub("", first)
    return f"{_PATHS.sub('...', first)[:160]} (stage {record.stage})"


@dataclass
class Tally:
    """A run's records counted once: how many, the failures' reasons, the engine's."""

    total: int = 0
    ok: int = 0
    reasons: Counter[str] = field(default_factory=Counter)
    engine: Counter[str] = field(default_factory=Counter)
    store: str = ""
    """A results file holding failures (named so each error can be read there)."""

    @classmethod
    def of(cls, rundir: RunDir, benchmarks: Iterable[str]) -> Tally:
        """Each sample's latest record in the run's ``benchmarks`` (missing stores hold
        none): the statuses counted, the failures read back for their reasons."""
        tally = cls()
        for name in benchmarks:
            if not rundir.store_path(name).is_file():
                continue
            with rundir.store(name) as store:
                statuses = store.statuses().values()
                tally.total += len(statuses)
                tally.ok += sum(status == "ok" for status in statuses)
                for record in store.failures():
                    tally.add_failure(record, str(rundir.store_path(name)))
        return tally

    def add_failure(self, record: SampleRecord, store: str) -> None:
        """Count one failed sample's reason (``store``: the file it is in)."""
        reason = reason_of(record)
        self.reasons[reason] += 1
        if record.stage == "engine":
            self.engine[reason] += 1
        self.store = self.store or store

    def all_failed(self) -> str | None:
        """One line when there are records and every one failed, else None."""
        if not self.total or self.ok:
            return None
        return (
            f"every sample failed ({self.total} of {self.total}): {_most(self.reasons)}; "
            f"each sample's error is in {self.store}"
        )

    def engine_failed(self, allowed: float, resume: str) -> str | None:
        """One line when the engine failed on more than ``allowed`` of the records (a
        share), else None; ``resume``: the run directory a rerun resumes."""
        failed = sum(self.engine.values())
        if not failed or failed <= allowed * self.total:
            return None
        return (
            f"the engine failed on {failed} of {self.total} samples ({failed / self.total:.0%}; "
            f"--max-engine-failures allows {allowed:g}): {_most(self.engine)}; they count as "
            f"wrong until `evalkit run --resume {resume} --retry-failed` reruns them"
        )


def _most(reasons: Counter[str]) -> str:
    (reason, n), *others = reasons.most_common()
    rest = f"; {len(others)} other reason(s)" if others else ""
    return f"{n} x {reason}{rest}"


def all_failed(rundir: RunDir, benchmarks: Iterable[str]) -> str | None:
    """None unless the run's ``benchmarks`` hold records and every one of them failed;
    then one line: how many, and the most common reason with its count."""
    names = list(benchmarks)
    if "ok" in _statuses(rundir, names):
        return None  # known without reading back a record (and its reply)
    return Tally.of(rundir, names).all_failed()


def run_failed(rundir: RunDir, benchmarks: Iterable[str], max_engine_failures: float) -> str | None:
    """The line that makes a finished run exit non-zero (every sample failed, or the engine
    failed on more than ``max_engine_failures`` of them), else None."""
    names = list(benchmarks)
    if "failed" not in _statuses(rundir, names):
        return None
    tally = Tally.of(rundir, names)
    return tally.all_failed() or tally.engine_failed(max_engine_failures, str(rundir.path))


def _statuses(rundir: RunDir, benchmarks: list[str]) -> set[str]:
    """The statuses the run's samples have (no record read back)."""
    found: set[str] = set()
    for name in benchmarks:
        if rundir.store_path(name).is_file():
            with rundir.store(name) as store:
                found |= set(store.statuses().values())
    return found
