"""What a finished run amounts to, for the command's exit status and its last line.

A run in which every sample failed has no result to report: ``evalkit run`` (and
``evalkit score``) then exit non-zero with one line saying why, the most common failure
reason with its count, instead of an aggregate of zeros that reads like a model's score.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalkit.records import SampleRecord
    from evalkit.rundir import RunDir

_PATHS = re.compile(r"[^\s(),]*/[^\s(),]*")


def reason_of(record: SampleRecord) -> str:
    """A failure's reason with its paths blanked, so that one cause over many files
    counts as one reason (``media not found: ... (searched ...)``)."""
    error = record.error or "no error recorded"
    first = error.strip().splitlines()[0] if error.strip() else error
    return f"{_PATHS.sub('...', first)[:160]} (stage {record.stage})"


def all_failed(rundir: RunDir, benchmarks: Iterable[str]) -> str | None:
    """None unless the run's ``benchmarks`` hold records and every one of them failed;
    then one line: how many, and the most common reason with its count."""
    reasons: Counter[str] = Counter()
    total = 0
    example = ""
    for name in benchmarks:
        if not rundir.store_path(name).is_file():
            continue
        with rundir.store(name) as store:
            if "ok" in store.statuses().values():
                return None  # known without reading back a record (and its reply)
            for record in store.records():
                total += 1
                if record.status == "ok":
                    return None
                reasons[reason_of(record)] += 1
                example = example or str(rundir.store_path(name))
    if not total:
        return None
    (reason, n), *others = reasons.most_common()
    rest = f"; {len(others)} other reason(s)" if others else ""
    return (
        f"every sample failed ({total} of {total}): {n} x {reason}{rest}; "
        f"each sample's error is in {example}"
    )
