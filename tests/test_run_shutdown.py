"""An error inside the engine's shutdown, after every record is durable, is a warning: the
run still prints its summary and exits 0 (vLLM's shutdown sometimes finds a worker
already gone: ``psutil.NoSuchProcess``)."""

from __future__ import annotations

import asyncio
import json
import logging
from pathlib import Path
from typing import Any

import psutil
import pytest

from evalkit.cli.main import main
from evalkit.engines.lifecycle import Reaper
from evalkit.synthvideo import generate
from tests.scripted_engine import ScriptedEngine


class _GoneWorker:
    """vLLM's engine client as it is when a worker died first: shutdown raises."""

    output_handler = None

    def shutdown(self) -> None:
        raise psutil.NoSuchProcess(424242, "VLLM::Worker")


class _EngineWithBrokenShutdown(ScriptedEngine):
    async def close(self) -> None:
        raise psutil.NoSuchProcess(424242, "VLLM::Worker")


def test_vllm_engine_close_turns_a_shutdown_error_into_a_warning(
    caplog: pytest.LogCaptureFixture,
) -> None:
    from evalkit.engines.vllm_engine import VLLMEngine

    engine = VLLMEngine.__new__(VLLMEngine)  # without starting vLLM
    engine._engine = _GoneWorker()
    engine._reaper = Reaper()
    with caplog.at_level(logging.WARNING):
        asyncio.run(engine.close())
    assert "NoSuchProcess" in caplog.text
    asyncio.run(engine.close())  # still idempotent


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    generate(tmp_path / "synth", 1, "test", 0, families=["yes_no"])
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "WARNING")
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "warning")
    return tmp_path


def test_a_run_whose_engine_fails_to_shut_down_still_reports_and_exits_0(
    world: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    def make_engine(cfg: Any) -> ScriptedEngine:
        return _EngineWithBrokenShutdown(prefill_s=0, decode_s=0)

    monkeypatch.setattr("evalkit.runner.make_engine", make_engine)
    argv = "run --model ckpt --bench SynthVideo --data-root synth --no-progress"
    with caplog.at_level(logging.WARNING):
        rc = main([*argv.split(), "--cache-root", "cache", "--cache-workers", "1"])
    out = capsys.readouterr().out
    assert rc == 0
    assert "SynthVideo: 1 done, 0 failed" in out
    assert "run directory:" in out  # the summary was printed
    assert "NoSuchProcess" in caplog.text and "records are complete" in caplog.text
    (run,) = (world / "runs").iterdir()
    records = (run / "SynthVideo.jsonl").read_text().splitlines()
    assert len(records) == 1
