"""Loading an official-layout copy: precise errors, and validate lists every problem."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.bench.loader import load, validate
from evalkit.bench.registry import get_benchmark, load_spec
from evalkit.bench.spec import BenchmarkSpec
from evalkit.errors import DataError
from tests.fixtures.bench import official


def _lvbench_rows(root: Path) -> list[dict]:
    return [json.loads(x) for x in (root / "video_info.meta.jsonl").read_text().splitlines()]


def _write_rows(root: Path, rows: list[dict]) -> None:
    (root / "video_info.meta.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))


def test_a_missing_video_names_the_file_row_and_field(tmp_path: Path) -> None:
    root = official.lvbench(tmp_path)
    (root / "videos" / "vidL2.mp4").unlink()
    with pytest.raises(DataError) as err:
        load(get_benchmark("LVBench"), root)
    msg = str(err.value)
    assert "video_info.meta.jsonl, line 2.qa[0], field 'key': video not found" in msg
    assert "videos/vidL2.mp4" in msg and "expected layout" in msg


def test_a_missing_field_names_the_file_row_and_field(tmp_path: Path) -> None:
    root = official.lvbench(tmp_path)
    rows = _lvbench_rows(root)
    del rows[0]["qa"][1]["answer"]
    _write_rows(root, rows)
    with pytest.raises(
        DataError, match=r"video_info.meta.jsonl, line 1.qa\[1\], field 'answer': missing"
    ):
        load(get_benchmark("LVBench"), root)


def test_a_malformed_row_names_the_file_and_line(tmp_path: Path) -> None:
    root = official.lvbench(tmp_path)
    with (root / "video_info.meta.jsonl").open("a") as f:
        f.write('{"key": "vidL3", "qa": [\n')
    with pytest.raises(DataError, match=r"video_info.meta.jsonl, line 3: not valid JSON"):
        load(get_benchmark("LVBench"), root)


def test_an_answer_outside_the_options_is_a_precise_error(tmp_path: Path) -> None:
    root = official.videomathqa(tmp_path)
    import pandas as pd

    path = root / "mcq" / "test-00000-of-00001.parquet"
    frame = pd.read_parquet(path)
    frame.loc[1, "answer"] = "G"
    frame.to_parquet(path)
    with pytest.raises(DataError, match=r"mcq/test-00000-of-00001.parquet, row 1, field 'answer'"):
        load(get_benchmark("VideoMathQA"), root)


def test_validate_lists_every_problem_instead_of_stopping(tmp_path: Path) -> None:
    root = official.lvbench(tmp_path)
    (root / "videos" / "vidL2.mp4").unlink()
    rows = _lvbench_rows(root)
    del rows[0]["qa"][1]["answer"]
    rows[0]["qa"][0]["question"] = "Who? (no options here)"
    _write_rows(root, rows)
    with (root / "video_info.meta.jsonl").open("a") as f:
        f.write("not json\n")
    report = validate(get_benchmark("LVBench"), root)
    got = sorted((p.row, p.field) for p in report.problems)
    assert got == [
        ("line 1.qa[0]", "question"),
        ("line 1.qa[1]", "answer"),
        ("line 2.qa[0]", "key"),
        ("line 2.qa[1]", "key"),
        ("line 3", None),
    ]
    assert not report.ok and report.samples == []


def test_validate_reports_missing_annotation_files_with_the_expected_path(tmp_path: Path) -> None:
    root = official.mlvu_dev(tmp_path)
    (root / "MLVU" / "json" / "3_ego.json").unlink()
    report = validate(get_benchmark("MLVU"), root)
    assert [str(p) for p in report.problems] == [
        f"MLVU/json/3_ego.json: annotation file not found under {root}"
    ]
    assert len(report.samples) == 10


def test_validate_decode_flags_an_undecodable_video(tmp_path: Path) -> None:
    root = official.lvbench(tmp_path)
    (root / "videos" / "vidL1.mp4").write_bytes(b"not a video at all")
    report = validate(get_benchmark("LVBench"), root, decode=True)
    assert len(report.problems) == 1
    assert report.problems[0].file.endswith("videos/vidL1.mp4")
    assert "cannot decode" in report.problems[0].message
    assert validate(get_benchmark("LVBench"), root).ok  # without --decode it only must exist


def test_duplicate_ids_are_an_error_naming_both_rows(tmp_path: Path) -> None:
    root = official.lvbench(tmp_path)
    rows = _lvbench_rows(root)
    rows[1]["qa"][0]["uid"] = "101"
    _write_rows(root, rows)
    with pytest.raises(
        DataError, match=r"line 2.qa\[0\].*duplicate id '101', first at .*line 1.qa\[0\]"
    ):
        load(get_benchmark("LVBench"), root)


def test_ids_do_not_depend_on_row_order(tmp_path: Path) -> None:
    root = official.mvbench(tmp_path)
    spec = get_benchmark("MVBench")
    before = {s.question: s.id for s in load(spec, root)}
    path = root / "json" / "object_existence.json"
    path.write_text(json.dumps(list(reversed(json.loads(path.read_text())))))
    after = {s.question: s.id for s in load(spec, root)}
    assert before == after


def test_a_segment_ending_before_it_starts_is_a_precise_error(tmp_path: Path) -> None:
    root = official.mvbench(tmp_path)
    path = root / "json" / "action_sequence.json"
    items = json.loads(path.read_text())
    items[1]["end"] = 1.0
    path.write_text(json.dumps(items))
    report = validate(get_benchmark("MVBench"), root)
    assert [(p.file, p.row, p.field) for p in report.problems] == [
        ("json/action_sequence.json", "item 1", "end")
    ]


def _spec(tmp_path: Path, files: str) -> BenchmarkSpec:
    text = f"""
name: Tiny
citation: none
data: {{local_path: .}}
layout: "see the test"
files: {files}
mapping:
  id: {{template: "{{qid}}"}}
  question: q
  option_fields: [a0, a1]
  target: ans
  target_kind: index
aggregation: {{name: mean, source: test}}
"""
    (tmp_path / "tiny.yaml").write_text(text)
    return load_spec(tmp_path / "tiny.yaml")


def test_csv_rows_with_one_column_per_option(tmp_path: Path) -> None:
    (tmp_path / "qa.csv").write_text("qid,q,a0,a1,ans\nx1,Why?,yes,no,1\n")
    (s,) = load(_spec(tmp_path, "[{path: qa.csv}]"), tmp_path)
    assert (s.id, s.options, s.target) == ("x1", ["yes", "no"], "B")


def test_json_rows_under_a_nested_key(tmp_path: Path) -> None:
    data = {"data": {"items": [{"qid": "x1", "q": "Why?", "a0": "yes", "a1": "no", "ans": 0}]}}
    (tmp_path / "qa.json").write_text(json.dumps(data))
    (s,) = load(_spec(tmp_path, "[{path: qa.json, records: data.items}]"), tmp_path)
    assert s.target == "A"
    report = validate(_spec(tmp_path, "[{path: qa.json, records: data.rows}]"), tmp_path)
    assert [(p.file, p.field) for p in report.problems] == [("qa.json", "data.rows")]
