"""``evalkit watch`` beside a (fake) training run, on the real vLLM CPU engine (heavy).

A script writes checkpoints of the tiny model with changed weights every two seconds, some
renamed into place and one written in place piece by piece. A watch follows it with one
warm engine, is killed (SIGKILL) once a checkpoint loaded in place is evaluated, and is
started again. Afterwards: every checkpoint was evaluated exactly once (each sample once
in its run directory), the one written in place was read only once whole, and the runs of
checkpoints loaded in place equal separate ``evalkit run``s of those checkpoints (records
and fingerprints)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")

from evalkit.synthvideo import generate
from evalkit.tiny_checkpoint import build_tiny_model

pytestmark = pytest.mark.heavy

FAKE_TRAINING = Path(__file__).with_name("_fake_training.py")
PLAN = ["10:atomic", "20:atomic", "30:inplace"]
RUN_FLAGS = [
    "--bench",
    "SynthVideo",
    "--dtype",
    "float32",
    "--engine-opt",
    "enforce_eager=true",
    "--max-model-len",
    "2048",
    "--max-tokens",
    "6",
    "--frames-max-frames",
    "4",
    "--no-progress",
    "--cache-workers",
    "1",
]


def _evalkit(*argv: str, root: Path) -> list[str]:
    flags = [*RUN_FLAGS, "--data-root", str(root / "synth"), "--cache-root", str(root / "cache")]
    return [sys.executable, "-m", "evalkit", *argv, *flags]


def _outcomes(watch: Path) -> dict[str, Any]:
    try:
        return json.loads((watch / "watch.json").read_text())["checkpoints"]
    except (OSError, ValueError, KeyError):
        return {}


def _records(run: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for line in (run / "SynthVideo.jsonl").read_text().splitlines():
        r = json.loads(line)
        out[r["id"]] = {k: r.get(k) for k in ("status", "prediction", "score", "rules")}
    return out


def _wait(predicate: Any, timeout: float, what: str, proc: subprocess.Popen[str]) -> None:
    end = time.monotonic() + timeout
    while not predicate():
        if proc.poll() is not None:
            raise AssertionError(f"{what}: the watch exited {proc.returncode} first")
        if time.monotonic() > end:
            raise AssertionError(f"{what}: not within {timeout} s")
        time.sleep(0.3)


@pytest.mark.timeout(900)
def test_a_watch_follows_training_evaluates_each_checkpoint_once_and_equals_fresh_runs(
    tmp_path: Path,
) -> None:
    base = build_tiny_model(tmp_path / "base", "qwen2_5_vl", seed=0)
    generate(tmp_path / "synth", 2, "test", 0, families=["yes_no"])
    ckpts, watch_dir = tmp_path / "ckpts", tmp_path / "watch"
    ckpts.mkdir()
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    trainer = subprocess.Popen(
        [sys.executable, str(FAKE_TRAINING), str(base), str(ckpts), *PLAN, "--every", "2"],
        stdout=subprocess.PIPE,
        text=True,
    )
    watch_cmd = _evalkit(
        "watch",
        str(ckpts),
        "--model-base",
        str(base),
        "--watch-dir",
        str(watch_dir),
        "--settle-s",
        "1",
        "--poll-s",
        "0.3",
        "--exit-when-idle-s",
        "6",
        root=tmp_path,
    )
    first = subprocess.Popen(watch_cmd, env=env, text=True, start_new_session=True)
    try:
        _wait(
            lambda: _outcomes(watch_dir).get("10", {}).get("status") == "done",
            400,
            "step 10",
            first,
        )
    finally:
        os.killpg(first.pid, signal.SIGKILL)  # the watch and everything it started
        first.wait()
    assert _outcomes(watch_dir)["10"]["loaded"] == "in place"

    second = subprocess.run(watch_cmd, env=env, text=True, capture_output=True, timeout=500)
    assert second.returncode == 0, second.stderr[-3000:]
    assert trainer.wait(timeout=60) == 0
    assert "checkpoint(s) evaluated before, not again" in second.stdout

    outcomes = _outcomes(watch_dir)
    assert sorted(outcomes, key=int) == ["0", "10", "20", "30"]
    assert all(o["status"] == "done" for o in outcomes.values()), outcomes
    samples = len(_records(watch_dir / "step-0"))
    for step in (0, 10, 20, 30):
        lines = (watch_dir / f"step-{step}" / "SynthVideo.jsonl").read_text().splitlines()
        ids = [json.loads(x)["id"] for x in lines]
        assert len(ids) == len(set(ids)) == samples  # each sample once, none lost
    # the checkpoint written in place was read once whole: its weights as finally written
    final = (ckpts / "checkpoint-30" / "model.safetensors").stat()
    assert outcomes["30"]["weights"] == [["model.safetensors", final.st_size, final.st_mtime_ns]]
    assert outcomes["30"]["loaded"] == "in place"
    curve = [json.loads(x) for x in (watch_dir / "curve.jsonl").read_text().splitlines()]
    assert [r["step"] for r in curve] == [0, 10, 20, 30]
    assert (watch_dir / "curve.html").is_file()

    # the runs of the checkpoints loaded in place equal fresh runs of those checkpoints
    predictions: set[str] = set()
    for step in (10, 30):
        argv = ["run", "--model", str(ckpts / f"checkpoint-{step}")]
        argv += ["--runs-dir", str(tmp_path / "runs"), "--run-id", f"fresh-{step}"]
        fresh = subprocess.run(
            _evalkit(*argv, root=tmp_path), env=env, capture_output=True, text=True, timeout=300
        )
        assert fresh.returncode == 0, fresh.stderr[-3000:]
        watched, alone = watch_dir / f"step-{step}", tmp_path / "runs" / f"fresh-{step}"
        assert _records(watched) == _records(alone)
        fingerprint = [
            json.loads((d / "config.json").read_text())["fingerprint"] for d in (watched, alone)
        ]
        assert fingerprint[0] == fingerprint[1]
        predictions |= {r["prediction"] for r in _records(watched).values()}
    base_predictions = {r["prediction"] for r in _records(watch_dir / "step-0").values()}
    assert predictions != base_predictions  # the weights really changed the replies


@pytest.mark.timeout(600)
def test_a_watch_on_two_ray_replicas_loads_checkpoints_in_place_and_equals_a_fresh_run(
    tmp_path: Path,
) -> None:
    """``--replicas 2``: the replicas' engines start once (on the base) and take the next
    checkpoint's weights in place; its run equals a fresh in-process ``evalkit run``."""
    from tests._fake_training import write

    base = build_tiny_model(tmp_path / "base", "qwen2_5_vl", seed=0)
    generate(tmp_path / "synth", 4, "test", 0, families=["yes_no"])
    ckpts, watch_dir = tmp_path / "ckpts", tmp_path / "watch"
    ckpts.mkdir()
    write(base, ckpts, 10, "atomic", 0.0)
    env = {k: v for k, v in os.environ.items() if k != "COLUMNS"}
    env["RAY_AUTH_MODE"] = "disabled"
    argv = ["watch", str(ckpts), "--model-base", str(base), "--watch-dir", str(watch_dir)]
    argv += ["--settle-s", "0", "--once", "--replicas", "2"]
    watched = subprocess.run(
        _evalkit(*argv, root=tmp_path), env=env, capture_output=True, text=True, timeout=400
    )
    assert watched.returncode == 0, watched.stderr[-3000:] + watched.stdout[-2000:]
    outcomes = _outcomes(watch_dir)
    assert [outcomes[s]["loaded"] for s in ("0", "10")] == ["engine started", "in place"]
    startup = json.loads((watch_dir / "step-0" / "startup.json").read_text())
    assert startup["replicas"] == 2
    lines = (watch_dir / "step-10" / "SynthVideo.jsonl").read_text().splitlines()
    assert {json.loads(x)["replica"] for x in lines} <= {"r0", "r1"}

    argv = ["run", "--model", str(ckpts / "checkpoint-10"), "--runs-dir", str(tmp_path / "runs")]
    fresh = subprocess.run(
        _evalkit(*argv, "--run-id", "fresh", root=tmp_path),
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert fresh.returncode == 0, fresh.stderr[-3000:]
    assert _records(watch_dir / "step-10") == _records(tmp_path / "runs" / "fresh")
    assert _records(watch_dir / "step-10") != _records(watch_dir / "step-0")
