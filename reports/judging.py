"""Notes on a benchmark's LLM judge: was it down, how many samples did it leave unjudged.

The judge's verdict records carry ``judge_status`` (the answer's judge) or
``cot_judge_status`` (VCR-Bench's CoT judge): ``failed`` when the call failed (timeout,
error), ``unavailable`` when the circuit breaker had marked the judge down and the call
was not made (``evalkit.scoring.judge_guard``). Either way the sample is not scored, never 0.
"""

from __future__ import annotations

from evalkit.records import SampleRecord


def judge_status(record: SampleRecord) -> str | None:
    """``unavailable``, ``failed`` or None (judged, or never sent to a judge)."""
    if record.score is None:
        return None
    meta = record.score.metadata
    found = {meta.get("judge_status"), meta.get("cot_judge_status")}
    return next((s for s in ("unavailable", "failed") if s in found), None)


def judge_notes(records: list[SampleRecord]) -> list[str]:
    """One note when the judge was down or failed calls (none when it answered them all)."""
    statuses = [judge_status(r) for r in records]
    down, failed = statuses.count("unavailable"), statuses.count("failed")
    if down:
        return [
            f"the judge was down: {down + failed} sample(s) left unjudged "
            "(judge unavailable or failed; not scored, never 0)"
        ]
    if failed:
        return [f"{failed} sample(s) had a failed judge call (not scored, never 0)"]
    return []
