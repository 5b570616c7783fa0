"""The router: ``score(sample, prediction)`` by ``sample.task_type``.

A scorer is a plain function ``(prediction, target, sample) -> Score``; which scorer a
task type has is said by its registration in :mod:`evalkit.tasks` (with its aliases,
prompt template and target parser). ``@scorer("name", "alias", ...)`` registers a new task
type scored by the decorated function: adding one is one registration; nothing here changes.
"""

from __future__ import annotations

import functools
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, TypeAlias, cast

from evalkit import tasks
from evalkit.sample import Sample
from evalkit.scoring.context import NO_CONTEXT, ScoringContext
from evalkit.scoring.extras import EXTRAS
from evalkit.scoring.prefill import assistant_turn
from evalkit.scoring.rules import get_rule, rules_for
from evalkit.scoring.types import Score

if TYPE_CHECKING:
    from evalkit.engines.base import Completion

Prediction: TypeAlias = "str | Completion | None"
"""What a scorer reads: a reply's text, or the engine's Completion (its first text)."""

ScorerFn = Callable[[str, Any, Sample], Score]


class _Scorers:
    """Each task type's scorer by name (a view of :mod:`evalkit.tasks`)."""

    def get(self, name: str) -> ScorerFn:
        """The scorer of task type ``name`` (or an alias), imported on first use."""
        return tasks.get(name).scorer_fn()

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name in tasks.names()

    def __iter__(self) -> Iterator[str]:
        return iter(tasks.names())


SCORERS = _Scorers()


def scorer(name: str, *aliases: str) -> Callable[[ScorerFn], ScorerFn]:
    """Register a new task type scored by the decorated function (duplicates error)."""

    def deco(fn: ScorerFn) -> ScorerFn:
        tasks.register(tasks.TaskType(name, fn, aliases))
        return fn

    return deco


canonical_task_type = tasks.canonical
"""The canonical task type for a name or an alias (:func:`evalkit.tasks.canonical`)."""
task_types = tasks.names
"""Canonical task types, each with its scorer (:func:`evalkit.tasks.names`)."""


def score(
    sample: Sample,
    prediction: Prediction,
    ctx: ScoringContext = NO_CONTEXT,
    *,
    scorer_name: str | None = None,
    rule: str | None = None,
    extras: bool = True,
) -> Score:
    """Score ``prediction`` (text or an engine Completion) for ``sample`` in ``ctx``.

    ``ctx`` carries the judge that an LLM-judged task type's scorer and the judged extra
    metrics ask (synchronously here; async callers use ``evalkit.scoring.ascore``).

    ``scorer_name`` overrides the routing by ``sample.task_type`` (a benchmark spec that
    names its scorer explicitly). ``rule`` picks a registered extraction rule of that task
    type (``evalkit.scoring.rules``; None or ``"evalkit"`` = the task type's own scorer).
    ``extras=False`` skips the sample's extra metrics (scoring under secondary rules).
    Where the sample records a pre-filled assistant prefix, ``prediction`` is the model's
    continuation: an official rule reads it as is, evalkit's rule reads prefix + it.

    An unknown task type is a configuration error and raises; anything wrong with the
    prediction itself scores 0 with a reason. A bug inside a scorer (it raised) does not
    raise here either, so one sample never stops a run, but it is no 0: the Score has no
    value and carries the traceback in ``failed`` (``Score.scorer_failed``); a run
    records the sample as failed at stage ``score`` and reports show it as "scorer
    failed". The extra metrics a sample names in ``fields["extra_metrics"]`` (``EXTRAS``)
    then add their figures to the metadata (not to a failed Score).
    """
    task = tasks.get(scorer_name or sample.task_type)
    if rule is None or rule == "evalkit":
        fn, robust = SCORERS.get(task.name), True
    else:
        fn, robust = get_rule(rule, task.name).fn, False
    if robust and task.judged:  # a judged task type's scorer is given the context's judge
        fn = functools.partial(cast("Callable[..., Score]", fn), judge=ctx.judge)
    text = _text(prediction)
    try:
        # a reply that continued a pre-filled turn: official rules read it as their code
        # did (the continuation), evalkit's reads the whole turn (evalkit.scoring.prefill)
        seen = assistant_turn(text, sample) if robust else text
        result = fn(seen, sample.target, sample)
    except Exception as exc:  # a bug, not the model's fault: flagged, never a plausible 0
        return Score.scorer_failed(exc)
    for name in (sample.fields.get("extra_metrics") or ()) if extras and not result.failed else ():
        result = EXTRAS.get(str(name))(text, sample, result, ctx.judge)
    return result


def _text(prediction: Prediction) -> str:
    if isinstance(prediction, str):
        return prediction
    text = getattr(prediction, "text", None)  # evalkit.engines.base.Completion
    if isinstance(text, str):
        return text
    return "" if prediction is None else str(prediction)


def score_rules(
    sample: Sample, prediction: Prediction, scorer_name: str | None = None, skip: str | None = None
) -> dict[str, Score]:
    """``prediction`` scored under every registered rule of the sample's task type
    (``skip``: a rule already scored, e.g. the headline). Extra metrics are not run."""
    kind = canonical_task_type(scorer_name or sample.task_type)
    # a "+judge" rule is its base rule plus judge calls: asked as the headline only
    return {
        name: score(sample, prediction, scorer_name=kind, rule=name, extras=False)
        for name, r in rules_for(kind).items()
        if name != skip and r.fallback is None
    }
