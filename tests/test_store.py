"""The append-only results store."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.errors import DataError
from evalkit.store import Store


def test_a_torn_last_line_is_cut_off_on_open(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a", "status": "ok"}\n{"id": "b", "sta')
    with Store(path) as store:
        assert store.done_ids() == {"a"}
        store.append({"id": "b", "status": "ok"})
    assert [json.loads(x)["id"] for x in path.read_text().splitlines()] == ["a", "b"]


def test_a_second_finished_record_for_one_id_is_refused(tmp_path: Path) -> None:
    with Store(tmp_path / "r.jsonl") as store:
        store.append({"id": "a", "status": "ok"})
        with pytest.raises(DataError, match="'a'"):
            store.append({"id": "a", "status": "ok"})


def test_a_retried_failure_supersedes_the_failed_record(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with Store(path) as store:
        store.append({"id": "a", "status": "failed", "error": "x"})
        assert store.done_ids(include_failed=False) == set()
        store.append({"id": "a", "status": "ok"})
    with Store(path) as store:
        assert [r["status"] for r in store.records()] == ["ok"]


def test_a_corrupt_line_in_the_middle_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text('{"id": "a"}\nnot json\n{"id": "c"}\n')
    with pytest.raises(DataError, match=r"r\.jsonl:2"):
        Store(path)
