"""Each shipped benchmark end to end on a tiny official-layout copy: load -> score
hand-written predictions -> the OFFICIAL aggregate equals the hand-computed value."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from evalkit.bench.aggregations import AggregateResult, Scored, aggregate
from evalkit.bench.loader import load, validate
from evalkit.bench.registry import get_benchmark
from evalkit.bench.spec import BenchmarkSpec
from evalkit.prompts import PromptPlan
from evalkit.sample import Sample
from evalkit.scoring import score
from tests.fixtures.bench import official


def score_letter(sample: Sample, prediction: str) -> float:
    """The real scorer on a model-like answer (so extraction is exercised too)."""
    value = score(sample, f"The answer is {prediction}.").value
    assert value is not None
    return value


def prompted(spec: BenchmarkSpec, samples: list[Sample]) -> None:
    """Every sample renders in the pinned variant, its question and options in it (an
    official prompt writes options its own way)."""
    plan = PromptPlan.for_spec(spec)
    for s in samples:
        text, _ = plan.render(s)
        assert s.question.strip() in text
        if plan.variant_for(s.task_type) == "official":
            continue  # official wording (e.g. MLVU's "(A) text") is pinned by the rules' tests
        assert all(
            f"{letter}. {opt}".strip() in text
            for letter, opt in zip(s.letters, s.options, strict=True)
        )


def run(name: str, root: Path, predictions: dict[str, str]) -> tuple[list[Sample], AggregateResult]:
    spec = get_benchmark(name)
    samples = load(spec, root)
    prompted(spec, samples)
    assert sorted(s.id for s in samples) == sorted(predictions), "fixture ids changed"
    scored = [Scored(s, score_letter(s, predictions[s.id])) for s in samples]
    return samples, aggregate(spec, scored)


def test_videomme_overall_and_duration_breakdown(tmp_path: Path) -> None:
    root = official.videomme(tmp_path)
    preds = {"001-1": "A", "001-2": "C", "002-1": "C", "002-2": "D", "003-1": "B", "003-2": "B"}
    samples, res = run("Video-MME", root, preds)
    assert res.overall == pytest.approx(400 / 6)
    assert res.breakdowns["duration"] == pytest.approx(
        {"short": 50.0, "medium": 100.0, "long": 50.0}
    )
    assert res.breakdowns["domain"] == pytest.approx({"Knowledge": 50.0, "Sports": 100.0})
    assert res.breakdowns["task"] == pytest.approx(
        {"Counting Problem": 200 / 3, "OCR Problems": 200 / 3}
    )
    first = next(s for s in samples if s.id == "001-1")
    assert first.options == ["one 001-1", "two 001-1", "three 001-1", "four 001-1"]
    assert first.media[0].path.endswith("data/vidA.mp4")
    assert (res.n, res.n_scored, res.n_unscored) == (6, 6, 0)


def test_videomme_subtitles_variant_attaches_the_srt_where_one_exists(tmp_path: Path) -> None:
    root = official.videomme(tmp_path)
    spec = get_benchmark("video-mme:with_subtitles")
    samples = {s.id: s for s in load(spec, root)}
    assert samples["001-1"].fields["subtitle_path"].endswith("subtitle/vidA.srt")
    assert "subtitle_path" not in samples["002-1"].fields
    assert spec.prompt.template == "multiple_choice_subtitles"


def run_with(
    name: str, root: Path, predict: Callable[[Sample], str]
) -> tuple[list[Sample], AggregateResult]:
    spec = get_benchmark(name)
    samples = load(spec, root)
    prompted(spec, samples)
    scored = [Scored(s, score_letter(s, predict(s))) for s in samples]
    return samples, aggregate(spec, scored)


def test_mvbench_is_pooled_over_all_questions_with_task_accuracies_beside(tmp_path: Path) -> None:
    root = official.mvbench(tmp_path)
    wrong = {"action_antonym_0.mp4", "action_sequence_1.mp4", "object_existence_3.mp4"}
    samples, res = run_with(
        "MVBench", root, lambda s: "A" if Path(s.media[0].path).name in wrong else "B"
    )
    # 17 tasks at 100, Action Antonym 0/1, Action Sequence 1/2, Object Existence 3/4
    assert len(res.breakdowns["task"]) == 20
    assert res.breakdowns["task"]["Action Antonym"] == 0.0
    assert res.breakdowns["task"]["Action Sequence"] == 50.0
    assert res.breakdowns["task"]["Object Existence"] == 75.0
    # mvbench.ipynb's Avg = correct / total (87.5), not the mean of the tasks (91.25)
    assert res.overall == pytest.approx(100 * 21 / 24)
    seq = sorted((s for s in samples if s.fields["task"] == "Action Sequence"), key=lambda s: s.id)
    assert [(m.start, m.end) for s in seq for m in s.media] == [(1.5, 4.0), (2.5, 5.0)]
    assert all(s.target == "B" for s in samples)  # answer text -> its letter


def test_lvbench_overall_and_per_capability_with_multi_tagged_questions(tmp_path: Path) -> None:
    root = official.lvbench(tmp_path)
    preds = {"101": "A", "102": "A", "201": "C", "202": "B"}
    samples, res = run("LVBench", root, preds)
    assert res.overall == 50.0
    assert res.breakdowns["capability"] == pytest.approx(
        {
            "entity recognition": 50.0,
            "temporal grounding": 0.0,
            "event understanding": 0.0,
            "reasoning": 100.0,
            "key information retrieval": 0.0,
        }
    )
    assert res.breakdowns["video_type"] == {"cartoon": 50.0, "sports": 50.0}
    s101 = next(s for s in samples if s.id == "101")
    assert (s101.question, s101.options) == ("Who?", ["cat", "dog", "owl", "fox"])
    assert s101.media[0].path.endswith("videos/vidL1.mp4")


def test_mlvu_dev_m_avg_is_the_mean_over_its_7_choice_tasks(tmp_path: Path) -> None:
    root = official.mlvu_dev(tmp_path)
    wrong = {"plotQA_1.mp4", "ego_0.mp4"}
    _, res = run_with("MLVU", root, lambda s: "A" if Path(s.media[0].path).name in wrong else "B")
    assert res.breakdowns["task"] == pytest.approx(
        {
            "plotQA": 50.0,
            "needle": 100.0,
            "ego": 0.0,
            "count": 100.0,
            "order": 100.0,
            "anomaly_reco": 100.0,
            "topic_reasoning": 100.0,
        }
    )
    assert res.overall == pytest.approx(550 / 7)  # 78.57; pooled would be 9/11 = 81.8
    assert res.metrics["pooled"] == pytest.approx(900 / 11)


def test_mlvu_test_variant_reads_the_ground_truth_file(tmp_path: Path) -> None:
    root = official.mlvu_test(tmp_path)
    preds = {"T0": "C", "T1": "C", "T2": "A"}
    _, res = run("MLVU:test", root, preds)
    assert res.breakdowns["task"] == {"plotQA": 100.0, "sportsQA": 50.0}
    assert res.overall == 75.0


def test_videomathqa_mcq_accuracy_with_category_and_length(tmp_path: Path) -> None:
    root = official.videomathqa(tmp_path)
    _, res = run("VideoMathQA", root, {"1": "B", "2": "C", "3": "C"})
    assert res.overall == pytest.approx(200 / 3)
    assert res.breakdowns["category"] == {"Counting": 100.0, "Geometry Angle": 0.0}
    assert res.breakdowns["length"] == {"short": 50.0, "long": 100.0}


def test_videomathqa_mbin_counts_a_question_only_if_all_pairs_are_right(tmp_path: Path) -> None:
    root = official.videomathqa(tmp_path)
    wrong = {(2, "16"), (3, "10")}  # one distractor pair missed for questions 2 and 3

    def predict(s: Sample) -> str:
        return "B" if (s.fields["question_id"], s.options[1]) in wrong else "A"

    samples, res = run_with("VideoMathQA:mbin", root, predict)
    assert len(samples) == 12 and len({s.id for s in samples}) == 12
    assert res.overall == pytest.approx(100 / 3)  # only question 1 survives
    assert res.metrics["pair_accuracy"] == pytest.approx(1000 / 12)
    assert res.breakdowns["category"] == {"Counting": 50.0, "Geometry Angle": 0.0}
    assert res.breakdowns["length"] == {"short": 50.0, "long": 0.0}


def test_longvideobench_accuracy_per_duration_group(tmp_path: Path) -> None:
    root = official.longvideobench(tmp_path)
    # truth: q1 A, q2 D, q3 B, q4 C, q5 A
    samples, res = run(
        "LongVideoBench", root, {"q1": "A", "q2": "A", "q3": "B", "q4": "C", "q5": "B"}
    )
    assert res.overall == pytest.approx(60.0)
    assert res.breakdowns["duration_group"] == {"15": 50.0, "600": 100.0, "3600": 50.0}
    assert res.breakdowns["question_category"] == pytest.approx(
        {"S2E": 200 / 3, "O3O": 0.0, "T3O": 100.0}
    )
    q1 = next(s for s in samples if s.id == "q1")
    assert len(q1.options) == 4 and q1.target == "A"


def test_longvideobench_interleaved_subtitles_variant(tmp_path: Path) -> None:
    root = official.longvideobench(tmp_path)
    samples = {s.id: s for s in load(get_benchmark("lvb:interleaved_subtitles"), root)}
    assert samples["q1"].fields["subtitle_path"].endswith("subtitles/v1_en.json")
    assert "subtitle_path" not in samples["q3"].fields
    assert samples["q1"].fields["starting_timestamp_for_subtitles"] == 0.0


def test_mmvu_open_ended_without_a_judge_is_unscored_not_wrong(tmp_path: Path) -> None:
    root = official.mmvu(tmp_path)
    spec = get_benchmark("MMVU")
    samples = {s.id: s for s in load(spec, root)}
    assert samples["validation_1"].task_type == "open_ended"
    assert samples["validation_1"].target == "Dolly zoom" and samples["validation_1"].options == []
    assert samples["validation_0"].options == [f"{k} text 0" for k in "ABCDE"]
    assert samples["validation_3"].fields["discipline"] == "Healthcare"
    assert samples["validation_2"].media[0].path.endswith("videos/Chemistry/2.mp4")
    preds = {"validation_0": "B", "validation_2": "C", "validation_3": "E"}
    scored = [
        Scored(s, score_letter(s, preds[s.id]) if s.task_type == "multiple_choice" else None)
        for s in samples.values()
    ]
    res = aggregate(spec, scored)
    assert (res.n, res.n_scored, res.n_unscored) == (4, 3, 1)
    assert res.overall == pytest.approx(200 / 3)
    assert res.breakdowns["discipline"] == {
        "Humanities_and_Social_Science": 100.0,
        "Science": 0.0,
        "Healthcare": 100.0,
    }


def test_mmvu_mc_variant_keeps_only_choice_questions(tmp_path: Path) -> None:
    root = official.mmvu(tmp_path)
    samples = load(get_benchmark("MMVU:mc"), root)
    assert sorted(s.id for s in samples) == ["validation_0", "validation_2", "validation_3"]


def test_videommmu_per_track_with_the_adaptation_image_appended(tmp_path: Path) -> None:
    root = official.videommmu(tmp_path)
    spec = get_benchmark("Video-MMMU")
    samples = load(spec, root)
    prompted(spec, samples)
    by = {s.id: s for s in samples}
    assert len(by) == 6  # a video's id repeats across tracks; the track keeps ids apart
    adapt = by["Adaptation/validation_Math_2"]
    assert [m.kind for m in adapt.media] == ["video", "image"]
    assert adapt.media[0].path.endswith("Science/validation_Math_2.mp4")
    assert adapt.media[1].path.endswith("images/validation_Math_2.png")
    assert [m.kind for m in by["Perception/validation_Math_2"].media] == ["video"]
    open_q = by["Adaptation/test_Pharmacy_4"]
    assert (open_q.task_type, open_q.target) == ("math", "12.5")
    preds = {
        "Perception/validation_Art_Theory_1": "The answer is A.",
        "Perception/validation_Math_2": "The answer is C.",
        "Comprehension/validation_Art_Theory_1": "The answer is C.",
        "Comprehension/validation_Pharmacy_4": "The answer is D.",
        "Adaptation/validation_Math_2": "The answer is A.",
        "Adaptation/test_Pharmacy_4": "<answer>12.5</answer>",
    }
    res = aggregate(spec, [Scored(s, score(s, preds[s.id]).value) for s in samples])
    assert res.breakdowns["track"] == {
        "Perception": 50.0,
        "Comprehension": 100.0,
        "Adaptation": 50.0,
    }
    assert res.overall == pytest.approx(400 / 6)
    assert res.breakdowns["discipline"] == pytest.approx(
        {"Art": 100.0, "Science": 0.0, "Medicine": 100.0}
    )


def test_videommmu_a_missing_adaptation_image_is_an_error(tmp_path: Path) -> None:
    root = official.videommmu(tmp_path)
    (root / "images" / "test_Pharmacy_4.png").unlink()
    report = validate(get_benchmark("Video-MMMU"), root)
    assert [(p.row, p.field) for p in report.problems] == [("row 1", "image_file")]


def test_motionbench_scores_the_dev_answers_per_category(tmp_path: Path) -> None:
    root = official.motionbench(tmp_path)
    samples, res = run("MotionBench", root, {"11": "A", "21": "B", "22": "D"})
    assert res.overall == pytest.approx(200 / 3)
    assert res.breakdowns["category"] == {"Camera Motion": 100.0, "Repetition Count": 50.0}
    by = {s.id: s for s in samples}
    assert by["11"].options == ["left", "right", "up", "down"]
    assert by["11"].question == "Which way does it move?"
    assert by["21"].media[0].path.endswith("public-dataset/m2_3_5.mp4")  # second video root


def _by_video(spec_name: str, root: Path, answers: dict[str, str]) -> AggregateResult:
    spec = get_benchmark(spec_name)
    samples = load(spec, root)
    prompted(spec, samples)
    return aggregate(
        spec, [Scored(s, score(s, answers[s.fields["video_id"]]).value) for s in samples]
    )


def test_tempcompass_multi_choice_per_aspect(tmp_path: Path) -> None:
    root = official.tempcompass(tmp_path)
    res = _by_video("TempCompass", root, {"t1": "B", "t2": "B", "t3": "A"})
    assert res.overall == pytest.approx(200 / 3)
    assert res.breakdowns["aspect"] == {"speed": 50.0, "direction": 100.0}


def test_tempcompass_yes_no_and_caption_matching_formats(tmp_path: Path) -> None:
    root = official.tempcompass(tmp_path)
    res = _by_video("TempCompass:yes_no", root, {"t1": "Yes", "t2": "No", "t3": "yes"})
    assert res.breakdowns["aspect"] == {"speed": 100.0, "direction": 0.0}
    res = _by_video("TempCompass:caption_matching", root, {"t1": "B", "t2": "A", "t3": "A"})
    assert res.overall == pytest.approx(100 / 3)
    (s,) = [
        x
        for x in load(get_benchmark("tempcompass:caption_matching"), root)
        if x.fields["video_id"] == "t1"
    ]
    assert (s.question, s.options, s.target) == ("Which caption matches t1?", ["slow", "fast"], "B")


def test_videommev2_grouped_nonlinear_score(tmp_path: Path) -> None:
    root = official.videommev2(tmp_path)
    spec = get_benchmark("Video-MME-v2")
    samples = load(spec, root)
    prompted(spec, samples)
    assert all(len(s.options) == 8 for s in samples)
    # which questions (chain order) are answered right, per group
    pattern = {"001": "1101", "002": "1101", "003": "1010", "004": "0111"}

    def value(s: Sample) -> float:
        i = int(s.question[1]) - 1
        answer = (
            s.target if pattern[s.fields["group"]][i] == "1" else "A" if s.target != "A" else "B"
        )
        out = score(s, f"The answer is {answer}.").value
        assert out is not None
        return out

    res = aggregate(spec, [Scored(s, value(s)) for s in samples])
    # relevance 3/4 right -> 9/16; logic chain prefix 2 -> 4/16; [1,[2,3],4] with 1 and 3
    # right -> prefix 2 -> 4/12; [[1,2],3,4] with 2 right (1 wrong) -> prefix 1 -> 1/10
    group_scores = [900 / 16, 400 / 16, 400 / 12, 100 / 10]
    assert res.overall == pytest.approx(sum(group_scores) / 4)  # 31.15
    assert res.metrics["avg_acc"] == pytest.approx(100 * 11 / 16)
    assert res.metrics["relevance_linear"] == pytest.approx(75.0)
    assert res.breakdowns["level"] == pytest.approx(
        {"1": 900 / 16, "2": 400 / 16, "3": (400 / 12 + 100 / 10) / 2}
    )
    assert res.breakdowns["group_type"] == pytest.approx(
        {"relevance": 900 / 16, "logic": (400 / 16 + 400 / 12 + 100 / 10) / 3}
    )


def test_videommev2_a_group_missing_a_question_is_left_out(tmp_path: Path) -> None:
    root = official.videommev2(tmp_path)
    spec = get_benchmark("Video-MME-v2")
    samples = [s for s in load(spec, root) if s.question != "Q4 about video 001?"]
    res = aggregate(spec, [Scored(s, 1.0) for s in samples])
    assert res.overall == 100.0 and res.metrics["incomplete_groups"] == 1.0
