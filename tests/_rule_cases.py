"""Builders for the official-rule tests of MVBench, TempCompass, VSI-Bench, OVO-Bench,
ODV-Bench and LiveSports-3K-QA: samples, a rule's verdict, real rows, a wrong reply."""

from __future__ import annotations

from typing import Any

from evalkit.bench.aggregations import Scored
from evalkit.bench.unified import load_unified
from evalkit.sample import Sample
from evalkit.scoring.rules import get_rule
from evalkit.scoring.types import Score
from tests._realdata import real_file


def sample(
    task_type: str = "multiple_choice",
    target: Any = "B",
    options: list[str] | None = None,
    question: str = "What happens?",
    **fields: Any,
) -> Sample:
    """A sample with ``target``, option texts (four by default for choice questions)."""
    if options is None:
        options = ["cat", "dog", "owl", "fox"] if task_type == "multiple_choice" else []
    return Sample(
        id="s1",
        task_type=task_type,
        question=question,
        target=target,
        options=options,
        fields=fields,
    )


def verdict(name: str, s: Sample, reply: str) -> Score:
    """Rule ``name`` of the sample's task type on ``reply`` (exceptions propagate)."""
    return get_rule(name, s.task_type).fn(reply, s.target, s)


def scored(task_type: str, value: float | None, **fields: Any) -> Scored:
    """One scored sample with breakdown ``fields`` (for aggregation tests)."""
    return Scored(sample(task_type, **fields), value)


def real_samples(filename: str) -> list[Sample]:
    """Samples of one EasyVideoR1 real-data file (tests skip when the folder is absent)."""
    return load_unified(real_file(filename), video_root="/videos")


def wrong_reply(s: Sample) -> str:
    """A reply that names another answer than the sample's target."""
    if s.task_type == "multiple_choice":
        return next(x for x in s.letters if x != s.target)
    if s.task_type == "boolean":
        return "No" if str(s.target).lower() in ("yes", "true", "1") else "Yes"
    return str(int(float(s.target)) * 3 + 7)
