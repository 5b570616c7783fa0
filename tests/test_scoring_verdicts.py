"""A sample under its headline rule and every other rule: Verdicts, their record form,
the run's scorer (``make_scorer``) and the async path (``ascore_all``)."""

from __future__ import annotations

import asyncio

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.bench.spec import ScoringSpec
from evalkit.engines.base import Completion
from evalkit.records import failed_record, ok_record
from evalkit.run.components import make_scorer
from evalkit.sample import Sample
from evalkit.scoring import LLMJudge, ScoringContext, ascore, ascore_all, score_all
from evalkit.scoring.types import Score
from evalkit.scoring.verdicts import Verdicts, compact_verdict
from tests._sensitivity_rules import LAST_LETTER
from tests.test_scoring_judge import FakeJudgeEngine

# the test-only rule LAST_LETTER is registered per test (tests/_sensitivity_rules.py)
pytestmark = pytest.mark.usefixtures("last_letter_rule")


def _mc(target: str = "C") -> Sample:
    return Sample(
        id="q1",
        task_type="mcq",  # an alias: rules are looked up by the canonical type
        question="q",
        options=["w", "x", "y", "z"],
        target=target,
        benchmark="Video-MME",
        fields={"duration": "short"},
    )


def test_default_headline_is_evalkit_and_other_rules_are_kept() -> None:
    # evalkit refuses a reply naming two letters; the last-letter rule takes C
    v = score_all(_mc(), "B or C")
    assert v.rule == "evalkit" and v.score.value == 0.0
    assert "evalkit" not in v.others
    assert v.compact_others()[LAST_LETTER] == {"value": 1.0, "answer": "C"}


def test_a_named_headline_rule_gives_the_score_and_evalkit_becomes_another_rule() -> None:
    v = score_all(_mc(), "The answer is C. Option A is wrong", rule=LAST_LETTER)
    assert (v.rule, v.score.value, v.score.answer) == (LAST_LETTER, 0.0, "A")
    assert LAST_LETTER not in v.others
    assert compact_verdict(v.others["evalkit"]) == {"value": 1.0, "answer": "C"}


def test_a_judged_task_type_gets_its_judge_and_no_other_rules() -> None:
    judged = Sample(id="j", task_type="llm_judge", question="q", target="a cat")
    v = score_all(judged, "a dog", rule=LAST_LETTER)
    assert v.rule == "evalkit" and v.others == {}
    assert v.score.value is None  # no judge configured: not scored, never 0


def test_compact_verdict_keeps_numbers_cuts_long_answers_and_flags_errors() -> None:
    grounded = Score(0.5, [1.0, 2.0], "tIoU", {"format": 1.0, "tiou": 0.123456, "ok": True})
    assert compact_verdict(grounded) == {
        "value": 0.5,
        "answer": [1.0, 2.0],
        "metadata": {"tiou": 0.1235},
    }
    long = compact_verdict(Score(0.0, "x" * 500))
    assert len(long["answer"]) == 121 and long["answer"].endswith("…")
    try:
        {}["a"]
    except KeyError as exc:
        broken = Score.scorer_failed(exc)
    assert compact_verdict(broken) == {
        "value": None,
        "answer": None,
        "error": "scorer failed: KeyError: 'a'",
    }
    # the model's own failure (its program raised in the sandbox) is a score, not an error
    crashed = Score(0.0, None, "0/1 tests passed", {"program_error": "ZeroDivisionError"})
    assert "error" not in compact_verdict(crashed)


def test_make_scorer_uses_the_specs_headline_rule_per_task_type() -> None:
    base = get_benchmark("Video-MME")
    official = base.model_copy(
        update={"scoring": ScoringSpec(official={"multiple_choice": LAST_LETTER})}
    )
    reply = Completion(request_id="q1", texts=["Answer: A. Actually, C"])
    got = make_scorer(official)(_mc(), reply)
    assert (got.rule, got.score.value) == (LAST_LETTER, 1.0)
    assert got.others["evalkit"].value == 0.0
    robust = official.model_copy(update={"scoring": ScoringSpec(rule="evalkit")})
    got = make_scorer(robust)(_mc(), reply)
    assert (got.rule, got.score.value) == ("evalkit", 0.0)
    assert got.others[LAST_LETTER].value == 1.0


def test_the_record_names_the_headline_rule_and_holds_the_other_verdicts() -> None:
    v = score_all(_mc(), "B or C", rule=LAST_LETTER)
    rec = ok_record(_mc(), v, ["B or C"], fingerprint="fp", timings={"scored": 1.0})
    assert rec.status == "ok" and rec.prediction == "B or C"
    assert rec.score is not None and rec.score.value == 1.0 and rec.rule == LAST_LETTER
    assert rec.dump()["rules"]["evalkit"] == {"value": 0.0, "answer": None}
    assert (rec.prompt_hash, rec.tokens) == (None, None)  # unknown, not invented
    assert rec.fields == {"duration": "short"} and rec.fingerprint == "fp"
    plain = ok_record(_mc(), Score(1.0, "C"), ["C"], fingerprint="", timings={})
    assert "rule" not in plain.dump() and "rules" not in plain.dump()  # a bare scorer names no rule


def test_a_failed_record_has_no_score() -> None:
    rec = failed_record(_mc(), "predictions", "no prediction", fingerprint="", timings={})
    assert (rec.status, rec.stage, rec.score) == ("failed", "predictions", None)


def test_ascore_takes_the_rule_and_ascore_all_matches_score_all() -> None:
    got = asyncio.run(ascore(_mc(), "B or C", rule=LAST_LETTER))
    assert got.value == 1.0
    a = asyncio.run(ascore_all(_mc(), "B or C", rule=LAST_LETTER))
    s = score_all(_mc(), "B or C", rule=LAST_LETTER)
    assert (a.rule, a.score, a.compact_others()) == (s.rule, s.score, s.compact_others())


def test_a_headline_scored_by_the_caller_is_kept_and_the_other_rules_are_added() -> None:
    # ascore_all awaits the headline (the judge's part) and hands it to score_all
    given = Score(0.5, "X", "scored by the caller")
    v = score_all(_mc(), "B or C", rule=LAST_LETTER, headline=given)
    assert (v.rule, v.score) == (LAST_LETTER, given)
    assert v.compact_others() == score_all(_mc(), "B or C", rule=LAST_LETTER).compact_others()


def test_ascore_all_awaits_the_judge_for_a_judged_sample_and_adds_no_rules() -> None:
    engine = FakeJudgeEngine(["VERDICT: 1"])

    async def main() -> tuple[float | None, str, int]:
        ctx = ScoringContext(LLMJudge(engine, model="m", loop=asyncio.get_running_loop()))
        v = await ascore_all(Sample(id="j", task_type="judge", question="q", target="x"), "y", ctx)
        return v.score.value, v.rule, len(v.others)

    assert asyncio.run(main()) == (1.0, "evalkit", 0)
    assert len(engine.prompts) == 1  # one judge call, not one per rule


def test_a_failed_score_cannot_be_written_as_an_ok_record() -> None:
    try:
        raise KeyError("a")
    except KeyError as exc:
        failed = Verdicts(Score.scorer_failed(exc))
    with pytest.raises(ValueError, match="its scorer failed"):
        ok_record(_mc(), failed, ["B"], fingerprint="fp", timings={})
