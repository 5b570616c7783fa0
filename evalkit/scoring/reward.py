"""Format score and the RL reward: w_acc·accuracy + w_fmt·format, from one scoring pass."""

from __future__ import annotations

import logging

from evalkit.sample import Sample
from evalkit.scoring.router import Prediction, score

log = logging.getLogger(__name__)


def format_score(sample: Sample, prediction: Prediction) -> float:
    """1 / 0.5 / 0: the answer is marked and parses for its type / parses unmarked / neither.

    Each scorer records this as ``metadata["format"]`` while extracting its answer, so the
    rule lives beside the parser of each type (see ``extract.format_level``).
    """
    return float(score(sample, prediction).metadata.get("format", 0.0))


def reward(
    sample: Sample, prediction: Prediction, w_acc: float = 0.9, w_fmt: float = 0.1
) -> dict[str, float | None]:
    """Per-key reward for the trainer: ``accuracy``, ``format``, ``overall`` and
    ``scorer_failed`` (1.0 when the scorer raised, else 0.0).

    ``accuracy`` is None when the sample could not be scored (an LLM-judged sample with
    no judge); ``overall`` is then None too, and the trainer decides what to do. A scorer
    that raises (a bug) gives reward 0 for this response rather than stopping training,
    but never silently: the traceback is logged as an error and ``scorer_failed`` is 1.0
    (the trainer counts it in its metrics, ``reward/scorer_failed``).
    """
    s = score(sample, prediction)
    if s.failed is not None:
        log.error(
            "scorer failed on sample %r (task type %r): reward 0 for this response\n%s",
            sample.id,
            sample.task_type,
            s.failed.traceback,
        )
        return {"accuracy": 0.0, "format": 0.0, "overall": 0.0, "scorer_failed": 1.0}
    fmt = float(s.metadata.get("format", 0.0))
    acc = s.value
    overall = None if acc is None else w_acc * acc + w_fmt * fmt
    return {"accuracy": acc, "format": fmt, "overall": overall, "scorer_failed": 0.0}
