"""Subtitle files of Video-MME (SRT), LongVideoBench (JSON) and Video-MME-v2 (JSONL)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.bench.subtitles import Line, lines_between, load_subtitles
from evalkit.errors import DataError


def test_srt_blocks_become_timed_lines(tmp_path: Path) -> None:
    path = tmp_path / "v.srt"
    path.write_text(
        "1\r\n00:00:01,500 --> 00:00:03,000\r\nhello\r\nthere\r\n\r\n"
        "2\r\n00:01:00,000 --> 00:01:02,250\r\nbye\r\n"
    )
    assert load_subtitles(path) == [Line(1.5, 3.0, "hello there"), Line(60.0, 62.25, "bye")]


def test_longvideobench_json_in_both_forms(tmp_path: Path) -> None:
    path = tmp_path / "v_en.json"
    path.write_text(
        json.dumps(
            [
                {"start": 2.0, "end": 3.0, "line": "b"},
                {"timestamp": [0.0, 1.0], "text": "a"},
            ]
        )
    )
    assert [x.text for x in load_subtitles(path)] == ["a", "b"]


def test_word_level_jsonl_gives_one_line_per_word(tmp_path: Path) -> None:
    words = [("Hi", 0.1, 0.3), ("you", 0.4, 0.6), ("later", 2.5, 2.9)]
    path = tmp_path / "001.jsonl"
    path.write_text(
        "".join(json.dumps({"text": t, "start_time": s, "end_time": e}) + "\n" for t, s, e in words)
    )
    lines = load_subtitles(path)
    assert [x.text for x in lines_between(lines, 0.0, 1.0)] == ["Hi", "you"]
    assert [x.text for x in lines_between(lines, 2.0, 3.0)] == ["later"]


def test_an_unreadable_file_names_itself(tmp_path: Path) -> None:
    path = tmp_path / "bad.json"
    path.write_text("{not json")
    with pytest.raises(DataError, match=r"bad\.json: cannot read subtitles"):
        load_subtitles(path)
