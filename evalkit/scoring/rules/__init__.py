"""Answer-extraction rules: how a reply becomes a verdict, several per task type.

A benchmark's published number was produced by ITS evaluation code, and those codes
disagree on the same reply (one takes the first letter, one the character before the
first ")", one accepts an empty reply). A rule is a scorer, ``(prediction, target,
sample) -> Score``, registered under a name for one or more task types:

- ``evalkit``: the robust default, i.e. the task type's scorer in ``evalkit.scoring``;
- every other name: one benchmark's official rule (or a harness's, e.g. ``lmms_eval``),
  written from reading that code, quirks included, with the file named in ``source``.

A spec picks its headline rule (``scoring.rule``: its official one where it has one);
every sample is also scored under the other rules of its task type, so reports can show
how many verdicts flip between rules. Rule modules live beside this file, one per
benchmark or harness, and are imported on the first lookup (importing evalkit does not
import them); another package adds rules through the entry points ``evalkit.rules`` (a
module whose ``@rule`` functions register on import).
"""

from __future__ import annotations

import pkgutil
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from evalkit import tasks
from evalkit.registry import Registry, RegistryError, did_you_mean
from evalkit.sample import Sample
from evalkit.scoring.types import Score

RuleFn = Callable[[str, Any, Sample], Score]

EVALKIT = "evalkit"


@dataclass(frozen=True)
class Rule:
    """One registered extraction rule for one task type."""

    name: str
    task_type: str
    fn: RuleFn
    source: str
    """The evaluation code the rule reproduces (repository and file), or "evalkit"."""
    summary: str = ""
    """One line on what the rule does (the first line of the function's docstring)."""
    gameable: bool = False
    """True when a degenerate reply can score under it (e.g. an empty reply counted as
    correct): never used as an RL reward."""
    fallback: Any = None
    """For a ``<name>+judge`` rule: the ``JudgeFallback`` (``evalkit.scoring.
    judge_fallback``) asked for the replies its base rule cannot decide; None otherwise."""


def _rule_modules() -> list[str]:
    # evalkit's own rule modules: every public module of this package (each registers on
    # import); a plug-in's come through the entry points ``evalkit.rules``
    return [f"{__name__}.{i.name}" for i in pkgutil.iter_modules(__path__) if i.name[0] != "_"]


def rule_key(name: str, task_type: str) -> str:
    """Rule ``name`` of ``task_type`` as ``RULES`` (and a run manifest's plug-ins) name it:
    ``"videomme for multiple_choice"`` (one name may be a rule of several task types)."""
    return f"{name} for {task_type}"


RULES: Registry[Rule] = Registry(
    "extraction rule", base=Rule, group="evalkit.rules", modules=_rule_modules
)
"""Every registered rule by ``"NAME for TASK_TYPE"`` (``evalkit`` rules are not in it)."""
_TABLES: dict[str, dict[str, Rule]] = {}  # rules_for's answers, valid at RULES.version:
_TABLES_AT = [-1]  # a registration (or a refused plug-in's removal) makes them stale


def rule(
    name: str, *task_types: str, source: str, gameable: bool = False, fallback: Any = None
) -> Callable[[RuleFn], RuleFn]:
    """Register ``fn`` as rule ``name`` for each of ``task_types`` (duplicates error);
    ``fallback``: the judge a ``<name>+judge`` rule asks (``judge_fallback.judge_rule``)."""
    if not task_types:
        raise RegistryError(f"rule {name!r} names no task type")
    if name == EVALKIT:
        raise RegistryError("'evalkit' is the task types' own scorers; it is not registered")

    def deco(fn: RuleFn) -> RuleFn:
        summary = (fn.__doc__ or "").strip().splitlines()[0] if fn.__doc__ else ""
        for task_type in task_types:
            add_rule(
                Rule(name, tasks.canonical(task_type), fn, source, summary, gameable, fallback)
            )
        return fn

    return deco


def add_rule(r: Rule) -> Rule:
    """Register one :class:`Rule` (``rule``'s decorator does, per task type it names)."""
    RULES.register(rule_key(r.name, r.task_type), r)
    return r


def unregister(name: str, *task_types: str) -> None:
    """Remove rule ``name`` from each of ``task_types`` (a plugin or test undoing ``rule``)."""
    for task_type in task_types:
        kind = tasks.canonical(task_type)
        if rule_key(name, kind) not in RULES:
            raise RegistryError(f"rule {name!r} is not registered for {kind!r}")
        RULES.unregister(rule_key(name, kind))


def _evalkit_rule(task_type: str) -> Rule:
    fn = tasks.get(task_type).scorer_fn()
    return Rule(EVALKIT, task_type, fn, "evalkit", "evalkit's robust extraction (the default)")


def rules_for(task_type: str) -> dict[str, Rule]:
    """Every rule for a task type (name or alias), ``evalkit`` first."""
    RULES.load()
    if _TABLES_AT[0] != RULES.version:
        _TABLES.clear()
        _TABLES_AT[0] = RULES.version
    table = _TABLES.get(task_type)
    if table is None:  # scoring every sample under every rule asks this per sample
        kind = tasks.canonical(task_type)
        own = sorted((r.name, r) for _, r in RULES.items() if r.task_type == kind)
        table = {EVALKIT: _evalkit_rule(kind), **dict(own)}
        _TABLES[task_type] = table
    return dict(table)


def get_rule(name: str, task_type: str) -> Rule:
    """The rule ``name`` for ``task_type``; an unknown name says which rules exist."""
    table = rules_for(task_type)
    if name in table:
        return table[name]
    hint = did_you_mean(name, list(table))
    raise RegistryError(
        f"no extraction rule {name!r} for task type {task_type!r}{hint} (known: {', '.join(table)})"
    )


def has_rule(name: str, task_type: str) -> bool:
    """True if ``name`` is a rule for ``task_type`` (``evalkit`` always is)."""
    return name in rules_for(task_type)


def all_rules() -> list[Rule]:
    """Every registered rule, by task type then name (``evalkit`` rules included)."""
    return [r for kind in tasks.names() for r in rules_for(kind).values()]


__all__ = [
    "EVALKIT",
    "RULES",
    "Rule",
    "RuleFn",
    "add_rule",
    "all_rules",
    "get_rule",
    "has_rule",
    "rule",
    "rule_key",
    "rules_for",
]
