"""``--data`` rows that name a known benchmark run under its spec: official aggregate,
task types and judge; odd rows fail alone; parts of one question are grouped.

Fixtures are unified-schema rows written here in the field layout of EasyVideoR1's
eval/data/valid_data files (data_source, problem_id, original_question_type, ovo_task,
mbinary_id, ...); the expected numbers are worked out by hand from each official rule.
"""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest

from evalkit.bench.aggregations import Scored, aggregate
from evalkit.bench.unified_known import DataBench, data_benches, load_data, match_benchmark
from evalkit.errors import DataError
from evalkit.sample import Sample
from tests.test_bench_unified import REAL, REAL_FILES, _write


def _row(pid: Any, **kw: Any) -> dict[str, Any]:
    base = {
        "data_type": "video",
        "data_source": "VSIBench",
        "problem_type": "multiple choice",
        "path": "./scannet/scene0001_00.mp4",
        "problem": f"question {pid}?",
        "problem_id": pid,
        "options": ["A. left", "B. right", "C. back", "D. front"],
        "solution": "<answer>A</answer>",
    }
    return {**base, **kw}


def _by_name(benches: list[DataBench]) -> dict[str, DataBench]:
    return {b.name: b for b in benches}


def _score(bench: DataBench, values: Mapping[str, float | None]) -> Any:
    return aggregate(bench.spec, [Scored(s, values[s.id]) for s in bench.samples])


def _vsi_rows() -> list[dict[str, Any]]:
    mc = dict(original_question_type="object_rel_direction_easy")
    return [
        _row(1, **mc),
        _row(2, original_question_type="object_rel_direction_medium"),
        _row(3, original_question_type="object_rel_direction_hard"),
        _row(4, original_question_type="route_planning", path="./arkitscenes/4.mp4"),
        _row(5, original_question_type="route_planning"),
        _row(
            6,
            problem_type="regression",
            original_question_type="object_counting",
            options=None,
            solution="<answer>3</answer>",
        ),
        # the options of this row repeat letters (LongVideo-Reason has such rows)
        _row(7, original_question_type="route_planning", options=["A. x", "B. y", "A. z"]),
    ]


def test_vsibench_rows_get_the_merged_macro_mean_not_a_pooled_one(tmp_path: Path) -> None:
    (bench,) = data_benches(_write(tmp_path, _vsi_rows(), "vsibench.json"))
    assert (bench.name, bench.benchmark, bench.official) == (
        "VSI-Bench (vsibench.json)",
        "VSI-Bench",
        True,
    )
    assert [s.task_type for s in bench.samples] == ["multiple_choice"] * 5 + ["regression"]
    values = dict(zip((s.id for s in bench.samples), [1.0, 0.0, 1.0, 1.0, 0.0, 0.5], strict=True))
    res = _score(bench, values)
    # rel_direction easy/medium/hard (100, 0, 100) merge into one task: 66.7; route
    # planning 50; object counting 50 -> mean of the three task scores (pooled: 58.3)
    assert res.breakdowns["question_type"] == pytest.approx(
        {"object_rel_direction": 200 / 3, "route_planning": 50.0, "object_counting": 50.0}
    )
    assert res.overall == pytest.approx((200 / 3 + 50 + 50) / 3)
    assert res.metrics["pooled"] == pytest.approx(350 / 6)
    assert res.breakdowns["source_dataset"] == pytest.approx(
        {"arkitscenes": 100.0, "scannet": 50.0}
    )


def test_an_odd_row_is_named_and_the_rest_of_the_file_loads(tmp_path: Path) -> None:
    path = _write(tmp_path, _vsi_rows(), "vsibench.json")
    data = load_data(path)
    assert (data.loaded.rows, len(data.loaded), len(data.loaded.invalid)) == (7, 6, 1)
    (bad,) = data.benches[0].problems
    assert (bad.file, bad.row, bad.field) == (str(path), "item 6", "options")
    assert bad.message == "option letters ['A', 'B', 'A'] repeat A"


def test_ovobench_rows_get_the_hierarchical_mean_from_ovo_task_and_category(
    tmp_path: Path,
) -> None:
    def ovo(pid: str, task: str, category: str, **kw: Any) -> dict[str, Any]:
        return _row(pid, data_source="OVO-Bench", ovo_task=task, ovo_category=category, **kw)

    yes = dict(problem_type="CRR", options=[], solution="<answer>Yes</answer>")
    count = dict(problem_type="REC", options=[], solution="<answer>2</answer>")
    rows = [
        ovo("ovo_1", "EPM", "backward"),
        ovo("ovo_2", "STU", "realtime"),
        ovo("ovo_3", "STU", "realtime"),
        ovo("ovo_4_0", "CRR", "forward", **yes),
        ovo("ovo_5_0", "REC", "forward", **count),
    ]
    (bench,) = data_benches(_write(tmp_path, rows, "ovobench.json"))
    assert bench.official and bench.benchmark == "OVO-Bench"
    tasks = [s.task_type for s in bench.samples]
    assert tasks == [
        "multiple_choice",
        "multiple_choice",
        "multiple_choice",
        "boolean",
        "numerical",
    ]
    ids = [s.id for s in bench.samples]
    res = _score(bench, dict(zip(ids, [1.0, 1.0, 0.0, 0.0, 1.0], strict=True)))
    # backward EPM 100; realtime STU 50; forward (CRR 0, REC 100) 50 -> (100+50+50)/3
    assert res.breakdowns["category"] == {"backward": 100.0, "forward": 50.0, "realtime": 50.0}
    assert res.overall == pytest.approx(200 / 3)
    assert res.metrics["pooled"] == 60.0


def _vmqa(pid: str, answer: str, **kw: Any) -> dict[str, Any]:
    return _row(
        pid,
        data_source="VideoMathQA",
        solution=f"<answer>{answer}</answer>",
        category="Counting",
        length="short",
        **kw,
    )


def test_videomathqa_binary_rows_are_grouped_with_their_question_not_reported(
    tmp_path: Path,
) -> None:
    two = {"options": ["A. 3", "B. 4"]}
    rows = [
        _vmqa("q-1", "A"),
        _vmqa("q-2", "B"),
        _vmqa("q-1", "A", mbinary_id=11, **two),
        _vmqa("q-1", "B", mbinary_id=12, **two),
        _vmqa("q-2", "A", mbinary_id=21, **two),
        _vmqa("q-2", "A", mbinary_id=22, **two),
    ]
    data = load_data(_write(tmp_path, rows, "videomathqa.jsonl"))
    assert data.loaded.problems == []  # parts of one question: not duplicates
    mcq, mbin = _by_name(data.benches).values()
    assert mcq.name == "VideoMathQA (videomathqa.jsonl)"
    assert mbin.name == "VideoMathQA:mbin (videomathqa.jsonl)"
    assert [s.id for s in mcq.samples] == ["VideoMathQA/q-1", "VideoMathQA/q-2"]
    assert [s.id for s in mbin.samples] == [
        "VideoMathQA/q-1/mbin11",
        "VideoMathQA/q-1/mbin12",
        "VideoMathQA/q-2/mbin21",
        "VideoMathQA/q-2/mbin22",
    ]
    assert [s.fields["question_id"] for s in mbin.samples] == ["q-1", "q-1", "q-2", "q-2"]
    assert mbin.spec.aggregation.name == "mbin" and mcq.spec.aggregation.name == "mean"
    ids = [s.id for s in mbin.samples]
    res = _score(mbin, dict(zip(ids, [1.0, 1.0, 1.0, 0.0], strict=True)))
    # q-1: both pairs right -> 1; q-2: one pair wrong -> 0
    assert (res.overall, res.metrics["pair_accuracy"], res.metrics["n_questions"]) == (
        50.0,
        75.0,
        2.0,
    )


def test_other_repeated_ids_load_suffixed_with_a_warning(tmp_path: Path) -> None:
    rows = [
        _row("zEC_e2_q1", data_source="LiveSports-3K-QA", problem="Who spins?"),
        _row("zEC_e2_q1", data_source="LiveSports-3K-QA", problem="What next?"),
    ]
    data = load_data(_write(tmp_path, rows, "livesports3k_qa.json"))
    (bench,) = data.benches
    assert [s.id for s in bench.samples] == [
        "LiveSports-3K-QA/zEC_e2_q1",
        "LiveSports-3K-QA/zEC_e2_q1#2",
    ]
    (warn,) = data.loaded.problems
    assert (warn.level, warn.row) == ("warning", "item 1") and not data.loaded.invalid


def test_judged_open_ended_rows_are_not_scored_without_a_judge_never_rouged(
    tmp_path: Path,
) -> None:
    from evalkit.scoring import score

    open_row = dict(problem_type="open-ended", options=[], solution="<answer>stator</answer>")
    mmvu = [
        _row(1, data_source="https://youtu.be/x", path="./videos/Chemistry/3.mp4", **open_row),
        _row(2, data_source="https://youtu.be/y", path="./videos/Music/11.mp4"),
    ]
    vrb = [_row(3, data_source="VideoReasonBench", **open_row)]
    vcr = [_row(4, data_source="VCR-Bench", **open_row)]
    for name, rows, bench_name in [
        ("mmvu-all.json", mmvu, "MMVU"),
        ("videoreasonbench.json", vrb, "VideoReasonBench"),
        ("vcrbench.json", vcr, "VCR-Bench"),
    ]:
        (bench,) = data_benches(_write(tmp_path, rows, name))
        assert bench.benchmark == bench_name and bench.spec.judge is not None
        judged = [s for s in bench.samples if s.fields.get("problem_type") == "open-ended"]
        assert [s.task_type for s in judged] == ["llm_judge"]
        verdict = score(judged[0], "<answer>stator</answer>")  # the exact reference
        assert verdict.value is None and "no judge" in verdict.explanation
    (mm,) = data_benches(_write(tmp_path, mmvu, "mmvu-all.json"))
    assert mm.samples[1].fields["subject"] == "Music"  # from ./videos/<Subject>/<n>.mp4


def test_rows_lacking_the_official_groups_get_a_labelled_pooled_mean(tmp_path: Path) -> None:
    rows = [_row(i, data_source="MLVU", path=f"./video/needle_{i}.mp4") for i in (1, 2, 3)]
    (bench,) = data_benches(_write(tmp_path, rows, "mlvu-dev.json"))
    assert bench.benchmark == "MLVU" and not bench.official
    assert "needs field 'task' (3 of 3 rows lack it)" in bench.note
    assert "NOT the official number" in bench.note
    ids = [s.id for s in bench.samples]
    assert _score(bench, dict(zip(ids, [1.0, 1.0, 0.0], strict=True))).overall == pytest.approx(
        200 / 3
    )
    # the same rows with their task (MLVU test's question_type) get M-Avg
    tasks = ["needle", "needle", "count"]
    typed = [{**r, "question_type": t} for r, t in zip(rows, tasks, strict=True)]
    (bench,) = data_benches(_write(tmp_path, typed, "mlvu-test.json"))
    assert bench.official and bench.benchmark == "MLVU:test"
    ids = [s.id for s in bench.samples]
    res = _score(bench, dict(zip(ids, [1.0, 0.0, 1.0], strict=True)))
    assert res.overall == 75.0  # (needle 50 + count 100) / 2; pooled would be 66.7


def test_a_file_of_several_sources_is_split_into_one_benchmark_each(tmp_path: Path) -> None:
    rows = [
        _row(1, original_question_type="route_planning"),
        _row(2, data_source="OVO-Bench", ovo_task="EPM", ovo_category="backward"),
        _row(3, data_source="MyOwnSet"),
        _row(4, data_source=None),
    ]
    benches = _by_name(data_benches(_write(tmp_path, rows, "mixed.json")))
    assert set(benches) == {"VSI-Bench (mixed.json)", "OVO-Bench (mixed.json)", "mixed"}
    pooled = benches["mixed"]
    assert (pooled.benchmark, pooled.official, pooled.spec.aggregation.name) == (
        None,
        False,
        "mean",
    )
    assert [s.id for s in pooled.samples] == ["MyOwnSet/3", "mixed/4"]


def test_benchmarks_are_matched_by_data_source_then_file_name() -> None:
    assert match_benchmark("VSIBench") == ("VSI-Bench", None)
    assert match_benchmark("LiveSports-3K-QA") == ("LiveSports-3K-QA", None)
    assert match_benchmark("mlvu-dev") == ("MLVU", None)
    assert match_benchmark("mlvu-test") == ("MLVU", "test")
    assert match_benchmark("mmvu-mc") == ("MMVU", "mc")
    assert match_benchmark("mmvu-all") == ("MMVU", None)
    assert match_benchmark("videommmu_with_image") == ("Video-MMMU", None)
    assert match_benchmark("Minderva") is None  # EasyVideoR1's typo: its file name matches
    assert match_benchmark("https://www.youtube.com/watch?v=x") is None
    assert match_benchmark("videommlu") is None


def test_a_file_with_no_loadable_row_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path, [_row(1, options=["A. x", "x"])], "vsibench.json")
    with pytest.raises(DataError, match=r"not one row could be loaded"):
        data_benches(path)


def _sample_ids(benches: list[DataBench]) -> list[str]:
    return [s.id for b in benches for s in b.samples]


def test_loading_twice_gives_the_same_benchmarks_and_ids(tmp_path: Path) -> None:
    path = _write(tmp_path, [*_vsi_rows(), _row(1, problem="again?")], "vsibench.json")
    assert _sample_ids(data_benches(path)) == _sample_ids(data_benches(path))
    assert _sample_ids(data_benches(path))[-1] == "VSIBench/1#2"


def test_samples_keep_their_row_fields(tmp_path: Path) -> None:
    (bench,) = data_benches(_write(tmp_path, _vsi_rows()[:1], "vsibench.json"))
    s: Sample = bench.samples[0]
    assert s.fields["original_question_type"] == "object_rel_direction_easy"
    assert s.fields["question_type"] == "object_rel_direction_easy"
    assert s.fields["source_dataset"] == "scannet"


# --- the real files -----------------------------------------------------------------------

# EasyVideoR1 files whose rows name no shipped benchmark (pooled mean, labelled).
UNKNOWN = {"videommlu"}


@pytest.mark.realdata
@pytest.mark.skipif(not REAL_FILES, reason=f"real data folder absent: {REAL}")
@pytest.mark.parametrize("path", REAL_FILES, ids=[p.name for p in REAL_FILES])
def test_every_real_file_loads_as_data_without_a_whole_file_refusal(path: Path) -> None:
    data = load_data(path, video_root="/videos")
    loaded = data.loaded
    print(f"{path.name}: {loaded.rows} rows, {len(loaded)} valid, {len(loaded.invalid)} invalid")
    assert loaded.rows == len(loaded) + len(loaded.invalid) and loaded
    assert sum(len(b.samples) for b in data.benches) == len(loaded)
    known = [b for b in data.benches if b.benchmark is not None]
    assert bool(known) == (path.stem not in UNKNOWN)
    for b in data.benches:
        assert b.note and len({s.id for s in b.samples}) == len(b.samples)
