"""A folder a run can be started in: SynthVideo (yes/no questions) and a stub checkpoint."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.synthvideo import generate


def synth_world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, per_family: int) -> Path:
    """``tmp_path`` with ``synth/`` (``per_family`` yes/no samples) and ``ckpt/`` (a
    config.json naming Qwen2.5-VL: enough for a run whose engine is faked), made the
    working folder, engine libraries at WARNING."""
    generate(tmp_path / "synth", per_family, "test", 0, families=["yes_no"])
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("VLLM_LOGGING_LEVEL", "WARNING")
    monkeypatch.setenv("TRANSFORMERS_VERBOSITY", "warning")
    return tmp_path
