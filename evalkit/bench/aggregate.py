"""Official aggregations: per-sample score values -> the number a benchmark reports.

An aggregation is a function ``(scored, breakdowns, **params) -> AggregateResult``
registered by name; a benchmark spec picks one and its parameters. Values are per-sample
scores in [0, 1] (None = not scored, e.g. no judge configured: counted in ``n_unscored``,
never as 0). Reported numbers are percentages, the unit papers publish.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from evalkit.registry import Registry
from evalkit.sample import Sample


@dataclass(frozen=True)
class Scored:
    """One sample with its score value (None when it could not be scored)."""

    sample: Sample
    value: float | None
    metadata: dict[str, Any] = field(default_factory=dict)
    """The scorer's metadata (e.g. a grounding IoU), for aggregations that need more
    than the value (recall at IoU thresholds)."""


@dataclass
class AggregateResult:
    """The official number, per-group breakdowns and counts."""

    overall: float | None
    breakdowns: dict[str, dict[str, float]] = field(default_factory=dict)
    n: int = 0
    n_scored: int = 0
    n_unscored: int = 0
    metrics: dict[str, float] = field(default_factory=dict)
    """Other official numbers reported next to ``overall`` (e.g. plain accuracy)."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {
            "overall": self.overall,
            "breakdowns": self.breakdowns,
            "n": self.n,
            "n_scored": self.n_scored,
            "n_unscored": self.n_unscored,
            "metrics": self.metrics,
        }


class Aggregation(Protocol):
    """Signature of a registered aggregation."""

    def __call__(
        self, scored: Sequence[Scored], breakdowns: Sequence[str] = (), **params: Any
    ) -> AggregateResult: ...


aggregations: Registry[Callable[..., AggregateResult]] = Registry("aggregation")


def _pct(values: Iterable[float]) -> float | None:
    vals = list(values)
    return 100.0 * sum(vals) / len(vals) if vals else None


def _groups(sample: Sample, name: str) -> list[str]:
    """Groups a sample belongs to for field ``name`` (a list value = several groups)."""
    v = sample.fields.get(name)
    if v is None:
        return []
    return [str(x) for x in v] if isinstance(v, list | tuple) else [str(v)]


def breakdown(units: Sequence[tuple[Sample, float]], name: str) -> dict[str, float]:
    """Pooled percentage per group of ``name`` over (sample, value) units."""
    by: dict[str, list[float]] = defaultdict(list)
    for sample, value in units:
        for g in _groups(sample, name):
            by[g].append(value)
    return {g: v for g, vals in sorted(by.items()) if (v := _pct(vals)) is not None}


def _result(
    scored: Sequence[Scored],
    units: Sequence[tuple[Sample, float]],
    overall: float | None,
    breakdowns: Sequence[str],
) -> AggregateResult:
    n_scored = sum(s.value is not None for s in scored)
    return AggregateResult(
        overall=overall,
        breakdowns={b: breakdown(units, b) for b in breakdowns},
        n=len(scored),
        n_scored=n_scored,
        n_unscored=len(scored) - n_scored,
    )


def _units(scored: Sequence[Scored]) -> list[tuple[Sample, float]]:
    return [(s.sample, s.value) for s in scored if s.value is not None]


@aggregations("mean")
def mean(scored: Sequence[Scored], breakdowns: Sequence[str] = ()) -> AggregateResult:
    """Pooled accuracy over all scored samples, with pooled per-group breakdowns.

    The official rule of e.g. Video-MME (overall and per duration, VideoMME's
    eval_your_results.py), LVBench (overall and per question type, its scripts/eval.py)
    and LongVideoBench (per duration group).
    """
    units = _units(scored)
    return _result(scored, units, _pct(v for _, v in units), breakdowns)


@aggregations("macro_mean")
def macro_mean(
    scored: Sequence[Scored],
    breakdowns: Sequence[str] = (),
    *,
    field: str,
    groups: Sequence[str] | None = None,
) -> AggregateResult:
    """Unweighted mean of per-group accuracies over ``field``.

    MLVU's M-Avg is the mean over its multiple-choice tasks (paper Sec. 4). (MVBench's
    "Avg" is NOT this: its notebook pools correct / total over all questions.) ``groups``
    restricts the mean to the named groups (others still appear in the breakdown).
    """
    units = _units(scored)
    per = breakdown(units, field)
    chosen = [per[g] for g in (groups or per) if g in per]
    out = _result(
        scored,
        units,
        sum(chosen) / len(chosen) if chosen else None,
        [field, *[b for b in breakdowns if b != field]],
    )
    out.metrics["pooled"] = _pct(v for _, v in units) or 0.0
    return out


@aggregations("mbin")
def mbin(
    scored: Sequence[Scored], breakdowns: Sequence[str] = (), *, group_field: str
) -> AggregateResult:
    """VideoMathQA multi-binary: a question counts only if ALL its binary pairs are right.

    Rows of the ``multi_binary`` config share ``question_id``; the official aggregation
    (lmms-eval tasks/videomathqa/utils.py, ``videomathqa_multi_binary_aggregate_results``)
    groups them by it and scores the group 1 only when every pair is answered correctly.
    A group with an unscored member is left out (reported in ``n_unscored``).
    """
    groups: dict[str, list[Scored]] = defaultdict(list)
    for s in scored:
        groups[str(s.sample.fields.get(group_field, s.sample.id))].append(s)
    units: list[tuple[Sample, float]] = []
    for members in groups.values():
        if any(m.value is None for m in members):
            continue
        units.append(
            (members[0].sample, float(all(m.value is not None and m.value >= 1.0 for m in members)))
        )
    out = _result(scored, units, _pct(v for _, v in units), breakdowns)
    out.metrics["pair_accuracy"] = _pct(v for _, v in _units(scored)) or 0.0
    out.metrics["n_questions"] = float(len(groups))
    return out


# Video-MME-v2 grouped non-linear scoring, from the benchmark's own evaluation script
# (github.com/MME-Benchmarks/Video-MME-v2, evaluation/test_video_mme_v2.py: cal_relevance,
# cal_logic, get_final_rating). Score of a group by the number of right answers
# (relevance) or by the length of the right prefix (logic), per group structure.
_RELEVANCE = (0.0, 1 / 16, 4 / 16, 9 / 16, 1.0)
_LOGIC = {
    "[1, 2, 3, 4]": (0.0, 1 / 16, 4 / 16, 9 / 16, 1.0),
    "[1, [2, 3], 4]": (0.0, 1 / 12, 4 / 12, 7 / 12, 1.0),
    "[[1, 2], 3, 4]": (0.0, 1 / 10, 2 / 10, 5 / 10, 1.0),
}


def _logic_prefix(right: list[bool], structure: str) -> int:
    """Right answers before the first wrong one, where parallel questions may stand in."""
    k = next((i for i, ok in enumerate(right) if not ok), len(right))
    if structure == "[1, [2, 3], 4]" and k == 1 and right[2]:
        k = 2  # questions 2 and 3 are parallel steps: 3 right counts for the step
    elif structure == "[[1, 2], 3, 4]" and k == 0 and right[1]:
        k = 1  # questions 1 and 2 are parallel first steps
    return k


def _structure(raw: Any) -> str:
    import ast

    try:
        return str(ast.literal_eval(str(raw)))
    except (ValueError, SyntaxError):
        return str(raw)


@aggregations("group_nonlinear")
def group_nonlinear(
    scored: Sequence[Scored],
    breakdowns: Sequence[str] = (),
    *,
    group_field: str,
    order_field: str,
    type_field: str = "group_type",
    structure_field: str = "group_structure",
    group_size: int = 4,
) -> AggregateResult:
    """Video-MME-v2's grouped non-linear score (percent), mean over groups of 4.

    A ``relevance`` (capability-consistency) group scores by how many of its questions
    are right: 0, 1/16, 4/16, 9/16, 1. A ``logic`` (reasoning-coherence) group scores by
    the right prefix of its chain (first-error truncation) with the map of its
    ``group_structure``. Breakdowns are means of group scores, read from the group's last
    question as the official script does. Groups missing a question or holding an
    unscored one are left out (``metrics["incomplete_groups"]``).

    A question whose score metadata carries ``official_mark: -1`` (the ``videommev2``
    rule: no letter could be extracted) counts as the official ``evaluate`` marks it:
    -1 in a relevance group's count of right answers (a negative count scores 0), truthy
    (right) in a logic chain, and left out of ``avg_acc`` ("valid only"). Under other
    rules such a reply is simply wrong.
    """
    groups: dict[str, list[Scored]] = defaultdict(list)
    for s in scored:
        groups[str(s.sample.fields[group_field])].append(s)
    units: list[tuple[Sample, float]] = []
    linear: list[float] = []
    incomplete = 0
    for members in groups.values():
        if len(members) != group_size or any(m.value is None for m in members):
            incomplete += 1
            continue
        members = sorted(members, key=lambda m: _order_key(m.sample.fields.get(order_field)))
        marks = [_mark(m) for m in members]
        last = members[-1].sample
        if str(last.fields.get(type_field)) == "logic":
            structure = _structure(last.fields.get(structure_field))
            if structure not in _LOGIC:
                raise ValueError(f"unknown group_structure {structure!r} in group of {last.id}")
            value = _LOGIC[structure][_logic_prefix([k != 0 for k in marks], structure)]
        else:
            value = _RELEVANCE[sum(marks)] if sum(marks) >= 0 else 0.0
            linear.append(sum(marks) / group_size)
        units.append((last, value))
    out = _result(scored, units, _pct(v for _, v in units), breakdowns)
    valid = [s.value for s in scored if s.value is not None and _mark(s) >= 0]
    out.metrics["avg_acc"] = _pct(valid) or 0.0
    out.metrics["relevance_linear"] = _pct(linear) or 0.0
    out.metrics["incomplete_groups"] = float(incomplete)
    return out


def _mark(s: Scored) -> int:
    """1 right, 0 wrong, or the rule's ``official_mark`` (Video-MME-v2's -1: no letter)."""
    mark = s.metadata.get("official_mark")
    if mark is not None:
        return int(mark)
    return 1 if s.value is not None and s.value >= 1.0 else 0


def _order_key(v: Any) -> tuple[int, Any]:
    try:
        return (0, float(v))
    except (TypeError, ValueError):
        return (1, str(v))


def aggregate(spec: Any, scored: Sequence[Scored]) -> AggregateResult:
    """Apply ``spec.aggregation`` (a registered name, or an adapter ``"module:function"``)."""
    agg = spec.aggregation
    if ":" in agg.name and agg.name not in aggregations:
        from evalkit.bench.loader import load_hook

        fn = load_hook(spec, agg.name)
    else:
        fn = aggregations.get(agg.name)
    return fn(scored, agg.breakdowns, **agg.params)
