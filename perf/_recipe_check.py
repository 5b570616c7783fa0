"""perf/gpu_train_check.py's ``--config NAME --tiny``: a shipped recipe config, run as it is.

The config (``dapo_qwen3vl_8b``, ...) is loaded by name and run through the real trainer
(:class:`trainer.distributed.recipe.DistributedGRPORecipe`) with every setting it makes,
except the ones that fix its scale, overridden by :func:`tiny_overrides`: a tiny random model
of the config's family (evalkit model tiny) in place of the checkpoint, SynthVideo-train in
place of the data, 2 prompts x 4 responses of 16 tokens per step, 4 frames, small engine
and token budgets, and one worker per visible GPU. What stays is the recipe: the clip,
loss and aggregation, padding-free + dynamic batching, gradient checkpointing, rank-0 init,
the colocated vLLM engines with chunked prefill off, the image limit and sleep mode.
``--dry-run``: the same on CPU (one gloo worker, rollouts from the HF engine; no vLLM).

Prints progress on stderr and ONE JSON object last on stdout: ``ok`` (every step ran with a
finite loss and gradient norm), the resolved plan, per-step loss / reward / grad norm / time.
"""

from __future__ import annotations

import math
import time
from pathlib import Path
from typing import Any

FAMILIES = {"Qwen3-VL": "qwen3_vl", "Qwen2.5-VL": "qwen2_5_vl", "Qwen2-VL": "qwen2_vl"}
"""The tiny model family standing in for a config's checkpoint, by its name."""


def tiny_family(model: str) -> str:
    """The tiny family for the config's ``model`` path (by the checkpoint's name)."""
    for key, family in FAMILIES.items():
        if key.lower() in Path(model).name.lower():
            return family
    raise SystemExit(f"cannot tell the model family of {model!r}: pass --family")


def tiny_overrides(work: Path, family: str, steps: int, gpus: int, dry_run: bool) -> list[str]:
    """key=value overrides that shrink a recipe config to a toy run in ``work``."""
    out = [
        f"model={work / 'model'}",
        f"inputs.tiny_model={family}",
        f"data.train_path={work / 'synthvideo' / 'synthvideo_train.unified.jsonl'}",
        "inputs.synthvideo_n=2",
        f"data.cache_root={work / 'cache'}",
        "data.val_path=null",
        "data.video_max_frames=4",
        "data.video_max_pixels=12544",
        "data.image_max_pixels=50176",
        "data.max_prompt_tokens=2048",
        "rollout.n=4",
        "rollout.max_response_tokens=16",
        f"schedule.steps={steps}",
        "schedule.batch_size=2",
        "schedule.ppo_mini_batch_size=2",
        "schedule.micro_batch_size=1",
        "actor.max_token_len_per_gpu=4096",
        f"checkpoint.dir={work / 'checkpoints'}",
        "checkpoint.every=0",
        f"output_dir={work}",
        "distributed.timeout_s=300",
    ]
    if dry_run:  # CPU: one gloo worker, the HF engine in the driver
        return [*out, "rollout.engine=hf", "distributed.workers=1", "distributed.gpus_per_worker=0",
                "distributed.cpus_per_worker=1"]  # fmt: skip
    engine = (
        "{tensor_parallel_size: 1, gpu_memory_utilization: 0.25, max_num_batched_tokens: 25000,"
        " enable_chunked_prefill: false, enforce_eager: true, max_model_len: 4096,"
        " limit_mm_per_prompt: {image: 5, video: 1}}"
    )  # the recipe's engine settings at toy scale; eager: no compile in the device budget
    return [*out, f"rollout.engine_options={engine}", f"distributed.workers={gpus}",
            "distributed.gpus_per_worker=1", "distributed.cpus_per_worker=2"]  # fmt: skip


def plan_summary(cfg: Any) -> dict[str, Any]:
    """The resolved distributed plan, as JSON."""
    from evalkit.trainer.distributed.recipe import distributed_plan

    plan = distributed_plan(cfg)
    return {
        "ranks": plan.group.world_size,
        "gpus_per_worker": plan.group.gpus_per_worker,
        "backend": plan.backend,
        "engine_hosts": list(plan.rollout.hosts) if plan.rollout else [],
        "engine_args": {k: v for k, v in plan.engine_args.items() if k != "model"},
    }


def run_config(name: str, steps: int, family: str | None, work: Path, dry_run: bool) -> dict:
    """Load ``name``, shrink it, train ``steps`` steps; the JSON summary."""
    import torch

    from evalkit.trainer.config import find_config, load_config
    from evalkit.trainer.distributed.recipe import DistributedGRPORecipe

    path = find_config(name)
    base = load_config(path)
    fam = family or tiny_family(base.model)
    gpus = 0 if dry_run else max(1, torch.cuda.device_count())
    cfg = load_config(path, tiny_overrides(work, fam, steps, gpus, dry_run))
    res: dict[str, Any] = {"config": name, "family": fam, "plan": plan_summary(cfg), "steps": []}
    recipe = DistributedGRPORecipe(cfg)
    t0 = time.perf_counter()
    recipe.setup(resume=False)
    res["setup_s"] = round(time.perf_counter() - t0, 1)
    try:
        for row in recipe.run():
            keep = ("loss", "reward/overall", "grad_norm", "time_s", "actor/ppo_kl")
            res["steps"].append({"step": row["step"]} | {k: row[k] for k in keep if k in row})
    finally:
        recipe.cleanup()
    finite = all(math.isfinite(s.get("loss", math.nan)) for s in res["steps"])
    finite = finite and all(math.isfinite(s.get("grad_norm", math.nan)) for s in res["steps"])
    res["ok"] = len(res["steps"]) == steps and finite
    return res
