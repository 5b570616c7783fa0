"""Periodic evaluation: the evalkit pipeline on a snapshot of the weights, in the background."""

from __future__ import annotations

import os
import threading
from pathlib import Path
from typing import Any

import pytest

from evalkit.trainer.config import load_config
from evalkit.trainer.eval_hook import EvalHook
from evalkit.trainer.metrics import MetricsLog, read_metrics

os.environ.setdefault("HF_HUB_OFFLINE", "1")


class _Saveable:
    def save_pretrained(self, path: Path, **_: object) -> None:
        (Path(path) / "config.json").write_text("{}")


class _SlowHook(EvalHook):
    """Evaluation replaced by a gate the test opens: shows the hook never waits for it."""

    gate = threading.Event()

    def evaluate(self, step: int, snapshot: Path) -> dict[str, float]:
        assert (snapshot / "config.json").is_file()
        self.gate.wait(10)
        return {"eval/Toy": 0.5}


def test_evaluation_runs_in_background_and_logs_next_to_training(tmp_path: Path) -> None:
    cfg = load_config(None, ["schedule.eval_every=2", "schedule.eval_benchmarks=[Toy]"])
    log = MetricsLog(tmp_path, 10, tensorboard=False)
    hook = _SlowHook(cfg, tmp_path, log.write)
    assert not hook.maybe_run(1, _Saveable(), _Saveable())  # not due
    assert hook.maybe_run(2, _Saveable(), _Saveable())  # returns at once, eval still running
    log.write(3, {"loss": 0.1}, progress=False)
    assert not hook.maybe_run(4, _Saveable(), _Saveable())  # previous still running: skipped
    assert hook.skipped == [4]
    hook.gate.set()
    hook.close()
    records = read_metrics(tmp_path / "metrics.jsonl")
    assert records[0] == {"step": 3, "loss": 0.1}
    assert records[1] == {"step": 2, "eval/step": 2.0, "eval/Toy": 0.5}
    assert not list((tmp_path / "eval-snapshots").iterdir())  # snapshots removed after the run


def _evaluated(tmp_path: Path, *overrides: str) -> tuple[Any, Any]:
    """A tiny model's actor and a config evaluating SynthVideo (one sample) every step."""
    from evalkit.synthvideo import generate
    from evalkit.tiny_checkpoint import build_tiny_model
    from evalkit.trainer.actor import ActorPolicy

    model = build_tiny_model(tmp_path / "tiny", "qwen2_5_vl", seed=0)
    generate(tmp_path / "SynthVideo", 1, split="test", seed=0, families=["yes_no"])
    schedule = ["schedule.eval_every=1", "schedule.eval_benchmarks=[SynthVideo]"]
    schedule += [f"schedule.eval_data_root={tmp_path}", "schedule.eval_limit=1"]
    cfg = load_config(None, [*schedule, f"data.cache_root={tmp_path / 'cache'}", *overrides])
    return ActorPolicy.from_pretrained(model), cfg


def test_real_pipeline_scores_the_snapshot(tmp_path: Path) -> None:
    actor, cfg = _evaluated(tmp_path)
    log = MetricsLog(tmp_path / "out", 1, tensorboard=False)
    hook = EvalHook(cfg, tmp_path / "out", log.write)
    assert hook.maybe_run(1, actor.model, actor.processor)
    hook.close()
    assert hook.errors == []
    (record,) = read_metrics(tmp_path / "out" / "metrics.jsonl")
    assert record["eval/SynthVideo/n"] == 1.0
    assert 0.0 <= record["eval/SynthVideo"] <= 100.0  # the official score, in percent


@pytest.mark.heavy
def test_due_steps_share_one_warm_vllm_engine(tmp_path: Path) -> None:
    """With ``schedule.eval_engine: vllm`` the engine starts at the first due step and
    takes the next step's weights in place; both steps are runs of the hook's watch."""
    import json

    import torch

    pytest.importorskip("vllm")
    options = "{dtype: float32, enforce_eager: true, max_model_len: 2048}"
    actor, cfg = _evaluated(
        tmp_path, "schedule.eval_engine=vllm", f"schedule.eval_engine_options={options}"
    )
    log = MetricsLog(tmp_path / "out", 2, tensorboard=False)
    hook = EvalHook(cfg, tmp_path / "out", log.write)
    for step in (1, 2):
        assert hook.maybe_run(step, actor.model, actor.processor)
        assert hook._thread is not None
        hook._thread.join()
        with torch.no_grad():
            for p in actor.model.parameters():
                p.mul_(1.5)  # the next due step's weights differ
    hook.close()
    assert hook.errors == [] and hook.finished == [1, 2]
    doc = json.loads((tmp_path / "out" / "eval" / "watch.json").read_text())
    loaded = [doc["checkpoints"][s]["loaded"] for s in ("1", "2")]
    assert loaded == ["engine started", "in place"]
    steps = [r["eval/step"] for r in read_metrics(tmp_path / "out" / "metrics.jsonl")]
    assert steps == [1.0, 2.0]
