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


def test_a_missing_video_fails_that_row_only_naming_file_row_and_field(tmp_path: Path) -> None:
    root = official.lvbench(tmp_path)
    (root / "videos" / "vidL2.mp4").unlink()
    loaded = load(get_benchmark("LVBench"), root)
    assert all("vidL2" not in s.media[0].path for s in loaded) and len(loaded) == 2
    first, second = loaded.invalid
    assert str(first).startswith(
        "video_info.meta.jsonl, line 2.qa[0], field 'key': video not found (tried videos/vidL2.mp4"
    )
    assert second.row == "line 2.qa[1]" and loaded.rows == 4


def test_a_missing_field_fails_that_row_only(tmp_path: Path) -> None:
    root = official.lvbench(tmp_path)
    rows = _lvbench_rows(root)
    del rows[0]["qa"][1]["answer"]
    _write_rows(root, rows)
    loaded = load(get_benchmark("LVBench"), root)
    assert len(loaded) == 3
    assert [str(p) for p in loaded.problems] == [
        "video_info.meta.jsonl, line 1.qa[1], field 'answer': missing"
    ]


def test_a_malformed_line_fails_alone(tmp_path: Path) -> None:
    root = official.lvbench(tmp_path)
    with (root / "video_info.meta.jsonl").open("a") as f:
        f.write('{"key": "vidL3", "qa": [\n')
    loaded = load(get_benchmark("LVBench"), root)
    assert len(loaded) == 4
    (bad,) = loaded.problems
    assert (bad.file, bad.row) == ("video_info.meta.jsonl", "line 3")
    assert bad.message.startswith("not valid JSON")


def test_an_answer_outside_the_options_fails_that_row_only(tmp_path: Path) -> None:
    root = official.videomathqa(tmp_path)
    import pandas as pd

    path = root / "mcq" / "test-00000-of-00001.parquet"
    frame = pd.read_parquet(path)
    frame.loc[1, "answer"] = "G"
    frame.to_parquet(path)
    loaded = load(get_benchmark("VideoMathQA"), root)
    assert len(loaded) == len(frame) - 1
    (bad,) = loaded.invalid
    assert (bad.file, bad.row, bad.field) == ("mcq/test-00000-of-00001.parquet", "row 1", "answer")


def test_nothing_loadable_is_an_error_naming_the_rows(tmp_path: Path) -> None:
    root = official.lvbench(tmp_path)
    for video in (root / "videos").iterdir():
        video.unlink()
    with pytest.raises(DataError, match=r"(?s)LVBench: not one row loaded under .*field .key."):
        load(get_benchmark("LVBench"), root)


def test_a_missing_annotation_file_refuses_the_load(tmp_path: Path) -> None:
    root = official.mlvu_dev(tmp_path)
    (root / "MLVU" / "json" / "3_ego.json").unlink()
    with pytest.raises(DataError, match=r"(?s)files are missing or unreadable.*3_ego.json"):
        load(get_benchmark("MLVU"), root)


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


def test_a_repeated_id_loads_suffixed_with_a_warning_naming_both_rows(tmp_path: Path) -> None:
    root = official.lvbench(tmp_path)
    rows = _lvbench_rows(root)
    rows[1]["qa"][0]["uid"] = "101"
    _write_rows(root, rows)
    loaded = load(get_benchmark("LVBench"), root)
    assert [s.id for s in loaded].count("101#2") == 1 and len(loaded) == 4
    (warn,) = loaded.problems
    assert warn.level == "warning" and not loaded.invalid
    assert str(warn) == (
        "video_info.meta.jsonl, line 2.qa[0]: warning: duplicate id '101' (first at "
        "video_info.meta.jsonl, line 1.qa[0]): loaded as '101#2'"
    )


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


def _ask_twice(root: Path, answer: str) -> None:
    """MLVU dev asks the same question (same candidates) twice about one video."""
    path = root / "MLVU" / "json" / "1_plotQA.json"
    items = json.loads(path.read_text())
    items.append({**items[0], "answer": answer})
    path.write_text(json.dumps(items))


def test_a_question_asked_twice_about_one_video_gets_distinct_stable_ids(tmp_path: Path) -> None:
    root = official.mlvu_dev(tmp_path)
    _ask_twice(root, "plotQA c0")
    spec = get_benchmark("MLVU")
    loaded = load(spec, root)
    plot = [s for s in loaded if s.fields["task"] == "plotQA" and s.question == "plotQA q0?"]
    first, again = plot
    assert again.id == f"{first.id}#2"  # the repeat, by file order
    assert (first.target, again.target) == ("B", "C")
    assert len({s.id for s in loaded}) == len(loaded)
    (warn,) = loaded.warnings
    assert (warn.file, warn.row) == ("MLVU/json/1_plotQA.json", "item 2")  # appended 3rd
    assert [s.id for s in load(spec, root)] == [s.id for s in loaded]  # same on every load


def test_an_id_spec_may_reject_repeats_as_invalid_rows(tmp_path: Path) -> None:
    root = official.mlvu_dev(tmp_path)
    _ask_twice(root, "plotQA c0")
    base = get_benchmark("MLVU")
    strict = base.model_copy(
        update={
            "mapping": base.mapping.model_copy(
                update={"id": base.mapping.id.model_copy(update={"duplicates": "error"})}
            )
        }
    )
    loaded = load(strict, root)
    assert not any(s.id.endswith("#2") for s in loaded)
    (bad,) = loaded.invalid
    assert "duplicate id" in bad.message and bad.file == "MLVU/json/1_plotQA.json"
