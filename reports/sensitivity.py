"""Extraction sensitivity: a benchmark's official number under each answer-extraction rule.

Every record of a run names the rule that gave its headline score (``rule``) and holds the
verdict of every other rule of its task type (``rules``; see ``evalkit.scoring.verdicts``).
Here each rule's verdicts replace the headline ones and go through the same official
aggregate, so the table shows how far the published number depends on how a reply is
read, how many samples change verdict, and a few of the replies that do.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from typing import Any

from evalkit.records import RuleVerdict, SampleRecord, ScoreRecord

AggregateRecords = Callable[[list[SampleRecord]], float | None]
"""Records -> the official aggregate (percent), as the report computes the headline."""

MAX_EXAMPLES = 6
ROBUST = "evalkit"
"""evalkit's own robust rule, the one a headline under another rule is explained against."""
GAP_POINTS = 1.0
"""Headlines further apart than this (points) under the two rules get an explanation."""
GAP_EXAMPLES = 2
_EXCERPT = 70  # characters kept from each end of a long reply
_PROMPT_EXCERPT = 150  # ... of a prompt: its question sits in the middle or at the end
_EPS = 1e-9


@dataclass
class RuleRow:
    """One rule: the official number under it and how its verdicts differ from the headline."""

    rule: str
    headline: bool
    source: str
    overall: float | None
    changed: int = 0
    """Samples whose verdict under this rule differs from their headline verdict."""
    up: int = 0
    """... of which this rule scores higher."""
    down: int = 0
    compared: int = 0
    """Samples scored under both this rule and the headline one."""
    errors: int = 0
    """Samples on which the rule raised (a bug, shown, not taken as a verdict)."""
    delta: float | None = None
    """This rule's number minus the headline number (points)."""


@dataclass
class Example:
    """A reply whose verdict differs between rules: id, excerpt, verdict per rule."""

    id: str
    reply: str
    verdicts: dict[str, str] = field(default_factory=dict)
    prompt: str | None = None
    """What the model was asked (an excerpt); None where the record kept no prompt."""


@dataclass
class RuleGap:
    """Why the headline and the robust rule's numbers are more than :data:`GAP_POINTS`
    apart: the replies one rule leaves out of the count and the other counts, and those
    both count but read differently (another verdict), with examples."""

    headline: str
    robust: str
    headline_score: float
    robust_score: float
    left_out_by_headline: int = 0
    """Replies the headline rule leaves out of the count (unscored) and the robust counts."""
    robust_zero: int = 0
    """... of which the robust rule scores 0."""
    left_out_by_robust: int = 0
    """Replies the robust rule leaves out of the count and the headline rule counts."""
    headline_zero: int = 0
    """... of which the headline rule scores 0."""
    read_differently: int = 0
    """Replies both rules count, with different verdicts."""
    robust_higher: int = 0
    """... of which the robust rule scores higher."""
    examples: list[Example] = field(default_factory=list)

    def sentence(self) -> str:
        """The counts, for people: what makes the two numbers differ."""
        h, r = self.headline, self.robust
        apart = abs(self.robust_score - self.headline_score)
        text = (
            f"headline {self.headline_score:.2f} under rule {h}, {self.robust_score:.2f} under "
            f"the robust rule {r} ({apart:.2f} points apart): {h} leaves out of the count "
            f"{_replies(self.left_out_by_headline)} that {r} counts"
            + _of(self.left_out_by_headline, self.robust_zero, "as 0")
            + f"; {r} leaves out {self.left_out_by_robust} that {h} counts"
            + _of(self.left_out_by_robust, self.headline_zero, "as 0")
            + f"; {_replies(self.read_differently)} counted by both are read differently"
            + _of(self.read_differently, self.robust_higher, f"scored higher by {r}")
        )
        return text


def _of(n: int, part: int, what: str) -> str:
    return f" ({part} {what})" if n else ""


def _replies(n: int) -> str:
    return f"{n} reply" if n == 1 else f"{n} replies"


@dataclass
class Sensitivity:
    """A benchmark's headline under each rule, the headline rules, and flipping replies."""

    headline_rules: dict[str, str]
    """Task type -> the rule that gave its headline verdicts."""
    rows: list[RuleRow]
    examples: list[Example]
    gap: RuleGap | None = None
    """Why the headline and the robust rule differ, where they do by over GAP_POINTS."""

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        return {
            "headline_rules": self.headline_rules,
            "rules": [asdict(r) for r in self.rows],
            "examples": [asdict(e) for e in self.examples],
            "gap": None if self.gap is None else {**asdict(self.gap), "text": self.gap.sentence()},
        }


def sensitivity(
    records: list[SampleRecord], overall: float | None, aggregate: AggregateRecords
) -> Sensitivity | None:
    """The table for one benchmark; None when its records predate extraction rules."""
    ok = [r for r in records if r.status == "ok" and r.rule]
    if not ok:
        return None
    headline_rules = _headline_rules(ok)
    names = sorted({name for r in ok for name in (r.rules or {})})
    head = RuleRow(" / ".join(sorted(set(headline_rules.values()))), True, "", overall)
    head.source = _sources(head.rule.split(" / "), headline_rules)
    head.compared = len(ok)
    rows = [head]
    for name in names:
        row = _compare(ok, name)
        row.source = _sources([name], headline_rules)
        row.overall = aggregate([_under(r, name) for r in records])
        row.delta = None if row.overall is None or overall is None else row.overall - overall
        rows.append(row)
    gap = _gap(ok, head, next((r for r in rows[1:] if r.rule == ROBUST), None))
    return Sensitivity(headline_rules, rows, _examples(ok, names), gap)


def _gap(ok: list[SampleRecord], head: RuleRow, robust: RuleRow | None) -> RuleGap | None:
    """The explanation of a headline more than GAP_POINTS from the robust rule's number."""
    if robust is None or robust.delta is None or abs(robust.delta) <= GAP_POINTS:
        return None
    assert head.overall is not None and robust.overall is not None  # a delta needs both
    gap = RuleGap(head.rule, ROBUST, head.overall, robust.overall)
    kinds: dict[str, list[SampleRecord]] = {"left out": [], "kept": [], "read": []}
    for r in sorted(ok, key=lambda r: r.id):
        verdict = (r.rules or {}).get(ROBUST)
        if verdict is None or verdict.error is not None:
            continue
        a, b = _value(r), verdict.value
        if a is None and b is not None:
            gap.left_out_by_headline += 1
            gap.robust_zero += b == 0
            kinds["left out"].append(r)
        elif b is None and a is not None:
            gap.left_out_by_robust += 1
            gap.headline_zero += a == 0
            kinds["kept"].append(r)
        elif a is not None and b is not None and _differs(a, b):
            gap.read_differently += 1
            gap.robust_higher += b > a
            kinds["read"].append(r)
    # Examples of the commonest cause first: it is what moves the number most.
    ranked = [r for rs in sorted(kinds.values(), key=len, reverse=True) for r in rs]
    gap.examples = [_example(r, [ROBUST]) for r in ranked[:GAP_EXAMPLES]]
    return gap


def _headline_rules(ok: list[SampleRecord]) -> dict[str, str]:
    out: dict[str, str] = {}
    for r in ok:
        out.setdefault(r.task_type, str(r.rule))
    return dict(sorted(out.items()))


def _under(record: SampleRecord, name: str) -> SampleRecord:
    """``record`` with its score as rule ``name`` gave it (unchanged if the rule is absent)."""
    verdict = (record.rules or {}).get(name)
    if record.status != "ok" or verdict is None:
        return record
    score = ScoreRecord(
        value=verdict.value,
        answer=verdict.answer,
        explanation=verdict.error or "",
        metadata=dict(verdict.metadata),
    )
    return record.model_copy(update={"score": score})


def _differs(a: float | None, b: float | None) -> bool:
    if a is None or b is None:
        return (a is None) != (b is None)
    return abs(float(a) - float(b)) > _EPS


def _compare(ok: list[SampleRecord], name: str) -> RuleRow:
    row = RuleRow(name, False, "", None)
    for r in ok:
        verdict = (r.rules or {}).get(name)
        if verdict is None:
            continue
        row.compared += 1
        if verdict.error is not None:  # the rule raised: an error to fix, not a flip
            row.errors += 1
            continue
        a, b = _value(r), verdict.value
        if _differs(a, b):
            row.changed += 1
            if a is not None and b is not None:
                row.up += b > a
                row.down += b < a
    return row


def _sources(names: list[str], headline_rules: dict[str, str]) -> str:
    """Where each rule comes from, from the rule registry (blank when no longer registered)."""
    from evalkit.registry import RegistryError
    from evalkit.scoring.rules import rules_for

    found: list[str] = []
    for task_type in headline_rules:
        try:
            table = rules_for(task_type)
        except RegistryError:
            continue
        found += [table[n].source for n in names if n in table]
    return "; ".join(dict.fromkeys(found))


def _value(r: SampleRecord) -> float | None:
    return None if r.score is None else r.score.value


def _examples(ok: list[SampleRecord], names: list[str]) -> list[Example]:
    """Up to ``MAX_EXAMPLES`` differing replies, taking each rule's flips in turn."""
    flips = {
        name: [
            r
            for r in sorted(ok, key=lambda r: r.id)
            if r.rules is not None and name in r.rules and _differs(_value(r), r.rules[name].value)
        ]
        for name in names
    }
    chosen: dict[str, SampleRecord] = {}
    for depth in range(MAX_EXAMPLES):
        for name in names:
            if len(chosen) < MAX_EXAMPLES and depth < len(flips[name]):
                rec = flips[name][depth]
                chosen.setdefault(rec.id, rec)
    return [_example(r, names) for r in chosen.values()]


def _example(r: SampleRecord, names: list[str]) -> Example:
    verdicts = {"headline": verdict_text(r.score or ScoreRecord())}
    for name in names:
        v = (r.rules or {}).get(name)
        verdicts[name] = "-" if v is None else verdict_text(v)
    asked = r.prompt.text if r.prompt is not None else None
    shown = None if asked is None else excerpt(asked, keep=_PROMPT_EXCERPT)
    return Example(r.id, excerpt(r.prediction or ""), verdicts, shown)


def verdict_text(v: ScoreRecord | RuleVerdict) -> str:
    """``1 (C)``: the value and the extracted answer, for people."""
    if isinstance(v, RuleVerdict) and v.error:
        return "error"
    shown = "unscored" if v.value is None else f"{float(v.value):g}"
    return f"{shown} ({'no answer' if v.answer is None else v.answer})"


def excerpt(text: str, keep: int = _EXCERPT) -> str:
    """A reply on one line; a long one keeps ``keep`` characters of its start and of its
    end (where answers sit)."""
    flat = " ".join(text.split())
    if len(flat) <= 2 * keep + 5:
        return flat
    return f"{flat[:keep]} … {flat[-keep:]}"
