"""Official pipelines with their judge: the rule first, the authors' LLM for the rest.

Some benchmarks' official scoring applies hand-written matching to a reply and asks an
LLM only when no rule matched (TempCompass's ``eval_*.py`` without ``--disable_llm``). A
rule registered by :func:`judge_rule` as ``<name>+judge`` reproduces that: its base rule
(``<name>``) reads every reply; only the replies it leaves undecided go to the run's
judge, with the authors' own prompt (``JudgeFallback.prompt``, pinned verbatim in the
rule module with its source) and read back by the authors' own parser. Every Score says
who decided it: ``metadata["decided_by"]`` is ``"rule"`` or ``"judge"`` (with the judge's
reply under ``judgement``).

Without a judge the rule is unavailable, never a silent fallback to the base rule:
``evalkit score --rule official+judge`` refuses to start without ``--judge-model``, and
called without one (the sync ``score``), an undecided reply is not scored (None), not 0.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.judge import LLMJudge
from evalkit.scoring.judge_guard import JUDGE_UNAVAILABLE
from evalkit.scoring.rules import get_rule, rule
from evalkit.scoring.types import Score

SUFFIX = "+judge"


@dataclass(frozen=True)
class JudgeFallback:
    """The judge an official pipeline asks when its rule cannot decide a reply."""

    base: str
    """The rule tried first (the benchmark's official rule, e.g. ``tempcompass``)."""
    prompt: Callable[[Sample, str], str]
    """The authors' judge prompt for a sample and the reply as their code cleaned it."""
    parse: Callable[[str], float | None]
    """The authors' reading of the judge's reply (None: it names no verdict)."""
    undecided: Callable[[Score], bool]
    """True for a base-rule Score the authors' code would send to the judge."""
    unreadable: float | None = None
    """The value the authors' code gives when the judge's reply has no verdict."""
    system: str | None = None
    """The authors' system prompt for the judge."""
    max_tokens: int = 256
    """The authors' token cap for the judge's reply."""


def judge_rule(name: str, *task_types: str, fallback: JudgeFallback, source: str) -> None:
    """Register ``name`` (``<base>+judge``) for ``task_types``: the base rule, then the
    judge for what it leaves undecided (:func:`ascore_with_judge`)."""
    if not name.endswith(SUFFIX):
        raise ValueError(f"a judge-fallback rule is named '<base>{SUFFIX}', not {name!r}")

    def without_judge(prediction: str, target: Any, sample: Sample) -> Score:
        """The official rule, then the authors' LLM judge for the replies it cannot decide."""
        base = get_rule(fallback.base, sample.task_type).fn(prediction, target, sample)
        if not fallback.undecided(base):
            return _decided_by(base, "rule")
        why = f"not scored: {fallback.base} cannot decide this reply and {name} asks the judge"
        return Score(None, None, f"{why}; none configured", {**base.metadata, "decided_by": None})

    rule(name, *task_types, source=source, fallback=fallback)(without_judge)


def _decided_by(s: Score, who: str) -> Score:
    return replace(s, metadata={**s.metadata, "decided_by": who})


def fallback_of(rule_name: str | None, task_type: str) -> JudgeFallback | None:
    """The judge fallback of rule ``rule_name`` for ``task_type`` (None: a plain rule)."""
    if not rule_name or not rule_name.endswith(SUFFIX):
        return None
    found: JudgeFallback | None = get_rule(rule_name, task_type).fallback
    return found


async def ascore_with_judge(
    fallback: JudgeFallback, sample: Sample, prediction: str, judge: LLMJudge
) -> Score:
    """The base rule's verdict, or the judge's where the base rule cannot decide."""
    from evalkit.scoring.router import score

    base = score(sample, prediction, rule=fallback.base, extras=False)
    if base.failed is not None or not fallback.undecided(base):
        return _decided_by(base, "rule")
    prompt = fallback.prompt(sample, prediction)
    value, text, error = await judge.aask(
        prompt, fallback.parse, system=fallback.system, max_tokens=fallback.max_tokens
    )
    meta = {**base.metadata, "decided_by": "judge", "judge_model": judge.model}
    meta["judgement"] = text
    if not text and error is not None:  # the call failed: not the reply's fault
        status = "unavailable" if JUDGE_UNAVAILABLE in error else "failed"
        return Score(None, None, error, {**meta, "judge_status": status})
    if value is None:
        value = fallback.unreadable
        return Score(value, base.answer, f"{error}: the official code rates it {value}", meta)
    return Score(value, base.answer, f"judge {judge.model}: {value:g} (rule undecided)", meta)


__all__ = ["SUFFIX", "JudgeFallback", "ascore_with_judge", "fallback_of", "judge_rule"]
