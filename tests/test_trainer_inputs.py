"""The trainer from a wheel (issue 22, item 5): shipped configs by name from any folder, their
inputs built on demand or refused up front, a listed logger's missing package an error."""

from __future__ import annotations

import importlib.util
import os
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit.errors import ConfigError
from evalkit.trainer.config import find_config, load_config, shipped_configs
from evalkit.trainer.inputs import prepare_inputs
from evalkit.trainer.loggers import check_loggers

ROOT = Path(__file__).resolve().parents[1]


def _trainer(cwd: Path, *args: str) -> subprocess.CompletedProcess[str]:
    """``python -m evalkit.trainer ARGS`` run from ``cwd`` (outside the checkout)."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "HF_HUB_OFFLINE": "1"}
    return subprocess.run(
        [sys.executable, "-m", "evalkit.trainer", *args],
        cwd=cwd,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def _errors(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("error:")]


@pytest.mark.parametrize(
    ("args", "expected"),
    [
        (["train", "--config", "grpo_synthvido"], "did you mean 'grpo_synthvideo'"),
        (["train", "--config", "dapo_qwen3vl_8b"], "huggingface-cli download Qwen/Qwen3-VL-8B"),
        (["train", "--config", "demo_synthvideo"], "python -m evalkit.demo --train"),
    ],
    ids=["typo", "model-to-download", "demo-config"],
)
def test_config_by_name_outside_the_checkout_fails_in_one_line(tmp_path, args, expected):
    out = _trainer(tmp_path, *args)
    assert out.returncode == 2
    (line,) = _errors(out.stderr)
    assert expected in line
    assert "Traceback" not in out.stderr
    assert list(tmp_path.iterdir()) == []  # refused up front: nothing written


def test_configs_lists_every_shipped_config(tmp_path):
    out = _trainer(tmp_path, "configs")
    assert out.returncode == 0
    listed = {line.split()[0] for line in out.stdout.splitlines()[:-1]}
    assert listed == set(shipped_configs()) and "dapo_qwen3vl_8b" in listed


def test_a_checkout_path_finds_the_shipped_config_from_elsewhere(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    found = find_config("trainer/configs/grpo_synthvideo_ray2_vllm.yaml")
    assert found == shipped_configs()["grpo_synthvideo_ray2_vllm"]


def test_shipped_inputs_are_built_into_the_run_folder_and_announced(tmp_path, monkeypatch, capsys):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(find_config("grpo_synthvideo"), ["inputs.synthvideo_n=1"])
    prepare_inputs(cfg)
    run = tmp_path / "runs" / "grpo_synthvideo"
    assert (run / "tiny-qwen-vl" / "config.json").is_file()
    assert (run / "synthvideo" / "synthvideo_train.unified.jsonl").is_file()
    said = capsys.readouterr().err
    assert "evalkit model tiny --family qwen2_5_vl" in said
    assert "evalkit synth --split train --unified" in said
    prepare_inputs(cfg)  # present now: nothing built again
    assert capsys.readouterr().err == ""


def test_mix_policy_inputs_carry_offline_trajectories(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    cfg = load_config(
        find_config("mix_policy_synthvideo"), ["inputs.synthvideo_n=1", "inputs.tiny_model=null"]
    )
    with pytest.raises(ConfigError, match="no such folder"):  # no model recipe: refused
        prepare_inputs(cfg)
    cfg = load_config(find_config("mix_policy_synthvideo"), ["inputs.synthvideo_n=1"])
    cfg = cfg.model_copy(update={"model": str(tmp_path)})  # a folder that exists
    prepare_inputs(cfg)
    rows = Path(cfg.data.train_path).read_text().splitlines()
    assert rows and all('"offline_output"' in r for r in rows)


def test_a_listed_logger_without_its_package_is_an_error_at_start_up(monkeypatch):
    real = importlib.util.find_spec
    monkeypatch.setattr(
        importlib.util, "find_spec", lambda n, *a: None if n == "tensorboard" else real(n, *a)
    )
    listed = load_config(None, ["trainer.loggers=[jsonl, tensorboard]"])
    with pytest.raises(ConfigError, match="pip install tensorboard"):
        check_loggers(listed)
    assert check_loggers(load_config(None)) == ["jsonl"]  # the default: used when installed
