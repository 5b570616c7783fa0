"""Which records of a store count, and which configuration made each.

Every line is validated against the run-record model (``evalkit.records``): a malformed
one is named (file, line, field) and left out. A record whose fingerprint matches neither
config.json nor one of its amendments was made under a configuration the run never
recorded: it is left out and flagged. The rest are counted per configuration, with what
each changed of this benchmark's settings.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path
from typing import Any

from evalkit.errors import Problem
from evalkit.records import SampleRecord, check_line
from evalkit.rundir import config_diff

_SHOW = 3


NEWLINE = b"\n"


def check_records(path: Path) -> tuple[list[SampleRecord], list[Problem]]:
    """The latest valid record per sample id, and every line that is not a valid record.

    Read-only: a torn last line (a run may still be writing) is skipped, not cut off.
    """
    data = path.read_bytes()
    latest: dict[str, SampleRecord] = {}
    problems: list[Problem] = []
    for lineno, line in enumerate(data[: data.rfind(b"\n") + 1].splitlines(), 1):
        if not line.strip():
            continue
        rec = check_line(line, path.name, lineno)
        if isinstance(rec, Problem):
            problems.append(rec)
        else:
            latest[rec.id] = rec  # a later record (a retry) supersedes an earlier one
    tail = data[data.rfind(b"\n") + 1 :]
    if tail.strip():  # named, not silently dropped: a run writing now, or one killed mid-write
        problems.append(
            Problem(
                path.name,
                f"line {data.count(NEWLINE) + 1}",
                None,
                f"torn last line ({len(tail)} bytes, no newline: a write cut short) left out; "
                "resuming the run cuts it off and reruns its sample",
            )
        )
    # by id, not file order: the order records land in depends on the async scheduling (and
    # on the replicas), and a report of the same records must not (bootstrap draws, ties)
    return [latest[k] for k in sorted(latest)], problems


def split_foreign(
    records: list[SampleRecord], configurations: list[dict[str, Any]]
) -> tuple[list[SampleRecord], list[SampleRecord]]:
    """(records made under a recorded configuration, the others)."""
    known = {c.get("fingerprint") for c in configurations}
    mine = [r for r in records if r.fingerprint in known]
    return mine, [r for r in records if r.fingerprint not in known]


def rejected_notes(problems: list[Problem], foreign: list[SampleRecord]) -> list[str]:
    """Notes naming the malformed lines and the records of an unknown configuration."""
    notes = []
    if problems:
        shown = "; ".join(str(p) for p in problems[:_SHOW])
        more = f" and {len(problems) - _SHOW} more" if len(problems) > _SHOW else ""
        notes.append(f"{len(problems)} malformed record(s) left out of every number: {shown}{more}")
    if foreign:
        fps = Counter(r.fingerprint for r in foreign)
        ids = ", ".join(repr(r.id) for r in foreign[:_SHOW])
        notes.append(
            f"{len(foreign)} record(s) left out: made under fingerprint(s) "
            f"{', '.join(f'{fp!r} ({n})' for fp, n in fps.items())} that neither config.json "
            f"nor an amendment records (copied from another run?), e.g. {ids}"
        )
    return notes


def provenance_note(
    name: str, records: list[SampleRecord], configurations: list[dict[str, Any]]
) -> list[str]:
    """How many records each configuration made, with what it changed of ``name``'s
    settings (only when the run was ever reopened under another fingerprint)."""
    if len({c.get("fingerprint") for c in configurations}) < 2:
        return []
    counts = Counter(r.fingerprint for r in records)
    base = _bench_view(configurations[0], name)
    parts, seen = [], set()
    for c in reversed(configurations):  # a fingerprint seen again is labelled by its latest
        fp = c.get("fingerprint")
        if fp in seen or not counts.get(fp):
            continue
        seen.add(fp)
        changed = "; ".join(config_diff(base, _bench_view(c, name)))
        parts.append(f"{counts[fp]} under {c['label']} ({fp}{': ' + changed if changed else ''})")
    pooled = f", the aggregate pools {len(parts)}" if len(parts) > 1 else ""
    return [
        f"records by configuration (settings above: the latest{pooled}): "
        + "; ".join(reversed(parts))
    ]


def _bench_view(configuration: dict[str, Any], name: str) -> dict[str, Any]:
    """The settings of one benchmark under a configuration (run-wide + its own)."""
    rc = dict(configuration.get("result_config") or {})
    own = (rc.pop("benchmarks", None) or {}).get(name) or {}
    return {**rc, **own}
