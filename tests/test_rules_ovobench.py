"""OVO-Bench's official rules (substring tests, digits joined), its hierarchical mean and
its pinned prompts; verdicts traced by hand through OVO-Bench utils/OVOBenchScore.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalkit.bench.aggregations import aggregate
from evalkit.bench.loader import load
from evalkit.bench.registry import get_benchmark
from evalkit.scoring import score
from evalkit.scoring.rules import get_rule
from tests._official_prompts import render_official
from tests._rule_cases import real_samples, sample, scored, verdict, wrong_reply
from tests.fixtures.bench import official_reasoning_streaming

MC_CASES = [
    ("B", "B", 1.0),
    ("The answer is B.", "B", 1.0),
    ("Based on the video, C", "B", 1.0),  # the "B" of "Based" occurs
    ("C", "B", 0.0),
    ("b", "B", 0.0),  # case-sensitive
    ("", "B", 0.0),
    ("A B C D", "B", 1.0),  # naming every letter always scores
    ("(B) dog", "B", 1.0),
    ("Option two", "B", 0.0),
    ("A man is running", "A", 1.0),
    ("I don't know", "D", 0.0),  # no capital D
    ("Clearly A", "C", 1.0),
]


@pytest.mark.parametrize(("reply", "target", "expected"), MC_CASES)
def test_multiple_choice_verdicts(reply: str, target: str, expected: float) -> None:
    assert verdict("ovobench", sample(target=target), reply).value == expected


YN_CASES: list[tuple[str, Any, float]] = [
    ("Yes", "Yes", 1.0),
    ("Y", "Yes", 1.0),  # a bare Y for a type-1 probe
    ("N", "No", 1.0),
    ("Y", "No", 0.0),
    ("yes", "Yes", 0.0),  # "Yes" does not occur in "yes"
    ("Not sure", "No", 1.0),  # "No" occurs in "Not"
    ("No", "Yes", 0.0),
    ("Yes.", "Yes", 1.0),
    ("", "Yes", 0.0),
    ("Nope", "No", 1.0),
    ("Yes and No", "No", 1.0),  # both words: right whatever the probe
    ("Yes and No", "Yes", 1.0),
    (" Y", "Yes", 0.0),  # not the bare "Y"
    ("yes", True, 0.0),
    ("Yes", 1, 1.0),  # the release's type 1
]


@pytest.mark.parametrize(("reply", "target", "expected"), YN_CASES)
def test_ssr_crr_verdicts(reply: str, target: Any, expected: float) -> None:
    assert verdict("ovobench", sample("boolean", target=target), reply).value == expected


REC_CASES: list[tuple[str, Any, float]] = [
    ("3", 3, 1.0),
    ("3 times", 3, 1.0),
    ("three", 3, 0.0),
    ("1, 2, 3: 3", 3, 0.0),  # digits joined: "1233"
    ("03", 3, 0.0),  # "03" != "3"
    ("", 3, 0.0),
    ("30", 3, 0.0),
    ("They did it 3 times in 2 clips", 3, 0.0),  # "32"
    ("0", 0, 1.0),
    ("1 2", 12, 1.0),  # "1" + "2" spells 12
    ("3", 3.0, 1.0),  # an integral float target reads as the JSON integer
    ("3.0", 3, 0.0),  # digits "30"
]


@pytest.mark.parametrize(("reply", "target", "expected"), REC_CASES)
def test_rec_verdicts(reply: str, target: Any, expected: float) -> None:
    assert verdict("ovobench", sample("numerical", target=target), reply).value == expected


def test_substring_rules_are_flagged_gameable() -> None:
    assert get_rule("ovobench", "multiple_choice").gameable
    assert get_rule("ovobench", "boolean").gameable
    assert not get_rule("ovobench", "numerical").gameable


def test_headline_rules_are_the_official_ones() -> None:
    spec = get_benchmark("OVO-Bench")
    assert {t: spec.headline_rule(t) for t in spec.task_types} == {
        "boolean": "ovobench",
        "multiple_choice": "ovobench",
        "numerical": "ovobench",
    }


def test_aggregate_is_task_then_category_then_overall_mean() -> None:
    spec = get_benchmark("OVO-Bench")

    def row(task: str, category: str, value: float) -> Any:
        return scored("multiple_choice", value, task=task, category=category)

    rows = [row("EPM", "backward", 1.0), row("EPM", "backward", 0.0), row("ASI", "backward", 1.0)]
    rows += [row("STU", "realtime", 0.0), row("REC", "forward", 1.0), row("REC", "forward", 0.0)]
    res = aggregate(spec, rows)
    assert res.breakdowns["category"] == pytest.approx(
        {"backward": 75.0, "realtime": 0.0, "forward": 50.0}
    )
    assert res.overall == pytest.approx(125 / 3)


PREAMBLE_CRR = (
    "\nYou're responsible of answering questions based on the video content. \n"
    "The following question are relevant to the latest frames, i.e. the end of the video.\n"
)


def test_official_prompts_render_constant_py_templates() -> None:
    spec = get_benchmark("OVO-Bench")
    mc = sample(target="B", options=["cat", "dog"], question="What ran?", task="EPM")
    assert render_official(spec, "multiple_choice", mc) == (
        "\nQuestion: What ran?\nOptions:\nA. cat; B. dog;\n\nRespond only with the letter "
        "corresponding to your chosen option (e.g., A, B, C). \nDo not include any "
        "additional text or explanation in your response.\n"
    )
    rec = sample("numerical", target=3, task="REC", probe_text="jump rope")
    assert "Now, answer the following question: How many times did they jump rope?\n" in (
        render_official(spec, "numerical", rec)
    )
    ssr = sample("boolean", target="Yes", task="SSR", probe_text="Crack the eggs.")
    assert render_official(spec, "boolean", ssr).startswith(
        "\nYou're watching a tutorial video which contain a sequential of steps. \n"
        "The following is one step from the whole procedures: \nCrack the eggs.\n"
    )
    crr = sample("boolean", target="No", task="CRR", probe_text="Where do they go?")
    assert render_official(spec, "boolean", crr) == (
        PREAMBLE_CRR + "Where do they go?\nDecide whether existing visual content, especially "
        "latest frames, i.e. frames that near the end of the video, provide enough "
        "information for answering the question.\nAnswer only with \u201cYes\u201d or "
        "\u201cNo\u201d.\nDo not include any additional text or explanation in your response.\n"
    )


def test_loaded_probes_carry_what_the_official_prompts_fill_in(tmp_path: Path) -> None:
    spec = get_benchmark("OVO-Bench")
    by = {s.id: s for s in load(spec, official_reasoning_streaming.ovobench(tmp_path))}
    assert by["6/0"].fields["probe_text"] == "jump"
    assert by["7/1"].fields["probe_text"] == "stir"
    assert by["8/0"].fields["probe_text"] == "Where do they go?"
    assert "How many times did they jump?" in render_official(spec, "numerical", by["6/0"])
    assert "\nstir\n" in render_official(spec, "boolean", by["7/1"])
    assert render_official(spec, "boolean", by["8/0"]).startswith(PREAMBLE_CRR)
    assert render_official(spec, "multiple_choice", by["1"]).startswith(
        "\nQuestion: EPM question 1?\nOptions:\nA. red; B. green; C. blue; D. black;\n\n"
    )
    rules = {s.id: spec.headline_rule(s.task_type) for s in by.values()}
    assert score(by["1"], "A", rule=rules["1"]).value == 1.0  # gt 0 -> "A" occurs
    assert score(by["6/1"], "2 times", rule=rules["6/1"]).value == 1.0
    assert score(by["7/0"], "N", rule=rules["7/0"]).value == 1.0  # type 0, bare N


@pytest.mark.realdata
def test_real_rows_score_their_own_answer_right_and_another_wrong() -> None:
    for s in real_samples("ovobench.json"):
        rule = get_benchmark("OVO-Bench").headline_rule(s.task_type)
        assert rule == "ovobench"
        assert score(s, str(s.target), rule=rule).value == 1.0, s.id
        assert score(s, wrong_reply(s), rule=rule).value == 0.0, s.id
