"""TempCompass's official rules (the eval scripts' hand-written matching, --disable_llm),
its per-format and cross-format aggregates and its pinned prompts; verdicts traced by
hand through eval_multi-choice.py, eval_yes_no.py and eval_caption_matching.py."""

from __future__ import annotations

from pathlib import Path
from types import SimpleNamespace

import pytest

from evalkit.bench.aggregations import Scored
from evalkit.bench.aggregations.variants import across_variants, combined_headlines
from evalkit.bench.loader import load
from evalkit.bench.registry import get_benchmark
from evalkit.reports.report import build_report
from evalkit.sample import Sample
from evalkit.scoring import score
from evalkit.testing.runs import Rec, write_run
from tests._official_prompts import render_official
from tests._rule_cases import sample, scored, verdict
from tests.fixtures.bench import official

OPTS = ["dunking a basketball", "dribbling a basketball", "passing a basketball"]
MC = sample(target="A", options=OPTS, answer_line="A. dunking a basketball")

MC_CASES = [
    ("A. dunking a basketball", 1.0),  # == answer
    ("A", 1.0),  # bare letter == answer[0]
    ("B", 0.0),
    ("A.", 1.0),  # starts with "A.": "A" == answer[0]
    ("B. dribbling a basketball", 0.0),
    ("A) dunking", 1.0),  # starts with "A)"
    ("(A) dunking", 0.0),  # no rule applies: LLM fallback disabled -> 0
    ("The answer is A", 0.0),  # no rule applies
    ("  A </s>", 1.0),  # "</s>" removed, stripped
    ("a", 0.0),  # lower case is no rule's
    ("D", 0.0),  # a bare letter, compared with answer[0]
    ("A.dunking", 1.0),  # "A.dunking".split(".")[0] == "A"
    ("A. dribbling a basketball", 1.0),  # the letter decides, not the text
]


@pytest.mark.parametrize(("reply", "expected"), MC_CASES)
def test_multi_choice_verdicts(reply: str, expected: float) -> None:
    assert verdict("tempcompass", MC, reply).value == expected


def test_multi_choice_unmatched_reply_is_flagged_for_the_match_rate() -> None:
    assert verdict("tempcompass", MC, "(A) dunking").metadata["match_success"] is False
    assert verdict("tempcompass", MC, "D").metadata["match_success"] is True


def test_multi_choice_without_the_answer_line_rebuilds_it_from_the_options() -> None:
    s = sample(target="A", options=OPTS)  # another benchmark's sample
    assert verdict("tempcompass", s, "A. dunking a basketball").value == 1.0
    assert verdict("tempcompass", s, "C. passing a basketball").value == 0.0


YN_CASES = [
    ("yes", "yes", 1.0),
    ("Yes, the man is dunking.", "yes", 1.0),
    ("No", "yes", 0.0),
    ("not sure", "no", 1.0),  # starts with "no"
    ("The answer is yes", "yes", 0.0),  # starts with neither: LLM fallback disabled
    ("yesterday", "yes", 1.0),  # starts with "yes"
    ("  YES </s>", "yes", 1.0),
    ("nope", "no", 1.0),
    ("", "no", 0.0),
    ("No.", "no", 1.0),
    ("Yes", "no", 0.0),
    ("y", "yes", 0.0),  # too short to start with "yes"
    ("I think no", "no", 0.0),
]


@pytest.mark.parametrize(("reply", "target", "expected"), YN_CASES)
def test_yes_no_verdicts(reply: str, target: str, expected: float) -> None:
    assert verdict("tempcompass", sample("boolean", target=target), reply).value == expected


def test_yes_no_targets_spelt_otherwise_map_onto_yes_no() -> None:
    assert verdict("tempcompass", sample("boolean", target=True), "yes").value == 1.0
    assert verdict("tempcompass", sample("boolean", target="No"), "no").value == 1.0


def _caption(labels: tuple[str, str], answer_index: int, target: str) -> Sample:
    texts = ["A man is dunking a basketball.", "The man is dribbling a basketball."]
    if answer_index == 1:
        texts.reverse()
    lines = [f"{label}: {text}" for label, text in zip(labels, texts, strict=True)]
    return sample(target=target, options=texts, option_lines=lines, answer_line=lines[answer_index])


OPT = _caption(("Option 1", "Option 2"), 1, "B")  # answer "Option 2: A man is dunking .."
CAP = _caption(("Caption A", "Caption B"), 0, "A")  # answer "Caption A: A man is dunking .."

CM_CASES = [
    (OPT, "Option 2", 1.0),  # a label == answer.split(":")[0]
    (OPT, "2", 1.0),  # a bare label == the answer label's second word
    (OPT, "B", 0.0),  # "B" is no label of an Option-question: fail -> 0
    (OPT, "Option 2: A man is dunking a basketball.", 1.0),  # the whole line
    (OPT, "A man is dunking a basketball.", 1.0),  # the sentence
    (OPT, "Option 1", 0.0),
    (OPT, "2.", 1.0),  # dots ignored for labels
    (OPT, "(2) A man is dunking a basketball.", 1.0),  # the sentence after ") "
    (OPT, "The second option", 0.0),
    (CAP, "A", 1.0),
    (CAP, "Caption B", 0.0),
    (CAP, "Caption A.", 1.0),
    (CAP, "A man is dunking a basketball", 0.0),  # no final dot: not the sentence
]


@pytest.mark.parametrize(("s", "reply", "expected"), CM_CASES)
def test_caption_matching_verdicts(s: Sample, reply: str, expected: float) -> None:
    assert verdict("tempcompass", s, reply).value == expected


def test_headline_rules_are_the_official_ones() -> None:
    spec = get_benchmark("TempCompass")
    assert spec.headline_rule("multiple_choice") == "tempcompass"
    assert get_benchmark("TempCompass:yes_no").headline_rule("boolean") == "tempcompass"
    assert get_benchmark("TempCompass:caption_matching").headline_rule("multiple_choice") == (
        "tempcompass"
    )


def _runs() -> dict[str, list[Scored]]:
    mc = [scored("multiple_choice", v) for v in (1.0, 1.0, 0.0, 0.0)]
    yn = [scored("boolean", v) for v in (1.0, 1.0, 1.0, 0.0)]
    cm = [scored("multiple_choice", v) for v in (1.0, 0.0)]
    cap = [scored("llm_judge", v) for v in (1.0, 0.0)]
    return {"base": mc, "yes_no": yn, "caption_matching": cm, "captioning": cap}


def test_avg_all_pools_the_four_formats_questions() -> None:
    res = across_variants(get_benchmark("TempCompass"), _runs())
    assert res.overall == pytest.approx(100 * 7 / 12)
    assert res.breakdowns["variant"] == {
        "base": 50.0,
        "yes_no": 75.0,
        "caption_matching": 50.0,
        "captioning": 50.0,
    }
    assert res.metrics["mean_of_variants"] == pytest.approx(56.25)


def test_avg_all_is_none_while_captioning_is_unjudged() -> None:
    runs = _runs()
    runs["captioning"] = [scored("llm_judge", None), scored("llm_judge", None)]
    res = across_variants(get_benchmark("TempCompass"), runs)
    assert res.overall is None
    assert res.metrics["variants_without_score"] == 1.0


def test_combined_headlines_needs_all_four_variants_of_a_run() -> None:
    runs = _runs()
    benches = [
        SimpleNamespace(
            spec=get_benchmark(f"TempCompass:{v}" if v != "base" else "TempCompass"),
            variant=None if v == "base" else v,
            scored=rows,
        )
        for v, rows in runs.items()
    ]
    got = combined_headlines(benches)
    assert got["TempCompass:avg_all"].overall == pytest.approx(100 * 7 / 12)
    assert combined_headlines(benches[:3]) == {}


def test_official_prompts_render_the_run_script_text() -> None:
    spec = get_benchmark("TempCompass")
    mc = sample(target="A", options=OPTS, question="What is the man doing?")
    assert render_official(spec, "multiple_choice", mc) == (
        "What is the man doing?\nA. dunking a basketball\nB. dribbling a basketball\n"
        "C. passing a basketball\nPlease directly give the best option:"
    )
    yn = sample("boolean", target="yes", question="Is the man dunking?")
    assert render_official(spec, "boolean", yn) == ("Is the man dunking?\nPlease answer yes or no:")
    cm_spec = get_benchmark("TempCompass:caption_matching")
    cm = _caption(("Caption A", "Caption B"), 0, "A")
    cm.question = "Which caption matches the video better?"
    assert render_official(cm_spec, "multiple_choice", cm) == (
        "Which caption matches the video better?\nCaption A: A man is dunking a basketball.\n"
        "Caption B: The man is dribbling a basketball.\nPlease directly give the best option:"
    )


def test_loaded_caption_matching_rows_keep_the_labels_the_rule_reads(tmp_path: Path) -> None:
    spec = get_benchmark("TempCompass:caption_matching")
    (s,) = [x for x in load(spec, official.tempcompass(tmp_path)) if x.fields["video_id"] == "t1"]
    assert s.fields["option_lines"] == ["Caption A: slow", "Caption B: fast"]
    assert s.fields["answer_line"] == "Caption B: fast"
    rule = spec.headline_rule("multiple_choice")
    assert [score(s, r, rule=rule).value for r in ("Caption B", "B", "fast", "A")] == [
        1.0,
        1.0,
        1.0,
        0.0,
    ]
    assert render_official(spec, "multiple_choice", s) == (
        "Which caption matches t1?\nCaption A: slow\nCaption B: fast\n"
        "Please directly give the best option:"
    )


def test_loaded_multi_choice_rows_keep_the_answer_line(tmp_path: Path) -> None:
    spec = get_benchmark("TempCompass")
    s = load(spec, official.tempcompass(tmp_path))[0]
    assert s.fields["answer_line"] == "B. fast"
    assert score(s, "B. fast", rule="tempcompass").value == 1.0
    assert render_official(spec, "multiple_choice", s) == (
        f"{s.question}\nA. slow\nB. fast\nC. still\nPlease directly give the best option:"
    )


def test_a_variant_seen_twice_is_ambiguous_and_not_combined() -> None:
    runs = _runs()
    benches = [
        SimpleNamespace(spec=get_benchmark("TempCompass"), variant=v, scored=rows)
        for v, rows in [(None, runs["base"]), *[(k, r) for k, r in runs.items() if k != "base"]]
    ]
    assert combined_headlines([*benches, benches[1]]) == {}


def test_report_shows_avg_all_from_one_run_per_variant(tmp_path: Path) -> None:
    values = {
        None: [1.0, 0.0],
        "yes_no": [1.0, 1.0],
        "caption_matching": [0.0],
        "captioning": [1.0],
    }
    kinds = {"yes_no": "boolean", "captioning": "llm_judge"}
    paths: list[str | Path] = [
        write_run(
            tmp_path / f"run-{v or 'base'}",
            "m",
            {
                "TempCompass": [
                    Rec(f"q{i}", x, task_type=kinds.get(v or "", "multiple_choice"))
                    for i, x in enumerate(vals)
                ]
            },
            variant=v,
        )
        for v, vals in values.items()
    ]
    report = build_report(paths, bootstrap=2)
    (section,) = [s for s in report.sections if s.title == "Headlines across variants"]
    assert section.rows[0][:3] == ["TempCompass:avg_all", "m", "66.67"]  # 4 right of 6
