"""The report's numbers are the official aggregation of the stored records."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

from evalkit.bench.aggregations import aggregate
from evalkit.bench.registry import get_benchmark
from evalkit.errors import DataError
from evalkit.reports import load_run
from evalkit.reports.load import ADHOC_AGGREGATION, read_records, scored_from_records
from evalkit.testing.runs import Rec, write_run


def _vmme(id_: str, duration: str, domain: str, task: str, value: float | None = 1.0,
          failed: bool = False) -> Rec:  # fmt: skip
    return Rec(
        id_,
        value,
        {"duration": duration, "domain": domain, "task": task, "video_id": f"v{id_}"},
        failed_stage="engine" if failed else None,
    )


VMME = [
    _vmme("1", "short", "Knowledge", "Counting", 1.0),
    _vmme("2", "short", "Knowledge", "OCR", 0.0),
    _vmme("3", "medium", "Sports", "Counting", 1.0),
    _vmme("4", "medium", "Sports", "OCR", 1.0),
    _vmme("5", "long", "Knowledge", "Counting", failed=True),
    _vmme("6", "long", "Sports", "OCR", 1.0),
    _vmme("7", "long", "Sports", "Counting", None),  # not scored (e.g. no judge)
    _vmme("8", "short", "Sports", "OCR", 0.0),
]


@pytest.fixture
def vmme_run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "run-a", "/ckpt/Qwen2.5-VL-7B-Instruct", {"Video-MME": VMME})


def test_overall_and_breakdowns_equal_hand_computed_official_values(vmme_run: Path) -> None:
    b = load_run(vmme_run).benchmarks["Video-MME"]
    # failed #5 counts as 0, unscored #7 is left out: 1,0,1,1,0,1,0 -> 4/7
    assert b.overall == pytest.approx(400 / 7)
    assert b.result.breakdowns["duration"] == pytest.approx(
        {"short": 100 / 3, "medium": 100.0, "long": 50.0}
    )
    assert b.result.breakdowns["domain"] == pytest.approx({"Knowledge": 100 / 3, "Sports": 75.0})
    assert b.result.breakdowns["task"] == pytest.approx({"Counting": 200 / 3, "OCR": 50.0})
    assert b.group_sizes["duration"] == {"long": 2, "medium": 2, "short": 3}
    assert b.official and b.aggregation == "mean"


def test_report_equals_official_aggregate_of_the_stored_records(vmme_run: Path) -> None:
    b = load_run(vmme_run).benchmarks["Video-MME"]
    scored, _ = scored_from_records(read_records(vmme_run / "Video-MME.jsonl"))
    official = aggregate(get_benchmark("Video-MME"), scored)
    assert b.result.to_dict() == official.to_dict()


def test_failed_and_unscored_samples_are_counted_as_such(vmme_run: Path) -> None:
    b = load_run(vmme_run).benchmarks["Video-MME"]
    c = b.counts
    assert (c.total, c.scored, c.failed, c.unscored) == (8, 6, 1, 1)
    assert c.failed_by_stage == {"engine": 1}
    assert b.result.n_unscored == 1
    assert any("1 failed sample(s) count as wrong (0)" in n for n in b.notes)
    assert any("1 sample(s) could not be scored" in n for n in b.notes)


def test_failed_samples_can_be_left_out_of_the_aggregate(vmme_run: Path) -> None:
    b = load_run(vmme_run, failed="exclude").benchmarks["Video-MME"]
    assert b.overall == pytest.approx(400 / 6)
    assert b.counts.failed == 1
    assert any("left out" in n for n in b.notes)


def test_standard_error_of_a_mean_is_the_sample_standard_error(vmme_run: Path) -> None:
    b = load_run(vmme_run).benchmarks["Video-MME"]
    # values 1,0,1,1,0,1,0: sample variance 2/7, se = sqrt(2/7)/sqrt(7)
    assert b.stderr == pytest.approx(100 * math.sqrt(2 / 7) / math.sqrt(7))
    assert b.stderr_method == "analytic (mean)"


def test_all_unscored_benchmark_has_no_number_rather_than_zero(tmp_path: Path) -> None:
    recs = [_vmme(str(i), "short", "K", "T", None) for i in range(3)]
    b = load_run(write_run(tmp_path / "r", "m", {"Video-MME": recs})).benchmarks["Video-MME"]
    assert b.overall is None and b.counts.unscored == 3 and b.stderr is None


def test_macro_mean_benchmark_uses_its_official_rule_and_a_bootstrap_error(
    tmp_path: Path,
) -> None:
    recs = [Rec(f"a{i}", 1.0, {"task": "A"}) for i in range(2)]
    recs += [Rec(f"b{i}", float(i == 0), {"task": "B"}) for i in range(4)]
    # MLVU's M-Avg is the mean of its task accuracies (MVBench's Avg is pooled)
    b = load_run(write_run(tmp_path / "r", "m", {"MLVU": recs}), bootstrap=200).benchmarks["MLVU"]
    assert b.overall == pytest.approx((100 + 25) / 2)  # mean of task accuracies
    assert b.result.metrics["pooled"] == pytest.approx(50.0)
    assert b.stderr is not None and b.stderr > 0
    assert b.stderr_method.startswith("bootstrap (200")


def test_grouped_aggregate_resamples_whole_groups(tmp_path: Path) -> None:
    # VideoMathQA multi-binary: a question is right only when all its pairs are right.
    recs = [
        Rec("q1a", 1.0, {"question_id": "q1", "category": "c"}),
        Rec("q1b", 1.0, {"question_id": "q1", "category": "c"}),
        Rec("q2a", 1.0, {"question_id": "q2", "category": "c"}),
        Rec("q2b", 0.0, {"question_id": "q2", "category": "c"}),
        Rec("q3a", 1.0, {"question_id": "q3", "category": "c"}),
        Rec("q3b", 1.0, {"question_id": "q3", "category": "c"}),
    ]
    path = write_run(tmp_path / "r", "m", {"VideoMathQA": recs}, variant="mbin")
    b = load_run(path, bootstrap=300).benchmarks["VideoMathQA:mbin"]
    assert b.variant == "mbin"
    assert b.overall == pytest.approx(200 / 3)
    assert "clusters by question_id" in b.stderr_method
    # resampled groups stay whole: a 3-group bootstrap of {1, 0, 1} has se near
    # sqrt(2/9)/sqrt(3) * 100 = 27.2 (never the 0 a broken grouping would give)
    assert 15 < (b.stderr or 0) < 40


def test_variant_is_recognised_from_the_recorded_spec_hash(tmp_path: Path) -> None:
    path = write_run(tmp_path / "r", "m", {"Video-MME": VMME}, variant="with_subtitles")
    b = load_run(path).benchmarks["Video-MME:with_subtitles"]  # its one name in a run
    assert b.variant == "with_subtitles"
    assert not any("spec changed" in n for n in b.notes)


def test_a_variant_run_written_before_it_was_named_name_variant_still_loads(
    tmp_path: Path,
) -> None:
    import json

    path = write_run(tmp_path / "r", "m", {"Video-MME": VMME}, variant="with_subtitles")
    # as evalkit run wrote it before: keyed and stored under the benchmark's bare name
    (path / "Video-MME:with_subtitles.jsonl").rename(path / "Video-MME.jsonl")
    config = (path / "config.json").read_text().replace("Video-MME:with_subtitles", "Video-MME")
    (path / "config.json").write_text(config)
    assert json.loads(config)["result_config"]["benchmarks"]["Video-MME"]
    b = load_run(path).benchmarks["Video-MME"]
    assert b.variant == "with_subtitles" and b.overall == pytest.approx(400 / 7)


def test_adhoc_data_gets_a_labelled_pooled_mean_by_task_type(tmp_path: Path) -> None:
    recs = [
        Rec("1", 1.0, task_type="multiple_choice"),
        Rec("2", 0.0, task_type="multiple_choice"),
        Rec("3", 1.0, task_type="numerical"),
    ]
    b = load_run(write_run(tmp_path / "r", "m", {"my_data": recs})).benchmarks["my_data"]
    assert not b.official and b.aggregation == ADHOC_AGGREGATION
    assert b.overall == pytest.approx(200 / 3)
    assert b.result.breakdowns["task_type"] == pytest.approx(
        {"multiple_choice": 50.0, "numerical": 100.0}
    )


def test_a_directory_without_config_is_refused_by_name(tmp_path: Path) -> None:
    with pytest.raises(DataError, match="not a run directory"):
        load_run(tmp_path)


def test_a_torn_last_line_is_skipped_without_touching_the_file(vmme_run: Path) -> None:
    path = vmme_run / "Video-MME.jsonl"
    path.write_bytes(path.read_bytes() + b'{"id": "9", "sta')
    before = path.read_bytes()
    assert load_run(vmme_run).benchmarks["Video-MME"].counts.total == 8
    assert path.read_bytes() == before  # a running evaluation may still be writing it


def test_without_a_recorded_spec_a_changed_one_is_noted_and_the_variant_read_from_the_bench_list(
    tmp_path: Path,
) -> None:
    import json

    path = write_run(tmp_path / "r", "m", {"Video-MME": VMME}, variant="with_subtitles")
    cfg = json.loads((path / "config.json").read_text())
    del cfg["specs"], cfg["schema_version"]  # as written before runs recorded their specs
    cfg["result_config"]["benchmarks"]["Video-MME:with_subtitles"]["spec_hash"] = "0123456789abcdef"
    (path / "config.json").write_text(json.dumps(cfg))
    b = load_run(path).benchmarks["Video-MME:with_subtitles"]
    assert b.variant == "with_subtitles" and b.live_spec
    assert any("spec changed since the run" in n for n in b.notes)
    assert b.overall == pytest.approx(400 / 7)


def test_a_recorded_spec_that_does_not_match_its_hash_is_not_trusted(tmp_path: Path) -> None:
    import json

    path = write_run(tmp_path / "r", "m", {"Video-MME": VMME}, variant="with_subtitles")
    cfg = json.loads((path / "config.json").read_text())
    cfg["specs"]["Video-MME:with_subtitles"]["description"] = "edited by hand after the run"
    (path / "config.json").write_text(json.dumps(cfg))
    b = load_run(path).benchmarks["Video-MME:with_subtitles"]
    assert b.live_spec and b.variant == "with_subtitles"  # matched by the recorded hash
    assert any("does not match its spec_hash" in n for n in b.notes)


def test_records_missing_a_field_the_rule_needs_name_the_file(tmp_path: Path) -> None:
    # Video-MME-v2 groups questions by their "group" field; these records lack it.
    path = write_run(tmp_path / "r", "m", {"Video-MME-v2": [Rec("1", 1.0, {})]})
    with pytest.raises(DataError, match=r"Video-MME-v2\.jsonl: the records cannot be aggregated"):
        load_run(path)


def test_the_headline_is_marked_when_a_plugin_made_its_rule_or_its_task_type() -> None:
    from evalkit.manifest import PluginRecord, ResultConfig, RunManifest
    from evalkit.reports.load import headline_plugin
    from evalkit.reports.sensitivity import Sensitivity

    task = PluginRecord(
        distribution="count-plugin",
        version="1.0",
        group="evalkit.tasks",
        name="count",
        value="count_plugin.tasks",
        registered={"task type": ["counting"], "extraction rule": ["exact for counting"]},
    )
    rc = ResultConfig(model="m", model_hash="h", engine="vllm")
    manifest = RunManifest(fingerprint=rc.fingerprint(), result_config=rc, plugins=[task])
    said = "comes from plug-in 'count' = 'count_plugin.tasks' of count-plugin 1.0"
    for rule in ("evalkit", "exact"):  # its own scorer, or its rule, as the headline
        got = headline_plugin(manifest, Sensitivity({"counting": rule}, [], []))
        assert got == f"headline rule {rule} {said} (entry points 'evalkit.tasks')"
    assert headline_plugin(manifest, Sensitivity({"multiple_choice": "evalkit"}, [], [])) is None
