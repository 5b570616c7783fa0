"""The EasyVideoR1 unified JSON/JSONL loader: synthetic odd shapes, then the real files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.bench.unified import load_unified
from evalkit.errors import DataError
from tests._realdata import REAL, REAL_FILES


def _row(**kw: Any) -> dict[str, Any]:
    base = {
        "data_type": "video",
        "data_source": "Bench",
        "problem_type": "multiple choice",
        "path": "./videos/v.mp4",
        "problem": "Q?",
        "problem_id": 1,
        "options": ["A. x", "B. y"],
        "solution": "<answer>B</answer>",
    }
    return {**base, **kw}


def _write(tmp_path: Path, rows: list[dict[str, Any]], name: str = "f.json") -> Path:
    path = tmp_path / name
    if name.endswith(".jsonl"):
        path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    else:
        path.write_text(json.dumps(rows))
    return path


def test_a_plain_multiple_choice_row(tmp_path: Path) -> None:
    (s,) = load_unified(_write(tmp_path, [_row(extra=7)]), video_root=tmp_path / "vids")
    assert (s.id, s.task_type, s.options, s.target) == (
        "Bench/1",
        "multiple_choice",
        ["x", "y"],
        "B",
    )
    assert s.media[0].path == str(tmp_path / "vids" / "videos" / "v.mp4")
    assert s.fields == {
        "data_source": "Bench",
        "problem_id": 1,
        "problem_type": "multiple choice",
        "extra": 7,
    }


def test_an_ad_hoc_file_gets_a_spec_with_pooled_mean_and_breakdowns(tmp_path: Path) -> None:
    from evalkit.bench.aggregations import Scored, aggregate
    from evalkit.bench.unified import unified_spec

    path = _write(tmp_path, [_row(problem_id=1), _row(problem_id=2, data_source="Other")])
    spec = unified_spec(path, video_root=tmp_path)
    samples = load_unified(path, video_root=tmp_path)
    res = aggregate(spec, [Scored(samples[0], 1.0), Scored(samples[1], 0.0)])
    assert spec.name == "f" and res.overall == 50.0
    assert res.breakdowns["data_source"] == {"Bench": 100.0, "Other": 0.0}


def test_options_listed_out_of_letter_order_are_put_back_in_order(tmp_path: Path) -> None:
    row = _row(options=["C. c", "A. a", "B. ", "D. d"], solution="<answer>C</answer>")
    (s,) = load_unified(_write(tmp_path, [row]))
    assert s.options == ["a", "", "c", "d"] and s.target == "C"


def test_colon_prefixed_options_and_yes_no_and_counts(tmp_path: Path) -> None:
    rows = [
        _row(problem_id="a", options=["A: yes", "B: no"], solution="<answer>A</answer>"),
        _row(problem_id="b", problem_type="CRR", options=[], solution="<answer>Yes</answer>"),
        _row(problem_id="c", problem_type="REC", options=[], solution="<answer>3</answer>"),
        _row(
            problem_id="d", problem_type="regression", options=None, solution="<answer>2.1</answer>"
        ),
    ]
    a, b, c, d = load_unified(_write(tmp_path, rows))
    assert (a.options, a.target) == (["yes", "no"], "A")
    assert (b.task_type, b.target) == ("boolean", "Yes")
    assert (c.task_type, c.target) == ("numerical", 3)
    assert (d.task_type, d.target) == ("regression", 2.1)


def test_grounding_answers_wrapped_in_think_or_answer_tags(tmp_path: Path) -> None:
    rows = [
        _row(
            problem_id=1,
            problem_type="temporal grounding",
            options=[],
            solution='<think>{"time": [12.5, 17.0], "boxes": {}}</think><[PLHD21_x]>',
        ),
        _row(
            problem_id=2,
            problem_type="spatial-temporal grounding",
            options=[],
            solution='<answer>{"time": [1.0, 2.0], "boxes": {"1": [0, 0, 5, 5]}}</answer>',
        ),
    ]
    tg, stg = load_unified(_write(tmp_path, rows))
    assert (tg.task_type, tg.target) == ("temporal_grounding", [12.5, 17.0])
    assert stg.task_type == "spatiotemporal_grounding"
    assert stg.target == {"time": [1.0, 2.0], "boxes": {"1": [0, 0, 5, 5]}}


def test_segment_bounds_and_an_extra_image_become_media(tmp_path: Path) -> None:
    row = _row(start=6.5, end=17.0, image_path="./images/i.png")
    (s,) = load_unified(_write(tmp_path, [row]))
    assert [(m.kind, getattr(m, "start", None)) for m in s.media] == [
        ("video", 6.5),
        ("image", None),
    ]


def test_ids_fall_back_to_the_file_name_when_data_source_is_missing_or_a_url(
    tmp_path: Path,
) -> None:
    rows = [_row(problem_id=1, data_source=None), _row(problem_id=2, data_source="https://y.t/x")]
    a, b = load_unified(_write(tmp_path, rows, "mmvu.jsonl"))
    assert (a.id, b.id) == ("mmvu/1", "mmvu/2")


def test_a_repeated_id_loads_with_a_suffix_and_a_warning_naming_both_rows(tmp_path: Path) -> None:
    path = _write(tmp_path, [_row(), _row(problem="other"), _row(problem="third")])
    loaded = load_unified(path)
    assert [s.id for s in loaded] == ["Bench/1", "Bench/1#2", "Bench/1#3"]
    assert [s.question for s in loaded] == ["Q?", "other", "third"]
    assert not loaded.invalid
    first, second = loaded.warnings
    assert str(first) == (
        f"{path}, item 1, field 'problem_id': warning: duplicate id 'Bench/1' "
        "(first at item 0): loaded as 'Bench/1#2'"
    )
    assert second.row == "item 2" and "'Bench/1#3'" in second.message


def test_repeated_id_suffixes_follow_file_order_on_every_load(tmp_path: Path) -> None:
    path = _write(tmp_path, [_row(problem_id=i % 2, problem=f"q{i}") for i in range(5)])
    first = [(s.id, s.question) for s in load_unified(path)]
    assert first == [(s.id, s.question) for s in load_unified(path)]
    assert first == [
        ("Bench/0", "q0"),
        ("Bench/1", "q1"),
        ("Bench/0#2", "q2"),
        ("Bench/1#2", "q3"),
        ("Bench/0#3", "q4"),
    ]


def test_a_bad_row_fails_alone_and_is_named_with_file_row_field_and_reason(
    tmp_path: Path,
) -> None:
    cases = [
        (_row(solution="<answer>E</answer>"), "solution", "beyond the 2 options"),
        (_row(problem_type="interpretive dance"), "problem_type", "unknown task type"),
        (_row(options=["A. x", "A. y"]), "options", "repeat A"),
        (_row(options=["A. x", "C. y"]), "options", "missing B"),
        (_row(options=["A. x", "y"]), "options", "some options carry a letter prefix"),
        ({k: v for k, v in _row().items() if k != "problem_id"}, "problem_id", "missing"),
    ]
    rows = [_row(problem_id=0)] + [r for r, _, _ in cases] + [_row(problem_id=99)]
    loaded = load_unified(_write(tmp_path, rows))
    assert [s.id for s in loaded] == ["Bench/0", "Bench/99"]
    assert loaded.rows == len(rows) and not loaded.warnings
    got = [(p.file, p.row, p.field) for p in loaded.invalid]
    file = str(tmp_path / "f.json")
    assert got == [(file, f"item {i}", f) for i, (_, f, _) in enumerate(cases, 1)]
    for p, (_, _, reason) in zip(loaded.invalid, cases, strict=True):
        assert reason in p.message


def test_eleven_options_are_lettered_a_to_k(tmp_path: Path) -> None:
    opts = [f"{c}. {t}" for c, t in zip("ABCDEFGHIJK", range(11), strict=True)]
    (s,) = load_unified(_write(tmp_path, [_row(options=opts, solution="<answer>K</answer>")]))
    assert s.options == [str(i) for i in range(11)]
    assert s.letters[-1] == "K" and s.target == "K"


def test_a_broken_jsonl_line_fails_alone(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps(_row()) + "\n{oops\n" + json.dumps(_row(problem_id=2)) + "\n")
    loaded = load_unified(path)
    assert [s.id for s in loaded] == ["Bench/1", "Bench/2"]
    (bad,) = loaded.invalid
    assert (bad.row, bad.message.split(":")[0]) == ("line 2", "not valid JSON")


def test_a_file_that_is_not_a_row_list_is_refused_whole(tmp_path: Path) -> None:
    path = tmp_path / "f.json"
    path.write_text('{"rows": []}')
    with pytest.raises(DataError, match=r"f.json: expected a JSON list of rows, got dict"):
        load_unified(path)


# --- the real files -----------------------------------------------------------------------


LETTERED = ("A. ", "A: ", "(A) ")


def _raw_rows(path: Path) -> list[dict[str, Any]]:
    if path.suffix == ".jsonl":
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]
    rows: list[dict[str, Any]] = json.loads(path.read_text())
    return rows


@pytest.mark.realdata
@pytest.mark.skipif(not REAL_FILES, reason=f"real data folder absent: {REAL}")
@pytest.mark.parametrize("path", REAL_FILES, ids=[p.name for p in REAL_FILES])
def test_every_real_row_maps_to_a_sample(path: Path) -> None:
    rows = _raw_rows(path)
    loaded = load_unified(path, video_root="/videos")  # never a whole-file refusal
    print(f"{path.name}: {loaded.rows} rows, {len(loaded)} valid, {len(loaded.invalid)} invalid")
    assert loaded.rows == len(rows) == len(loaded) + len(loaded.invalid)
    assert len({s.id for s in loaded}) == len(loaded)
    bad = {p.row for p in loaded.invalid}
    kept = [r for i, r in enumerate(rows) if f"item {i}" not in bad and f"line {i + 1}" not in bad]
    for row, s in zip(kept, loaded, strict=True):
        ptype = row["problem_type"].lower()
        opts = row.get("options") or []
        if opts:
            # Same texts as the file, prefixes gone, in letter order.
            by_letter = {o.strip()[0]: o.strip()[3:].strip() for o in opts}
            assert s.options == [by_letter[k] for k in sorted(by_letter)]
            assert not any(o.startswith(LETTERED) for o in s.options)
        if ptype == "multiple choice":
            assert s.task_type == "multiple_choice"
            assert s.target == row["solution"].split("<answer>")[1][0]
            assert s.target in s.letters
        elif ptype == "temporal grounding":
            assert s.task_type == "temporal_grounding"
            start, end = s.target
            assert 0 <= start <= end
        elif ptype == "spatial-temporal grounding":
            assert s.task_type == "spatiotemporal_grounding"
            assert set(s.target) == {"time", "boxes"}
        elif ptype == "regression":
            assert s.task_type == "regression" and isinstance(s.target, int | float)
        elif ptype in ("crr", "ssr"):
            assert s.task_type == "boolean" and s.target in ("Yes", "No")
        elif ptype == "rec":
            assert s.task_type == "numerical" and isinstance(s.target, int)
        elif ptype in ("open-ended", "caption"):
            assert s.task_type == "open_ended" and isinstance(s.target, str) and s.target
            assert "<answer>" not in s.target
        else:
            pytest.fail(f"{path.name}: unexpected problem_type {ptype!r}")
        assert s.media and s.media[0].path.startswith("/videos/")
        if row.get("image_path"):
            assert s.media[-1].kind == "image"
        if row.get("start") is not None:
            assert s.media[0].start == row["start"]  # type: ignore[union-attr]


def test_more_options_than_letters_is_an_invalid_row_for_loader_and_validate(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalkit.cli.main import main
    from evalkit.sample import MAX_OPTIONS

    many = [f"opt {i}" for i in range(10_000)]
    path = _write(tmp_path, [_row(options=many), _row(problem_id=2)], "f.jsonl")
    loaded = load_unified(path, video_root=tmp_path)
    assert [s.id for s in loaded] == ["Bench/2"]
    (problem,) = loaded.problems
    assert problem.field == "options" and f"at most {MAX_OPTIONS}" in problem.message
    capsys.readouterr()
    assert main(["bench", "validate", "--data", str(path)]) == 1
    assert "10000 options: at most 26, one per letter A-Z" in capsys.readouterr().out
    assert len(load_unified(_write(tmp_path, [_row(options=many[:26], solution="Z")]))) == 1
