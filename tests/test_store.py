"""The append-only results store."""

from __future__ import annotations

import errno
import json
import os
from pathlib import Path

import pytest

from evalkit.errors import DataError, DiskError
from evalkit.records import SampleRecord
from evalkit.store import Store
from evalkit.testing.runs import Rec, record


def ok(sid: str, prediction: str = "A") -> SampleRecord:
    """An ``ok`` record as the pipeline's writer makes it."""
    return record(Rec(sid, prediction=prediction), "bench")


def failed(sid: str) -> SampleRecord:
    """A ``failed`` record as the pipeline's writer makes it."""
    return record(Rec(sid, failed_stage="engine"), "bench")


def test_a_torn_last_line_is_cut_off_on_open(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(ok("a").line() + '{"id": "b", "sta')
    with Store(path) as store:
        assert store.done_ids() == {"a"}
        store.append(ok("b"))
    assert [json.loads(x)["id"] for x in path.read_text().splitlines()] == ["a", "b"]


def test_a_second_finished_record_for_one_id_is_refused(tmp_path: Path) -> None:
    with Store(tmp_path / "r.jsonl") as store:
        store.append(ok("a"))
        with pytest.raises(DataError, match="'a'"):
            store.append(ok("a"))


def test_a_retried_failure_supersedes_the_failed_record(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with Store(path) as store:
        store.append(failed("a"))
        assert store.done_ids(include_failed=False) == set()
        store.append(ok("a"))
    with Store(path) as store:
        assert [r.status for r in store.records()] == ["ok"]


def test_a_corrupt_line_in_the_middle_names_the_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    path.write_text(ok("a").line() + "not json\n" + ok("c").line())
    with pytest.raises(DataError, match=r"r\.jsonl:2"):
        Store(path)


def _short_then_full(monkeypatch: pytest.MonkeyPatch) -> None:
    """The next ``os.write`` writes half its bytes (a short write), the one after fails
    with ENOSPC: what a filling disk does."""
    real = os.write
    calls = {"n": 0}

    def write(fd: int, data: bytes | memoryview) -> int:
        calls["n"] += 1
        if calls["n"] == 1:
            return real(fd, bytes(data)[: max(1, len(data) // 2)])
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))

    monkeypatch.setattr(os, "write", write)


def test_a_short_write_is_cut_back_named_and_not_counted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.jsonl"
    with Store(path) as store:
        store.append(ok("a"))
        with monkeypatch.context() as mp:
            _short_then_full(mp)
            with pytest.raises(DiskError, match=rf"disk full while writing {path}: 1 records"):
                store.append(ok("b", "x" * 100))
        assert store.done_ids() == {"a"}
        assert path.read_text() == ok("a").line()  # no fragment left
        store.append(ok("b"))  # space is back: the next record is whole
    with Store(path) as again:
        assert again.done_ids() == {"a", "b"}


def test_a_short_batch_write_keeps_none_of_the_batch(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "r.jsonl"
    with Store(path) as store:
        _short_then_full(monkeypatch)
        with pytest.raises(DiskError, match="0 records are safe"):
            store.append_many([ok("a"), ok("b")])
        assert store.done_ids() == set() and path.read_bytes() == b""


def test_a_full_tmpfs_stops_the_store_with_its_records_safe(tiny_disk: Path) -> None:
    path = tiny_disk / "r.jsonl"
    with Store(path) as store, pytest.raises(DiskError, match="disk full") as err:
        for i in range(10_000):
            store.append(ok(f"s{i}", "y" * 500))
    safe = int(str(err.value).split(": ")[1].split()[0])
    assert safe > 0
    with Store(path) as again:  # the file opens: every line a whole record
        assert len(again.done_ids()) == safe


def test_a_read_only_store_is_a_one_line_disk_error(tiny_disk: Path) -> None:
    import subprocess

    path = tiny_disk / "r.jsonl"
    path.write_text(ok("a").line() + '{"id": "b"')  # torn: opening cuts it
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True)
    with pytest.raises(DiskError, match=f"read-only file system while writing {path}"):
        Store(path)


def test_the_store_holds_typed_records_read_back_from_their_lines(tmp_path: Path) -> None:
    path = tmp_path / "r.jsonl"
    with Store(path) as store:
        store.append(ok("a"))
        store.append(failed("b"))
    with Store(path) as again:
        got = again.records()
    assert all(isinstance(r, SampleRecord) for r in got)
    assert [(r.id, r.status) for r in got] == [("a", "ok"), ("b", "failed")]
    assert [r.line() for r in got] == path.read_text().splitlines(keepends=True)


def test_a_line_that_is_not_a_valid_record_is_named_with_its_field_on_open(
    tmp_path: Path,
) -> None:
    path = tmp_path / "r.jsonl"
    bad = {**ok("b").dump(), "score": {"value": 7.0}}  # JSON with an id, but no record
    path.write_text(ok("a").line() + json.dumps(bad) + "\n")
    with pytest.raises(DataError, match=r"r\.jsonl:2: not a valid result record \(field 'score"):
        Store(path)
