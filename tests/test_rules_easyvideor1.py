"""Rule "easyvideor1": EasyVideoR1's eval reward_fn, verdicts traced from its script.

Source traced: cyuQ1n/EasyVideoR1 eval/code/AsyncLLMEngine_eval_videobench_qwen3vl_multi_task.py
(extract_answer, normalize_number, iou_1d, iou_2d, mean_iou_over_intersection,
mean_relative_accuracy, reward_fn). Each case names the step of the script that decides it.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from evalkit.sample import Sample
from evalkit.scoring import score
from evalkit.scoring.rules import get_rule, rules_for


def _s(task: str, target: Any, problem_type: str | None, **fields: Any) -> Sample:
    if problem_type is not None:
        fields["problem_type"] = problem_type
    options = ["x", "y", "z", "w"] if task == "multiple_choice" else []
    return Sample(
        id="s", task_type=task, question="q", options=options, target=target, fields=fields
    )


def _v(sample: Sample, reply: str) -> float | None:
    return score(sample, reply, rule="easyvideor1").value


MC = _s("multiple_choice", "B", "multiple choice")


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("B", 1.0),  # step 5: a last line that is one letter
        ("<answer>B</answer>", 1.0),  # step 1: a short <answer> body
        ("<answer>b.</answer>", 1.0),  # step 1: "." stripped, upper-cased
        ("The answer is b, the dog", 1.0),  # step 2: [A-J] searched with IGNORECASE
        ("I think the answer is a bird, so B", 0.0),  # step 2: the article "a" is read as A
        ("<answer>AB</answer>", 0.0),  # step 1: "AB" is a substring of "ABCDEFGHIJ"
        ("<think>maybe C</think>\nB", 1.0),  # step 3: the text after </think>
        ("<answer>B. The dog</answer>", 0.0),  # long body: no step matches, whole reply != B
        ("I select option B", 1.0),  # step 4
        ("", 0.0),  # nothing extracted: the (empty) reply is compared
    ],
)
def test_multiple_choice(reply: str, value: float) -> None:
    assert _v(MC, reply) == value


@pytest.mark.parametrize(
    ("target", "reply", "value"),
    [
        (3, "<answer>3</answer>", 1.0),
        (3, "<answer>3.0</answer>", 0.0),  # "." in one string only: wrong before parsing
        (2.5, "<answer>2.50</answer>", 1.0),  # both decimal, equal to 2 places
        (1000, "<answer>1,000</answer>", 0.0),  # a comma counts as a decimal mark
        (12, "about 12 apples", 1.0),  # step 6 text, then leading/trailing words cut
        (5, "<think>count</think>\n5 objects in Room A", 0.0),  # step 5 reads "A" off the line
    ],
)
def test_numerical(target: Any, reply: str, value: float) -> None:
    assert _v(_s("numerical", target, "numerical"), reply) == value


def test_rec_joins_every_digit_of_the_answer() -> None:
    rec = _s("numerical", 3, "REC")
    assert _v(rec, "<answer>3</answer>") == 1.0
    assert _v(rec, "<answer>I counted 3 times in 2 minutes</answer>") == 0.0  # "32" != "3"


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("<answer>100</answer>", 1.0),
        ("<answer>150</answer>", 0.0),  # relative error 0.5 is not < 0.5 (strict)
        ("<answer>130</answer>", pytest.approx(0.4)),  # float32: 0.3 == 1 - 0.7, not <
        ("<answer>110</answer>", pytest.approx(0.9)),
    ],
)
def test_regression_is_float32_mra_with_a_strict_threshold(reply: str, value: Any) -> None:
    assert _v(_s("regression", 100, "regression"), reply) == value


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("<answer>No</answer>", 1.0),
        ("<answer>Not sure</answer>", 1.0),  # "NO" is a substring of "NOT SURE"
        ("N", 1.0),  # a bare N counts as NO
        ("<answer>Yes</answer>", 0.0),
    ],
)
def test_ovo_yes_no(reply: str, value: float) -> None:
    assert _v(_s("boolean", "No", "SSR", ovo_type=0), reply) == value


def test_yes_no_is_gameable_by_naming_both_words() -> None:
    for target, ovo in (("Yes", 1), ("No", 0)):
        assert _v(_s("boolean", target, "SSR", ovo_type=ovo), "<answer>yes no</answer>") == 1.0
    assert get_rule("easyvideor1", "boolean").gameable
    assert not get_rule("easyvideor1", "multiple_choice").gameable


def test_ovo_type_decides_the_yes_no_target() -> None:
    assert _v(_s("boolean", "No", "CRR", ovo_type=1), "<answer>Yes</answer>") == 1.0


TG = _s("temporal_grounding", [16.0, 19.0], "temporal grounding")


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ('<answer>{"time": [16, 19]}</answer>', 1.0),
        ('{"time": [17.5, 19]}', 0.5),  # no tags: the greedy {...} of the reply
        ('<think>maybe {"time": [0, 1]}</think>{"time": [16, 19]}', 0.0),  # think JSON first
        ('{"time": [19, 16]}', 0.0),  # a reversed span has no overlap
        ("[16, 19]", 0.0),  # not a JSON object
        ('{"time": ["16", "19"]}', 1.0),  # strings that float() accepts count
        ('{"time": [16, 19]} or {"time": [1, 2]}', 0.0),  # greedy braces: invalid JSON
    ],
)
def test_temporal_grounding(reply: str, value: float) -> None:
    got = score(TG, reply, rule="easyvideor1")
    assert got.value == value and got.metadata["tiou"] == value


def test_zero_length_spans_score_zero() -> None:
    point = _s("temporal_grounding", [5.0, 5.0], "temporal grounding")
    assert _v(point, '{"time": [5, 5]}') == 0.0  # union 0 -> 0


TUBE = {"time": [0.0, 10.0], "boxes": {"1": [0, 0, 10, 10], "2": [0, 0, 10, 10]}}


@pytest.mark.parametrize(
    ("boxes", "value", "viou"),
    [
        ({"1": [0, 0, 10, 10]}, 1.0, 0.5),  # mean over predicted keys in the target only
        ({"1.0": [0, 0, 10, 10]}, 0.5, 0.0),  # keys are compared as strings
        ([[0, 0, 10, 10]], 0.5, 0.0),  # boxes not a dict: box part 0
        ({"1": [0, 0, 10, 10], "2": [10, 10, 0, 0]}, 0.75, 0.5),  # reversed box: IoU 0
    ],
)
def test_spatiotemporal_grounding(boxes: Any, value: float, viou: float) -> None:
    sample = _s("spatiotemporal_grounding", TUBE, "spatial-temporal grounding")
    got = score(sample, json.dumps({"time": [0, 10], "boxes": boxes}), rule="easyvideor1")
    assert got.value == pytest.approx(value) and got.metadata["viou"] == pytest.approx(viou)


def test_a_tube_without_target_boxes_is_scored_on_time() -> None:
    sample = _s("spatiotemporal_grounding", {"time": [0.0, 10.0], "boxes": {}}, None)
    got = score(sample, '{"time": [0, 10], "boxes": {}}', rule="easyvideor1")
    assert got.value == 1.0 and got.metadata["problem_type"] == "spatial-temporal grounding"


def test_a_problem_type_reward_fn_does_not_branch_on_scores_zero() -> None:
    got = score(_s("numerical", 3, "number"), "<answer>3</answer>", rule="easyvideor1")
    assert got.value == 0.0 and "no branch" in got.metadata["reason"]


def test_without_a_row_problem_type_the_task_type_picks_the_branch() -> None:
    assert _v(_s("multiple_choice", "B", None), "B") == 1.0
    assert _v(_s("boolean", True, None), "yes") == 1.0  # the SSR/CRR branch


def test_registered_for_the_types_it_scores_and_not_for_others() -> None:
    for kind in ("multiple_choice", "numerical", "regression", "boolean", "temporal_grounding"):
        assert "easyvideor1" in rules_for(kind)
    assert "EasyVideoR1" in get_rule("easyvideor1", "spatiotemporal_grounding").source
    for kind in ("open_ended", "ocr", "spatial_grounding", "math"):
        assert "easyvideor1" not in rules_for(kind)


# --- "easyvideor1_reward": the training reward for types the eval script leaves at 0 ----


def _r(task: str, target: Any, reply: str) -> float | None:
    sample = Sample(id="r", task_type=task, question="q", target=target)
    return score(sample, reply, rule="easyvideor1_reward").value


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("<answer>yes</answer>", 1.0),
        ("< answer >TRUE</ answer >", 1.0),  # spaces around < > / removed, true -> yes
        ("1", 1.0),  # no tag: the whole reply, "1" -> yes
        ("<think>hmm</think>yes", 0.0),  # no tag: the whole reply, think included
        ("\\boxed{Yes}", 1.0),  # the last boxed body
        ("<answer>no</answer>", 0.0),
    ],
)
def test_reward_boolean(reply: str, value: float) -> None:
    assert _r("boolean", "Yes", reply) == value


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ("<answer>The Cat sat</answer>", 1.0),  # lower-cased words
        ("<answer>the cat</answer>", pytest.approx(2 / 3)),  # one deletion of three words
        ("<answer>a b c d e f g</answer>", 0.0),  # WER above 1 is clipped
    ],
)
def test_reward_ocr(reply: str, value: Any) -> None:
    assert _r("ocr", "the cat sat", reply) == value


@pytest.mark.parametrize(
    ("reply", "value"),
    [
        ('<answer>{"boxes": [0, 0, 10, 10]}</answer>', 1.0),
        ('I think ```json\n{"boxes": [5, 0, 15, 10]}\n``` is it', pytest.approx(50 / 150)),
        ('{"boxes": [10, 10, 0, 0]}', 0.0),  # reversed corners: area 0
        ("[0, 0, 10, 10]", 0.0),  # valid JSON but a list: .get fails there, 0
    ],
)
def test_reward_spatial_grounding(reply: str, value: Any) -> None:
    assert _r("spatial_grounding", {"boxes": [0, 0, 10, 10]}, reply) == value


# --- the one-pass scans equal the script's regexes (which are quadratic on "<think>"*n) --

_BITS = st.lists(
    st.sampled_from(["<think>", "</think>", "<THINK>", "</Think>", "{", "}", "a", " ", "\n"]),
    max_size=12,
).map("".join)


@given(text=_BITS)
def test_one_pass_scans_match_the_regexes(text: str) -> None:
    import re

    from evalkit.scoring.rules._easyvideor1 import (
        extract_between,
        first_to_last_brace,
        strip_think_blocks,
    )

    assert strip_think_blocks(text) == re.sub(r"<think>.*?</think>", "", text, flags=re.S | re.I)
    m = re.search(r"<think>\s*(.*?)\s*</think>", text, re.S)
    assert extract_between(text, "think") == (m.group(1).strip() if m else "")
    b = re.search(r"\{.*\}", text, re.S)
    assert first_to_last_brace(text) == (b.group(0) if b else None)
