"""The run record: one typed model for a sample's line in a results store.

The writers below (:func:`ok_record` / :func:`failed_record`, used by the pipeline and
``evalkit score``) build a :class:`SampleRecord`; the store turns it into its line
(:meth:`SampleRecord.line`, the one place a record becomes a line) and every reader, the
store's own resume and the report alike, turns a line back into one (:func:`check_line`,
the one place a line becomes a record), so the contract lives in one place and readers
take the model, never its string keys. A line that does not fit is named (file, line,
field) and left out, never turned into a crash or a score outside [0, 1].
"""

from __future__ import annotations

import json
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evalkit.errors import Problem
from evalkit.sample import Sample
from evalkit.scoring.types import Score, ScorerFailure
from evalkit.scoring.verdicts import Verdicts

_STRICT = ConfigDict(extra="forbid", strict=True, use_attribute_docstrings=True)


class ScoreRecord(BaseModel):
    """The headline verdict of a sample (``Score.to_dict()``)."""

    model_config = _STRICT

    value: float | None = Field(default=None, ge=0.0, le=1.0)
    """In [0, 1]; None = could not be scored (e.g. judged with no judge), never a 0."""
    answer: Any = None
    """What the rule extracted from the prediction."""
    explanation: str = ""
    """Why the value is what it is."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Rule-specific numbers an aggregation may read (an IoU, a format credit)."""


class RuleVerdict(BaseModel):
    """Another rule's compact verdict (``evalkit.scoring.verdicts.compact_verdict``)."""

    model_config = _STRICT

    value: float | None = Field(default=None, ge=0.0, le=1.0)
    """In [0, 1], or None (not scored)."""
    answer: Any = None
    """The answer this rule extracted (shortened)."""
    metadata: dict[str, float] = Field(default_factory=dict)
    """Numeric metadata only."""
    error: str | None = None
    """The rule raised: its explanation (shown as an error, not taken for a 0)."""


class Tokens(BaseModel):
    """Token counts of the generation."""

    model_config = _STRICT

    prompt: int | None = None
    """Prompt tokens, as the engine counted them."""
    output: int | None = None
    """Generated tokens."""


class PromptText(BaseModel):
    """What the model was asked, as evalkit rendered it (before the engine's chat template
    and visual placeholders): the text ``prompt_hash`` is the hash of."""

    model_config = _STRICT

    text: str
    """The user turn's text."""
    system: str | None = None
    """The system prompt, where one was sent."""
    assistant_prefix: str | None = None
    """The start of the assistant's turn the model continued, where one was pre-filled."""


class SampleRecord(BaseModel):
    """One sample's line in ``runs/<id>/<benchmark>.jsonl``, ``ok`` or ``failed``.

    Fields are declared in the order the line is written; fields a writer leaves out
    (``rule``/``rules`` without other rules, ``predictions`` with one completion, the
    generation fields of a failed sample) stay out of the line (``dump``).
    """

    model_config = _STRICT

    id: str
    """The sample id (resume skips ids already recorded)."""
    status: Literal["ok", "failed"]
    """ok = generated and scored; failed = IO, engine, scorer or prediction failure."""
    stage: str | None = None
    """Failed only: where it failed (io, engine, score, predictions)."""
    error: str | None = None
    """Failed only: ``ExceptionType: message``."""
    traceback: str | None = None
    """Failed at stage ``score`` only: the scorer's traceback (a bug to fix, reported as
    "scorer failed"; the model's own failures, e.g. code that does not run, are scores)."""
    prediction: str | None = None
    """The (first) completion text; None when a failure came before generation."""
    score: ScoreRecord | None = None
    """The headline verdict (ok), None (failed)."""
    rule: str | None = None
    """The headline extraction rule."""
    rules: dict[str, RuleVerdict] | None = None
    """Every other registered rule's verdict, by rule name."""
    prompt_hash: str | None = None
    """Hash of what the model was asked; None for predictions made elsewhere."""
    prompt: PromptText | None = None
    """What the model was asked, in full (kept in the record, not in a side file keyed by
    the hash: prompts are per sample, so a side file would save nothing, and the record
    already travels from a Ray replica to the driver). None: predictions made elsewhere,
    a failure before the prompt was rendered, or a run written before it was kept."""
    benchmark: str
    """The benchmark the sample belongs to."""
    task_type: str
    """The sample's task type (picks the scorer and the aggregation)."""
    target: Any = None
    """The reference answer."""
    fields: dict[str, Any] = Field(default_factory=dict)
    """The sample's breakdown fields (duration, domain, ...)."""
    tokens: Tokens | None = None
    """Prompt/output token counts (ok records of a run)."""
    timings: dict[str, float | None] = Field(default_factory=dict)
    """Wall-clock stamps of each stage (io_start, io_end, submitted, ..., scored)."""
    fingerprint: str
    """Fingerprint of the configuration that produced the record (config.json or an
    amendment of it)."""
    predictions: list[str] | None = None
    """Every completion when more than one was sampled."""
    replica: str | None = None
    """The replica that produced the record (runs with ``--replicas``; the report's
    per-replica timeline reads it); absent in single-engine runs."""

    @model_validator(mode="after")
    def _by_status(self) -> SampleRecord:
        if self.status == "ok" and self.score is None:
            raise ValueError("an ok record needs a score")
        if self.status == "failed" and (self.stage is None or self.error is None):
            raise ValueError("a failed record needs its stage and error")
        if self.status == "failed" and self.score is not None:
            raise ValueError("a failed record has no score")
        return self

    def dump(self) -> dict[str, Any]:
        """The line as written: only the fields the writer set, in declaration order."""
        return self.model_dump(exclude_unset=True)

    def line(self) -> str:
        """The record's line in a results store (JSON + newline, fields as :meth:`dump`)."""
        return json.dumps(self.dump(), ensure_ascii=False, default=_jsonable) + "\n"

    def stamped(self, replica: str) -> SampleRecord:
        """This record stamped with the replica that produced it (validated, so a bad name
        fails here, in the replica, not in the driver's store)."""
        return SampleRecord.model_validate({**self.dump(), "replica": replica})


def check_line(raw: bytes | str, file: str, line: int) -> SampleRecord | Problem:
    """One store line as a record, or what is wrong with it (file, line, field)."""
    row = f"line {line}"
    try:
        obj = json.loads(raw)
    except ValueError as exc:
        return Problem(file, row, None, f"not JSON ({exc})")
    if not isinstance(obj, dict):
        return Problem(file, row, None, f"not a JSON object ({type(obj).__name__})")
    try:
        return SampleRecord.model_validate(obj)
    except ValidationError as exc:
        err = exc.errors()[0]
        where = ".".join(str(p) for p in err["loc"])
        more = f" (+{exc.error_count() - 1} more)" if exc.error_count() > 1 else ""
        got = f", got {_short(err['input'])}" if where and "input" in err else ""
        return Problem(file, row, where or None, f"{err['msg']}{got}{more}")


def _jsonable(obj: Any) -> Any:
    """Fallback encoder: numpy scalars/arrays and other odd values a scorer may return."""
    if hasattr(obj, "tolist"):
        return obj.tolist()
    if hasattr(obj, "to_dict"):
        return obj.to_dict()
    return str(obj)


def _short(value: Any, limit: int = 60) -> str:
    text = repr(value)
    return text if len(text) <= limit else text[: limit - 1] + "…"


# -- the writers: the one place a sample's line in the results store is built ----------


def ok_record(
    sample: Sample,
    result: Score | Verdicts,
    texts: list[str],
    *,
    fingerprint: str,
    timings: dict[str, Any],
    prompt_hash: str | None = None,
    tokens: dict[str, int] | None = None,
    prompt: dict[str, str] | None = None,
) -> SampleRecord:
    """The record of a scored sample (``evalkit run`` and ``evalkit score`` both write it).

    With ``Verdicts`` it names the headline ``rule`` and holds the compact verdict of every
    other rule of the task type under ``rules``. ``prompt_hash``/``prompt``/``tokens`` are
    None for predictions made elsewhere (``evalkit score``): what the model was asked is
    unknown. ``prompt`` is a :class:`PromptText` as a dict (``pipeline.prompt_text``).
    """
    if scorer_failure(result) is not None:  # else it would read as "not scored"
        raise ValueError(
            f"sample {sample.id!r}: its scorer failed; record it with failed_record(stage="
            "'score', traceback=...), as Pipeline._finish does"
        )
    score = result.score if isinstance(result, Verdicts) else result
    record: dict[str, Any] = {
        "id": sample.id,
        "status": "ok",
        "prediction": texts[0] if texts else "",
        "score": score.to_dict(),
    }
    if isinstance(result, Verdicts):
        record["rule"] = result.rule
        record["rules"] = result.compact_others()
    record.update(
        prompt_hash=prompt_hash,
        **({"prompt": prompt} if prompt is not None else {}),
        **_sample_part(sample),
        tokens=tokens,
        timings=timings,
        fingerprint=fingerprint,
    )
    if len(texts) > 1:
        record["predictions"] = texts
    return SampleRecord.model_validate(record)


def failed_record(
    sample: Sample,
    stage: str,
    error: str,
    *,
    fingerprint: str,
    timings: dict[str, Any],
    prediction: str | None = None,
    traceback: str | None = None,
    prompt: dict[str, str] | None = None,
) -> SampleRecord:
    """The record of a sample that failed at ``stage`` (io, engine, score, predictions);
    ``traceback`` where the failure is a bug to fix (a scorer that raised); ``prompt``
    where it was rendered before the failure (engine, score)."""
    record: dict[str, Any] = {
        "id": sample.id,
        "status": "failed",
        "stage": stage,
        "error": error,
        "prediction": prediction,
        "score": None,
        **({"prompt": prompt} if prompt is not None else {}),
        **_sample_part(sample),
        "timings": timings,
        "fingerprint": fingerprint,
    }
    if traceback is not None:
        record["traceback"] = traceback
    return SampleRecord.model_validate(record)


def scorer_failure(result: Score | Verdicts) -> ScorerFailure | None:
    """The headline scorer's failure, if it raised (other rules' failures stay in their
    verdicts, for the extraction-sensitivity report)."""
    return (result.score if isinstance(result, Verdicts) else result).failed


def _sample_part(sample: Sample) -> dict[str, Any]:
    """What a report needs of the sample, so a run directory is self-contained."""
    return {
        "benchmark": sample.benchmark,
        "task_type": sample.task_type,
        "target": sample.target,
        "fields": sample.fields,
    }
