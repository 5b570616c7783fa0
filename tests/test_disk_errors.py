"""Every writer of a run directory or the cache (run, score, report, cache build) ends
on a full or read-only disk in one line naming the file and what to do, exit 2 for the
CLI, with every whole record kept and no torn line (a 64 KiB tmpfs fills up)."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

import evalkit.run.execute as runner
from evalkit.cli.main import main
from evalkit.engines.base import Completion, Request, Timings
from evalkit.store import Store
from tests._run_dirs import write_set
from tests.fixtures.bench import official

IDS = ["001-1", "001-2", "002-1", "002-2", "003-1", "003-2"]


def _one_line_error(err: str, *words: str) -> None:
    lines = err.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in err, err
    for word in words:
        assert word in lines[0], lines[0]


def _read_only(mnt: Path) -> None:
    subprocess.run(["mount", "-o", "remount,ro", str(mnt)], check=True)


def _score(tmp_path: Path, runs: Path, reply: str) -> int:
    official.videomme(tmp_path / "data" / "Video-MME")
    preds = tmp_path / "p.jsonl"
    preds.write_text("".join(json.dumps({"id": i, "prediction": reply}) + "\n" for i in IDS))
    argv = ["score", "--bench", "Video-MME", "--data-root", str(tmp_path / "data")]
    argv += ["--predictions", str(preds), "--runs-dir", str(runs), "--run-id", "x"]
    return main([*argv, "--model", "m"])


def test_score_on_a_full_disk_names_the_store_and_keeps_whole_records(
    tmp_path: Path, tiny_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _score(tmp_path, tiny_disk / "runs", "A" * 20_000) == 2
    store = tiny_disk / "runs" / "x" / "Video-MME.jsonl"
    _one_line_error(capsys.readouterr().err, "disk full while writing", str(store), "resume")
    assert store.read_bytes().endswith(b"\n")  # no torn last line
    with Store(store) as again:
        assert 0 < len(again.done_ids()) < len(IDS)


def test_score_into_a_read_only_runs_dir_is_one_line(
    tmp_path: Path, tiny_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    _read_only(tiny_disk)
    assert _score(tmp_path, tiny_disk / "runs", "A") == 2
    _one_line_error(capsys.readouterr().err, "read-only file system while writing")


def test_report_into_a_read_only_folder_is_one_line(
    tmp_path: Path, tiny_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _score(tmp_path, tmp_path / "runs", "A") == 0
    (tiny_disk / "rep").mkdir()
    _read_only(tiny_disk)
    capsys.readouterr()
    argv = ["report", str(tmp_path / "runs" / "x"), "--out", str(tiny_disk / "rep")]
    assert main([*argv, "--format", "md", "--bootstrap", "0"]) == 2
    _one_line_error(capsys.readouterr().err, "read-only file system while writing", "rep")


class _Verbose:
    """Answers every request with a long reply: the records fill a small disk fast."""

    async def generate(self, request: Request) -> Completion:
        return Completion(request_id=request.id, texts=["A" * 8000], timings=Timings())

    async def close(self) -> None:
        return None


def test_run_on_a_full_disk_stops_in_one_line_and_resumes_later(
    tmp_path: Path,
    tiny_disk: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    data = write_set(tmp_path, 12)
    monkeypatch.setattr(runner, "make_engine", lambda cfg: _Verbose())
    argv = ["run", "--model", "letter-a", "--engine", "openai", "--data", str(data)]
    argv += ["--engine-opt", "probe=false"]  # the engine is scripted: no server to ask
    argv += ["--runs-dir", str(tiny_disk / "runs"), "--run-id", "r", "--no-progress"]
    argv += ["--cache-root", str(tmp_path / "cache")]
    assert main(argv) == 2
    _one_line_error(capsys.readouterr().err, "disk full while writing")
    store = tiny_disk / "runs" / "r" / "set.jsonl"
    with Store(store) as again:  # opens: the run can be resumed once space is back
        assert 0 < len(again.done_ids()) < 12


def test_cache_build_into_a_full_disk_says_so_per_video(
    tmp_path: Path, tiny_disk: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    write_set(tmp_path, 1)
    argv = ["cache", "build", str(tmp_path / "clip.mp4"), "--root", str(tiny_disk / "c")]
    assert main([*argv, "--workers", "0", "--no-progress"]) == 1
    out = capsys.readouterr().out
    assert f"disk full while writing {tiny_disk / 'c'}" in out and "Errno" not in out
