"""How a ``--data`` file's sample ids are formed is said where an error names them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.cli.main import main
from tests.fixtures.bench.adhoc import ROW


def _jsonl(path: Path, rows: list[dict[str, object]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_a_prediction_id_of_no_data_sample_is_told_how_data_ids_are_formed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _jsonl(tmp_path / "mine.jsonl", [{**ROW, "problem_id": i} for i in (1, 2)])
    preds = _jsonl(tmp_path / "p.jsonl", [{"id": "1", "prediction": "B"}])  # not "Mine/1"
    argv = ["score", "--data", str(data), "--predictions", str(preds)]
    assert main([*argv, "--runs-dir", str(tmp_path / "runs")]) == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert "'Mine/1'" in line and "<source>/<problem_id>" in line and "file's name" in line


def test_a_row_without_problem_id_is_told_what_the_id_is_made_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _jsonl(tmp_path / "mine.jsonl", [{**ROW, "problem_id": 1}, ROW])
    assert main(["bench", "validate", "--data", str(data)]) == 1
    out = capsys.readouterr().out
    assert "'problem_id'" in out and "sample id is <source>/<problem_id>" in out
