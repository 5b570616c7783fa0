"""The scorer registry and the router: ``score(sample, prediction)`` by ``sample.task_type``.

A scorer is a plain function ``(prediction, target, sample) -> Score`` registered with
``@scorer("canonical_name", "alias", ...)``. Adding a task type is one new module with one
registration; nothing here changes.
"""

from __future__ import annotations

import difflib
import re
from collections.abc import Callable
from typing import Any

from evalkit.registry import Registry, RegistryError
from evalkit.sample import Sample
from evalkit.scoring.prefill import assistant_turn
from evalkit.scoring.types import Score

ScorerFn = Callable[[str, Any, Sample], Score]

SCORERS: Registry[ScorerFn] = Registry("scorer")

ExtraFn = Callable[[str, Sample, Score], Score]
# Secondary per-sample metrics that a sample asks for by name in
# ``fields["extra_metrics"]`` (VCR-Bench's judged CoT score): each gets the prediction,
# the sample and the task scorer's Score, and returns that Score with its own figures
# added to the metadata, the value untouched. Samples without the field are unaffected.
EXTRAS: Registry[ExtraFn] = Registry("extra metric")
_CANONICAL: dict[str, str] = {}  # normalised name or alias -> canonical task type


def _norm(name: str) -> str:
    # "Spatial-Temporal Grounding", "spatial_temporal grounding" -> "spatial_temporal_grounding"
    return re.sub(r"[\s\-_/]+", "_", name.strip().lower())


def scorer(name: str, *aliases: str) -> Callable[[ScorerFn], ScorerFn]:
    """Register a scorer under a canonical task type and any aliases (duplicates error)."""

    def deco(fn: ScorerFn) -> ScorerFn:
        SCORERS.register(name, fn)
        for key in (name, *aliases):
            k = _norm(key)
            if k in _CANONICAL and _CANONICAL[k] != name:
                raise RegistryError(f"task type alias {key!r} already names {_CANONICAL[k]!r}")
            _CANONICAL[k] = name
        return fn

    return deco


def canonical_task_type(name: str) -> str:
    """The canonical task type for ``name`` or an alias (case/space/hyphen-insensitive)."""
    key = _norm(str(name))
    if key in _CANONICAL:
        return _CANONICAL[key]
    close = difflib.get_close_matches(key, list(_CANONICAL), n=6, cutoff=0.6)
    names = list(dict.fromkeys(_CANONICAL[c] for c in close))[:3]
    hint = f"; did you mean {', '.join(map(repr, names))}?" if names else ""
    known = ", ".join(sorted(set(_CANONICAL.values())))
    raise RegistryError(f"unknown task type {name!r}{hint} (known: {known})")


def task_types() -> list[str]:
    """Canonical task types with a registered scorer."""
    return sorted(set(_CANONICAL.values()))


def score(
    sample: Sample,
    prediction: Any,
    scorer_name: str | None = None,
    rule: str | None = None,
    extras: bool = True,
) -> Score:
    """Score ``prediction`` (text or an engine Completion) for ``sample``.

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
    kind = canonical_task_type(scorer_name or sample.task_type)
    if rule is None or rule == "evalkit":
        fn, robust = SCORERS.get(kind), True
    else:
        from evalkit.scoring.rules import get_rule

        fn, robust = get_rule(rule, kind).fn, False
    text = _text(prediction)
    try:
        # a reply that continued a pre-filled turn: official rules read it as their code
        # did (the continuation), evalkit's reads the whole turn (evalkit.scoring.prefill)
        seen = assistant_turn(text, sample) if robust else text
        result = fn(seen, sample.target, sample)
    except Exception as exc:  # a bug, not the model's fault: flagged, never a plausible 0
        return Score.scorer_failed(exc)
    for name in (sample.fields.get("extra_metrics") or ()) if extras and not result.failed else ():
        result = EXTRAS.get(str(name))(text, sample, result)
    return result


def _text(prediction: Any) -> str:
    if isinstance(prediction, str):
        return prediction
    text = getattr(prediction, "text", None)  # evalkit.engines.base.Completion
    if isinstance(text, str):
        return text
    return "" if prediction is None else str(prediction)


def score_rules(
    sample: Sample, prediction: Any, scorer_name: str | None = None, skip: str | None = None
) -> dict[str, Score]:
    """``prediction`` scored under every registered rule of the sample's task type
    (``skip``: a rule already scored, e.g. the headline). Extra metrics are not run."""
    from evalkit.scoring.rules import rules_for

    kind = canonical_task_type(scorer_name or sample.task_type)
    return {
        name: score(sample, prediction, kind, rule=name, extras=False)
        for name in rules_for(kind)
        if name != skip
    }
