"""The EasyVideoR1 unified JSON/JSONL loader: synthetic odd shapes, then the real files."""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest

from evalkit.bench.unified import load_unified
from evalkit.errors import DataError


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
    from evalkit.bench.aggregate import Scored, aggregate
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
            solution='<think>{"time": [16.0, 19.0], "boxes": {}}</think><[PLHD21_x]>',
        ),
        _row(
            problem_id=2,
            problem_type="spatial-temporal grounding",
            options=[],
            solution='<answer>{"time": [1.0, 2.0], "boxes": {"1": [0, 0, 5, 5]}}</answer>',
        ),
    ]
    tg, stg = load_unified(_write(tmp_path, rows))
    assert (tg.task_type, tg.target) == ("temporal_grounding", [16.0, 19.0])
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


def test_duplicate_ids_name_both_rows(tmp_path: Path) -> None:
    path = _write(tmp_path, [_row(), _row(problem="other")])
    with pytest.raises(
        DataError, match=r"f.json, item 1: duplicate id 'Bench/1' .*first at item 0"
    ):
        load_unified(path)


def test_bad_rows_name_the_file_row_and_field(tmp_path: Path) -> None:
    cases = [
        (_row(solution="<answer>E</answer>"), "solution"),
        (_row(problem_type="interpretive dance"), "problem_type"),
        (_row(options=["A. x", "A. y"]), "options"),
        (_row(options=["A. x", "y"]), "options"),
        ({k: v for k, v in _row().items() if k != "problem_id"}, "problem_id"),
    ]
    for row, field in cases:
        path = _write(tmp_path, [_row(problem_id=0), row])
        with pytest.raises(DataError, match=rf"f.json, item 1, field '{field}'"):
            load_unified(path)


def test_a_broken_jsonl_line_is_named(tmp_path: Path) -> None:
    path = tmp_path / "f.jsonl"
    path.write_text(json.dumps(_row()) + "\n{oops\n")
    with pytest.raises(DataError, match=r"f.jsonl, line 2: not valid JSON"):
        load_unified(path)


# --- the real files -----------------------------------------------------------------------


def _realdata() -> Path:
    env = os.environ.get("EVALKIT_REALDATA")
    base = Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared" / "realdata"
    return base / "easyvideor1"


REAL = _realdata()
REAL_FILES = sorted(p for p in REAL.glob("*.json*")) if REAL.is_dir() else []
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
    samples = load_unified(path, video_root="/videos")
    assert len(samples) == len(rows) == len({s.id for s in samples})
    for row, s in zip(rows, samples, strict=True):
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
