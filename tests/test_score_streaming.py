"""``evalkit score`` writes each record as its verdict comes: killed midway (SIGKILL), the
run keeps every record written, and scoring again resumes after them, each sample once.

The scoring is held on cue: samples 10 and up wait for a file the test never creates, so
the kill lands while they are in flight, whatever the machine's speed. Before the change,
``_score_into`` gathered every verdict before appending any: no record was ever written.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from evalkit.cli.main import main
from tests.fixtures.bench.adhoc import ROW

N = 40
HELD = 10  # samples from this index on wait for the cue
# evalkit score with its scoring held on cue (the forked scoring children inherit it)
LAUNCH = """
import os, sys, time
import evalkit.scoring.run_scorer as rs
real = rs.score_all
def held(sample, *args, **kwargs):
    if int(sample.id.rsplit("/", 1)[1]) >= int(os.environ["HELD"]):
        while not os.path.exists(os.environ["GO"]):
            time.sleep(0.01)
    return real(sample, *args, **kwargs)
rs.score_all = held
from evalkit.cli.main import main
raise SystemExit(main())
"""


def _lines(store: Path) -> list[str]:
    if not store.exists():
        return []
    data = store.read_text()
    return data[: data.rfind("\n") + 1].splitlines()  # whole lines only


def _files(tmp_path: Path) -> list[str]:
    data = tmp_path / "mine.jsonl"
    data.write_text("".join(json.dumps({**ROW, "problem_id": i}) + "\n" for i in range(N)))
    preds = tmp_path / "p.jsonl"
    preds.write_text(
        "".join(json.dumps({"id": f"Mine/{i}", "prediction": "B"}) + "\n" for i in range(N))
    )
    argv = ["score", "--data", str(data), "--predictions", str(preds)]
    return [*argv, "--runs-dir", str(tmp_path / "runs"), "--run-id", "r"]


def test_a_score_killed_midway_keeps_its_records_and_resumes_each_sample_once(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = _files(tmp_path)
    store = tmp_path / "runs" / "r" / "mine.jsonl"
    env = {**os.environ, "HELD": str(HELD), "GO": str(tmp_path / "go")}
    proc = subprocess.Popen([sys.executable, "-c", LAUNCH, *argv], env=env)
    try:
        deadline = time.monotonic() + 60
        while len(_lines(store)) < HELD and time.monotonic() < deadline and proc.poll() is None:
            time.sleep(0.05)
        written = len(_lines(store))
        assert written >= HELD, f"{written} record(s) written while samples were in flight"
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(30)
        (tmp_path / "go").touch()  # any scoring child still waiting lets go
    before = _lines(store)
    ids = [json.loads(x)["id"] for x in before]
    assert HELD <= len(ids) < N and len(set(ids)) == len(ids)

    assert main(argv) == 0  # resumed: the written records are kept, the rest scored
    assert f"{len(ids)} sample(s) were already scored" in capsys.readouterr().out
    after = _lines(store)
    assert after[: len(before)] == before
    final = [json.loads(x)["id"] for x in after]
    assert sorted(final) == sorted(f"Mine/{i}" for i in range(N))  # each sample once


def test_a_terminal_shows_a_progress_bar_of_the_samples_scored(tmp_path: Path) -> None:
    import pty

    argv = _files(tmp_path)
    leader, follower = pty.openpty()  # stderr a terminal, as a user's
    proc = subprocess.Popen([sys.executable, "-m", "evalkit", *argv], stderr=follower)
    os.close(follower)
    seen = b""
    while True:
        try:
            chunk = os.read(leader, 65536)
        except OSError:  # the terminal closed: the command is done
            break
        if not chunk:
            break
        seen += chunk
    os.close(leader)
    assert proc.wait(60) == 0
    assert b"score mine" in seen and f"{N}/{N}".encode() in seen
