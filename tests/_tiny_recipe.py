"""One GRPO recipe step on the tiny model and SynthVideo yes/no rows, for tests of what a
step does with a setting (its metrics line, its update, its checkpoint)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any


def one_step(
    model: Path,
    tmp_path: Path,
    *extra: str,
    rows: int = 1,
    response_tokens: int = 4,
    reward_fn: Callable[..., Any] | None = None,
) -> tuple[Any, dict[str, Any]]:
    """Run one step of ``rows`` prompts x 2 responses with the ``extra`` overrides; the
    recipe (its ``last_update``) and the step's metrics line. Checkpoints go to
    ``tmp_path / "run" / "ckpt"``."""
    from evalkit.synthvideo import generate, write_unified
    from evalkit.trainer.config import load_config
    from evalkit.trainer.metrics import read_metrics
    from evalkit.trainer.recipe import GRPORecipe

    ann = generate(tmp_path / "sv", rows, split="train", seed=0, families=["yes_no"])
    data = write_unified(ann)  # media paths are relative to its folder
    overrides = [
        f"model={model}",
        f"data.train_path={data}",
        f"data.cache_root={tmp_path / 'cache'}",
        "data.video_max_pixels=12544",
        "data.video_max_frames=4",
        "rollout.n=2",
        f"rollout.max_response_tokens={response_tokens}",
        f"schedule.batch_size={rows}",
        "schedule.steps=1",
        f"checkpoint.dir={tmp_path / 'run' / 'ckpt'}",
        *extra,
    ]
    kwargs = {} if reward_fn is None else {"reward_fn": reward_fn}
    recipe = GRPORecipe(load_config(None, overrides), **kwargs)
    recipe.setup(resume=False)
    try:
        recipe.run()
    finally:
        recipe.cleanup()
    (line,) = read_metrics(tmp_path / "run" / "metrics.jsonl")
    return recipe, line
