"""A damaged run directory is said in one line, by name: config.json that is not JSON or
not an object, a result_config key this evalkit never writes (``run --resume`` and
``report`` alike, exit 2), and a torn last record line (named by ``report``)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.cli.main import main
from evalkit.run.execute import execute
from tests._run_dirs import Counting, run_config, write_set


@pytest.fixture
def run(tmp_path: Path) -> Path:
    write_set(tmp_path, 4)
    return execute(run_config(tmp_path), engine=Counting()).path


def _both_fail_in_one_line(run: Path, capsys: pytest.CaptureFixture[str], *words: str) -> None:
    for argv in (["run", "--resume", str(run), "--no-progress"], ["report", str(run)]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
        for word in (str(run / "config.json"), *words):
            assert word in err, err


def test_a_config_json_that_is_not_json_is_one_line(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run / "config.json").write_text("{not json")
    _both_fail_in_one_line(run, capsys, "not valid JSON", "line 1 column 2")


def test_a_config_json_holding_a_list_is_one_line(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (run / "config.json").write_text("[1, 2]")
    _both_fail_in_one_line(run, capsys, "a JSON list, not a run manifest")


def test_an_unknown_result_config_key_is_refused(
    run: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = json.loads((run / "config.json").read_text())
    doc["result_config"]["surprise"] = 1
    (run / "config.json").write_text(json.dumps(doc))
    _both_fail_in_one_line(run, capsys, "'surprise'", "never writes")


def test_report_names_a_torn_last_line_and_leaves_it(run: Path) -> None:
    store = run / "set.jsonl"
    store.write_text(store.read_text() + '{"id": "MyOwnSet/9", "sta')
    before = store.read_bytes()
    out = run / "rep"
    assert main(["report", str(run), "--out", str(out), "--format", "md", "--bootstrap", "0"]) == 0
    md = (out / "report.md").read_text()
    assert "set.jsonl, line 5: torn last line" in md
    assert store.read_bytes() == before  # read-only: a run may still be writing it
