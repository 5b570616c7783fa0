"""Recipe pieces without a model: overlong pre-filter, reward function file, wandb, config."""

from __future__ import annotations

import logging
import sys
import types
from pathlib import Path
from typing import Any

import pytest

from evalkit.errors import ConfigError, DataError
from evalkit.trainer.config import load_config
from evalkit.trainer.loggers import make_sinks
from evalkit.trainer.metrics import MetricsLog, read_metrics
from evalkit.trainer.prompt_filter import drop_overlong
from evalkit.trainer.reward_loader import load_reward_function


def test_overlong_prompts_are_left_out_with_their_ids_named(caplog):
    items = [("a", 5), ("b", 12), ("c", 10), ("d", 11)]
    with caplog.at_level(logging.WARNING):
        kept, dropped = drop_overlong(items, lambda it: it[1], 10, lambda it: it[0])
    assert kept == [("a", 5), ("c", 10)] and dropped == ["b", "d"]
    assert "2 training prompt(s) over data.max_prompt_tokens=10 left out: b, d" in caplog.text


def test_nothing_left_is_a_data_error_naming_the_limit():
    with pytest.raises(DataError, match="max_prompt_tokens=3"):
        drop_overlong([("a", 5)], lambda it: it[1], 3, lambda it: it[0])


REWARD_FILE = """
def score(sample, prediction, w_acc=0.9, w_fmt=0.1):
    acc = float("yes" in prediction)
    return {"accuracy": acc, "format": 1.0, "overall": w_acc * acc + w_fmt}

def two_args(sample, prediction):
    return {}

VALUE = 3
"""


def _reward_file(tmp_path: Path) -> Path:
    path = tmp_path / "my_reward.py"
    path.write_text(REWARD_FILE)
    return path


def test_a_reward_function_loads_from_its_file(tmp_path):
    fn = load_reward_function(f"{_reward_file(tmp_path)}:score")
    assert fn(None, "yes it is", w_acc=0.5, w_fmt=0.5) == {
        "accuracy": 1.0,
        "format": 1.0,
        "overall": 1.0,
    }


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("nothing", "has no function 'nothing'"),
        ("VALUE", "has no function 'VALUE'"),
        ("two_args", "must accept \\(sample, prediction, w_acc=..., w_fmt=...\\)"),
    ],
)
def test_a_wrong_reward_function_is_a_config_error_naming_file_and_function(
    tmp_path, name, message
):
    path = _reward_file(tmp_path)
    with pytest.raises(ConfigError, match=message) as info:
        load_reward_function(f"{path}:{name}")
    assert str(path) in str(info.value)


def test_a_missing_or_broken_reward_file_is_a_config_error(tmp_path):
    with pytest.raises(ConfigError, match="not found"):
        load_reward_function(f"{tmp_path / 'absent.py'}:score")
    broken = tmp_path / "broken.py"
    broken.write_text("import not_a_module_anywhere\n")
    with pytest.raises(ConfigError, match=r"importing .*broken\.py failed"):
        load_reward_function(f"{broken}:score")


def test_reward_function_and_new_sections_in_the_config(tmp_path):
    with pytest.raises(ConfigError, match=r"rewards\.function"):
        load_config(None, ["rewards.function=no_colon_here"])
    with pytest.raises(ConfigError, match="must include jsonl"):
        load_config(None, ["trainer.loggers=[wandb]"])
    with pytest.raises(ConfigError, match=r"need data\.val_path"):
        load_config(None, ["trainer.val_freq=5"])
    cfg = load_config(None, ["data.val_path=v.jsonl", "trainer.val_before_train=true"])
    assert cfg.trainer.val_before_train and cfg.actor.freeze_vision_tower is False


class _FakeRun:
    def __init__(self, **kwargs):
        self.kwargs = kwargs
        self.logged: list[tuple[dict, int | None]] = []
        self.finished = False

    def log(self, values, step=None):
        self.logged.append((values, step))

    def finish(self):
        self.finished = True


def test_wandb_receives_every_record_when_listed(tmp_path, monkeypatch):
    runs: list[_FakeRun] = []
    fake = types.ModuleType("wandb")

    def init(**kwargs: Any) -> _FakeRun:
        runs.append(_FakeRun(**kwargs))
        return runs[-1]

    fake.init = init  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "wandb", fake)
    cfg = load_config(None, ["trainer.loggers=[jsonl, wandb]", "trainer.wandb_mode=offline"])
    log = MetricsLog(
        tmp_path / "out", 3, tensorboard=False, sinks=make_sinks(cfg, tmp_path / "out")
    )
    log.write(1, {"loss": 0.5, "flag": True, "bad": float("nan")}, progress=False)
    log.write(2, {"loss": 0.25}, progress=False)
    log.write(1, {"eval/step": 1.0, "eval/x": 0.7}, progress=False)  # late: the eval hook
    log.close()
    (run,) = runs
    assert run.kwargs["mode"] == "offline" and run.kwargs["dir"] == str(tmp_path / "out")
    assert run.kwargs["config"]["trainer"]["loggers"] == ["jsonl", "wandb"]
    assert run.logged == [
        ({"loss": 0.5}, 1),
        ({"loss": 0.25}, 2),
        ({"eval/step": 1.0, "eval/x": 0.7}, None),
    ]
    assert run.finished
    assert [r["step"] for r in read_metrics(tmp_path / "out" / "metrics.jsonl")] == [1, 2, 1]


def test_wandb_is_never_imported_unless_listed(tmp_path, monkeypatch):
    monkeypatch.setitem(sys.modules, "wandb", None)  # importing it would raise
    assert make_sinks(load_config(), tmp_path) == []
    with pytest.raises(ConfigError, match="pip install wandb"):
        make_sinks(load_config(None, ["trainer.loggers=[jsonl,wandb]"]), tmp_path)


def test_export_errors_name_what_to_do(tmp_path):
    import json

    from evalkit.trainer.export import export_checkpoint, resolve_checkpoint

    with pytest.raises(ConfigError, match="holds no step_"):
        resolve_checkpoint(tmp_path)
    step = tmp_path / "step_00000003"
    step.mkdir()
    (step / "meta.json").write_text(json.dumps({"step": 3, "extra": {}}))
    assert resolve_checkpoint(tmp_path) == step
    with pytest.raises(ConfigError, match="pass --model"):
        export_checkpoint(tmp_path, tmp_path / "out")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "x").write_text("taken")
    with pytest.raises(ConfigError, match="not empty"):
        export_checkpoint(step, tmp_path / "out", model=str(tmp_path))
