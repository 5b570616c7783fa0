"""Checkpoints resume exactly (same losses for the next steps) and are written atomically."""

from __future__ import annotations

import json
import os
import random
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from evalkit.trainer import checkpoint as ckpt
from evalkit.trainer.algorithms.losses import LossOptions
from evalkit.trainer.step import StepSettings
from tests._toy_rl import ToyRun

SETTINGS = StepSettings(loss_options=LossOptions(0.2, 0.28), micro_batch_size=3)
REPO = Path(__file__).resolve().parents[1]


pytestmark = pytest.mark.usefixtures("one_torch_thread")


def _losses(run, steps):
    return [[(r.loss, r.metrics) for r in run.step()] for _ in range(steps)]


def _trained_and_saved(root, steps=4):
    run = ToyRun(SETTINGS, seed=3)
    _losses(run, steps)
    path = ckpt.save_checkpoint(root, steps, run.policy, run.optimizer, run.data_state())
    return run, path


def _resumed(path, seed):
    run = ToyRun(SETTINGS, seed=seed)  # different init, RNG streams and data order
    resumed = ckpt.load_checkpoint(path, run.policy, run.optimizer)
    run.load_data_state(resumed.data_state)
    return run, resumed


def test_resume_continues_with_identical_losses(tmp_path):
    run, path = _trained_and_saved(tmp_path)
    expected = _losses(run, 3)
    random.random(), np.random.rand(), torch.rand(3)  # disturb every generator
    fresh, resumed = _resumed(path, seed=99)
    assert resumed.step == 4
    assert _losses(fresh, 3) == expected
    for a, b in zip(run.policy.parameters(), fresh.policy.parameters(), strict=True):
        assert torch.equal(a, b)


def test_resume_without_rng_restore_diverges(tmp_path):
    # guards the test above: restoring the RNG states is what makes the continuation identical
    run, path = _trained_and_saved(tmp_path)
    expected = _losses(run, 3)
    fresh = ToyRun(SETTINGS, seed=99)
    resumed = ckpt.load_checkpoint(path, fresh.policy, fresh.optimizer, restore_random=False)
    fresh.load_data_state(resumed.data_state)
    assert _losses(fresh, 3) != expected


_CHILD = """
import json, sys, torch
torch.set_num_threads(1)
from evalkit.trainer import checkpoint as ckpt
from evalkit.trainer.algorithms.losses import LossOptions
from evalkit.trainer.step import StepSettings
from tests._toy_rl import ToyRun
run = ToyRun(StepSettings(loss_options=LossOptions(0.2, 0.28), micro_batch_size=3), seed=7)
state = ckpt.load_checkpoint(ckpt.latest_checkpoint(sys.argv[1]), run.policy, run.optimizer)
run.load_data_state(state.data_state)
print(json.dumps([[r.loss for r in run.step()] for _ in range(3)]))
"""


def test_a_fresh_process_resumes_identically(tmp_path):
    run, _ = _trained_and_saved(tmp_path)
    expected = [[r.loss for r in run.step()] for _ in range(3)]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    out = subprocess.run(
        [sys.executable, "-c", _CHILD, str(tmp_path)],
        capture_output=True,
        text=True,
        env=env,
        check=True,
        cwd=REPO,
    )
    assert json.loads(out.stdout.strip().splitlines()[-1]) == expected


def test_rng_states_round_trip():
    state = ckpt.capture_rng()
    first = (random.random(), float(np.random.rand()), torch.rand(2).tolist())
    ckpt.restore_rng(state)
    assert (random.random(), float(np.random.rand()), torch.rand(2).tolist()) == first


def test_checkpoint_layout_and_latest(tmp_path):
    _, path = _trained_and_saved(tmp_path, steps=1)
    assert path.name == "step_00000001"
    assert {p.name for p in path.iterdir()} == {"model.pt", "optimizer.pt", "rng.pt", "meta.json"}
    meta = json.loads((path / "meta.json").read_text())
    assert meta["step"] == 1 and meta["data_state"]["position"] == 2
    assert ckpt.latest_checkpoint(tmp_path) == path
    assert ckpt.latest_checkpoint(tmp_path / "nothing") is None


def test_failed_save_leaves_no_checkpoint_and_no_temp_dir(tmp_path, monkeypatch):
    run = ToyRun(SETTINGS)
    real_save = torch.save

    def save_then_crash(obj, fh):
        if fh.name.endswith("optimizer.pt"):
            raise OSError("disk full")
        real_save(obj, fh)

    monkeypatch.setattr(torch, "save", save_then_crash)
    with pytest.raises(OSError, match="disk full"):
        ckpt.save_checkpoint(tmp_path, 5, run.policy, run.optimizer, run.data_state())
    assert list(tmp_path.iterdir()) == []
    assert ckpt.latest_checkpoint(tmp_path) is None


def test_an_existing_checkpoint_is_never_overwritten(tmp_path):
    run, _ = _trained_and_saved(tmp_path, steps=1)
    with pytest.raises(FileExistsError):
        ckpt.save_checkpoint(tmp_path, 1, run.policy, run.optimizer, run.data_state())


def test_keep_last_prunes_the_oldest(tmp_path):
    run = ToyRun(SETTINGS)
    for step in (1, 2, 3):
        ckpt.save_checkpoint(tmp_path, step, run.policy, run.optimizer, {}, keep_last=2)
    assert [p.name for p in ckpt.list_checkpoints(tmp_path)] == ["step_00000002", "step_00000003"]


def test_unreadable_checkpoint_is_reported_with_its_path(tmp_path):
    (tmp_path / "step_00000001").mkdir()
    with pytest.raises(ValueError, match="step_00000001"):
        ckpt.load_checkpoint(tmp_path / "step_00000001", ToyRun(SETTINGS).policy)
