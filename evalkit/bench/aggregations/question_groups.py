"""Question groups scored as one: a group counts by how its questions were answered together.

- ``mbin``             VideoMathQA multi-binary: a question is right only if all its pairs are;
- ``group_nonlinear``  Video-MME-v2: groups of 4 scored by a non-linear map of the right answers.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from typing import Any

from evalkit.bench.aggregations.base import (
    AGGREGATIONS,
    AggregateResult,
    Scored,
    percent,
    result_from,
    scored_units,
)
from evalkit.sample import Sample


@AGGREGATIONS("mbin")
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
    out = result_from(scored, units, percent(v for _, v in units), breakdowns)
    out.metrics["pair_accuracy"] = percent(v for _, v in scored_units(scored)) or 0.0
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


@AGGREGATIONS("group_nonlinear")
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
    out = result_from(scored, units, percent(v for _, v in units), breakdowns)
    valid = [s.value for s in scored if s.value is not None and _mark(s) >= 0]
    out.metrics["avg_acc"] = percent(valid) or 0.0
    out.metrics["relevance_linear"] = percent(linear) or 0.0
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
