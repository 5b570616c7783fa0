"""Official rows the loader used to reject or alter, and the replies the rules read
differently from the official code (issue 24, items 1-3 and 8): each case is a row or a
reply quoted in the issue, with the official verdict traced by hand from the scorer."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from evalkit.bench.answers import NO_OPTION
from evalkit.bench.files import Row
from evalkit.bench.loader import build_sample, load, load_hook
from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample
from evalkit.scoring import score
from evalkit.scoring.options import letter
from tests._official_prompts import render_official
from tests._scoring_helpers import sample
from tests.fixtures.bench.media import write_json


def _sample(bench: str, data: dict[str, Any], tmp_path: Path) -> Sample:
    spec = get_benchmark(bench)
    adapter = load_hook(spec, spec.adapter) if spec.adapter else None
    got = build_sample(
        spec, Row("f.json", "item 1", data), tmp_path, check_media=False, adapter=adapter
    )
    assert got is not None
    return got


def _ovo_row(options: list[str], gt: int) -> dict[str, Any]:
    """EPM 205 as released: one option carries a stray "(E)" prefix."""
    return {
        "id": 205,
        "task": "EPM",
        "video": "a.mp4",
        "realtime": 3.0,
        "question": "What did I put in the bin?",
        "options": options,
        "gt": gt,
    }


# -- OVO-Bench: a stray "(E)" on one option ---------------------------------------------


def test_ovobench_row_with_a_stray_option_prefix_loads_with_its_options_verbatim(
    tmp_path: Path,
) -> None:
    row = _ovo_row(["The sponge", "(E)The toilet brush"], 1)
    s = _sample("OVO-Bench", row, tmp_path)
    assert (s.options, s.target) == (["The sponge", "(E)The toilet brush"], "B")


def test_ovobench_official_prompt_shows_the_stray_prefix_as_build_prompt_does(
    tmp_path: Path,
) -> None:
    row = _ovo_row(["The sponge", "(E)The toilet brush"], 1)
    s = _sample("OVO-Bench", row, tmp_path)
    assert "A. The sponge; B. (E)The toilet brush;" in render_official(
        "OVO-Bench", "multiple_choice", s
    )


def test_ovobench_release_with_such_rows_loads_every_row(tmp_path: Path) -> None:
    rows = [{**_ovo_row(["The sponge", "(E)The toilet brush"], 0), "id": i} for i in (205, 210)]
    write_json(tmp_path / "ovo_bench_new.json", rows)
    loaded = load(get_benchmark("OVO-Bench"), tmp_path, check_media=False)
    assert ([s.id for s in loaded], loaded.invalid) == (["205", "210"], [])


# -- Video-MMMU: option texts that start like a letter prefix ----------------------------


def _mmmu(options: list[str], answer: str = "B") -> dict[str, Any]:
    return {
        "id": "validation_Economics_2",
        "track": "Perception",
        "question": "Which one?",
        "options": options,
        "answer": answer,
        "question_type": "multiple-choice",
        "link_selected": "https://example.invalid",
        "image": None,
    }


@pytest.mark.parametrize(
    "first",
    [
        "A: $3,616.24, B: $3,700.00",
        "R.L at point C is the highest",
        "X:0.06%, Y:0.08%",
        "M: $57,000; N: $60,000",
        "H.54",
    ],
)
def test_videommmu_option_that_begins_like_a_prefix_loads_verbatim(
    first: str, tmp_path: Path
) -> None:
    s = _sample("Video-MMMU", _mmmu([first, "12", "13", "14"]), tmp_path)
    assert s.options == [first, "12", "13", "14"]


def test_videommmu_prefixed_options_keep_their_prefixes(tmp_path: Path) -> None:
    s = _sample("Video-MMMU", _mmmu(["A. 10", "B. 20", "C. 30", "D. 40"]), tmp_path)
    assert s.options == ["A. 10", "B. 20", "C. 30", "D. 40"]


def test_videommmu_reply_naming_a_prefixed_option_text_scores_as_the_official(
    tmp_path: Path,
) -> None:
    # MMMU's text fallback looks for the option text ("B. 20") in a long reply without a
    # letter: absent, so no answer (0); with the prefixes stripped, "20" was found (1)
    s = _sample("Video-MMMU", _mmmu(["A. 10", "B. 20", "C. 30", "D. 40"]), tmp_path)
    got = score(s, "the price rises to 20 dollars after the tax", rule="videommmu")
    assert got.value == 0.0


# -- MLVU: equal options and answers that are none of the options -------------------------


def _mlvu(candidates: list[str], answer: str) -> dict[str, Any]:
    return {
        "video": "v.mp4",
        "duration": 100.0,
        "question": "How many?",
        "candidates": candidates,
        "answer": answer,
        "question_type": "count",
        "task": "count",
        "video_dir": "4_count",
    }


def test_mlvu_official_rule_takes_the_last_of_two_equal_options(tmp_path: Path) -> None:
    s = _sample("MLVU", _mlvu(["Six", "Three", "Three", "Eight"], "Three"), tmp_path)
    assert score(s, "C) Three", rule="mlvu").value == 1.0


def test_mlvu_official_rule_counts_the_first_of_two_equal_options_wrong(tmp_path: Path) -> None:
    s = _sample("MLVU", _mlvu(["Six", "Three", "Three", "Eight"], "Three"), tmp_path)
    assert score(s, "B) Three", rule="mlvu").value == 0.0


def test_mlvu_robust_rule_keeps_the_first_of_two_equal_options(tmp_path: Path) -> None:
    s = _sample("MLVU", _mlvu(["Six", "Three", "Three", "Eight"], "Three"), tmp_path)
    assert (s.target, score(s, "B").value) == ("B", 1.0)


def test_mlvu_needle_row_whose_answer_is_no_option_loads_and_is_never_right(
    tmp_path: Path,
) -> None:
    s = _sample("MLVU", {**_mlvu(["a", "b", "c", "d"], "e"), "task": "needle"}, tmp_path)
    verdicts = [score(s, f"{x}) x", rule="mlvu").value for x in "ABCD"] + [
        score(s, x).value for x in "ABCD"
    ]
    assert (s.target, verdicts) == (NO_OPTION, [0.0] * 8)


# -- Video-MMMU open questions: MMMU's key-phrase loop ------------------------------------


def _open(gold: str) -> Sample:
    return sample("math", gold, [])


def test_videommmu_open_line_ending_in_an_indicator_keeps_the_next_tail() -> None:
    # "the final answer is " -> tails "", "answer is", "is": the loop restarts at "",
    # keeps "is"; 71.6 is on a line with no indicator: not a key phrase (official 0)
    assert score(_open("71.6"), "The final answer is \n71.6", rule="videommmu").value == 0.0


def test_videommmu_open_number_before_a_trailing_indicator_is_found() -> None:
    reply = "There are 42 people, which is \nmore than last year, so we are done."
    assert score(_open("42"), reply, rule="videommmu").value == 1.0


# -- Video-MME-v2: what pandas reads back from the official TSV ---------------------------


@pytest.mark.parametrize("reply", ["N/A", "NA", "#N/A", "<NA>", "-1.#IND"])
def test_videommev2_reply_pandas_reads_as_nan_has_no_letter(reply: str) -> None:
    got = score(sample("multiple_choice", "A", list("abcdefgh")), reply, rule="videommev2")
    assert (got.value, got.metadata.get("official_mark")) == (0.0, -1)


def test_videommev2_reply_that_only_contains_na_still_reads_its_letter() -> None:
    got = score(sample("multiple_choice", "A", list("abcdefgh")), "N/A, so A", rule="videommev2")
    assert got.value == 1.0


# -- the robust rule: letters named as alternatives commit to none ------------------------


@pytest.mark.parametrize(
    ("reply", "options"),
    [
        ("The answer is either B or C; the video shows 1 person walking.", ["1", "2", "3", "4"]),
        ("It is either A or B; the man is walking to the left.", ["right", "up", "left", "down"]),
        ("Both A and B are possible, although the car is red.", ["blue", "green", "white", "red"]),
    ],
)
def test_robust_rule_reply_hedging_between_two_letters_picks_none(
    reply: str, options: list[str]
) -> None:
    assert letter(reply, options, list("ABCD")) == (None, "ambiguous")


def test_robust_rule_two_letters_not_as_alternatives_still_read_the_option_text() -> None:
    # the control: "A and B show a dog" rules nothing in or out; the red car decides
    reply = "Options A and B show a dog; the video shows a red car."
    assert letter(reply, ["blue", "green", "white", "red"], list("ABCD"))[0] == "D"
