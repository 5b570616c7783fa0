"""perf/train_step.py's workers row: the same training step on 1 vs 2 Ray FSDP2 workers.

Both arms are :class:`trainer.distributed.recipe.DistributedGRPORecipe` on the same data,
model, seeds and overrides as train_step.py's arms (cache arm frames; KL k3, the reference
policy on the workers; plus an entropy bonus so every step has a gradient), differing only
in ``distributed.workers``. Rollout stays in the driver in both (HF engine); old and
reference log-probs and the update run on the workers, each rank on its share of the rows;
``sync`` is the gather of the full weights into the driver's copy after the update (timed
apart and taken out of ``update`` here). One Ray instance hosts both groups (3 logical
CPUs, one torch thread per worker); the arms alternate step by step, the first step of
each is a warm-up, figures are medians of the rest.

On a 2-core machine this measures overhead, not scaling: the 2-worker arm's ranks share
the cores with each other and with the driver, and gloo all-gathers every block's weights
through loopback TCP. Read ``workers_2_over_1_ratio`` with that in mind; on one GPU per
worker the update's compute halves while the collectives ride NVLink.
"""

from __future__ import annotations

import os
import statistics
from collections.abc import Callable
from pathlib import Path
from typing import Any

PHASES = ("rollout", "old_logprob", "ref_logprob", "update", "sync")
COUNTS = (1, 2)


def make_recipe(workers: int, base: Callable[[Path], list[str]], out: Path) -> Any:
    """A distributed recipe with ``workers`` ranks, set up (workers started); ``base``
    gives train_step.py's shared overrides for a run folder."""
    from evalkit.trainer.config import load_config
    from evalkit.trainer.distributed.recipe import DistributedGRPORecipe

    overrides = [
        *base(out / "runs" / f"workers_{workers}"),
        "data.frame_source=cache",
        "actor.entropy_coeff=0.01",  # a non-zero loss whatever the (random) rewards
        f"distributed.workers={workers}",
        "distributed.cpus_per_worker=1",
        "distributed.timeout_s=600",
    ]
    recipe = DistributedGRPORecipe(load_config(None, overrides))
    recipe.setup(resume=False)
    return recipe


def _medians(steps: list[dict[str, Any]]) -> dict[str, float]:
    """Median seconds per phase (update without sync) and per step, warm-up excluded."""
    measured = steps[1:]
    row = {}
    for phase in PHASES:
        row[phase] = statistics.median(m.get(f"timing_s/{phase}", 0.0) for m in measured)
    row["update"] = statistics.median(
        m.get("timing_s/update", 0.0) - m.get("timing_s/sync", 0.0) for m in measured
    )
    row["step"] = statistics.median(m["time_s"] for m in measured)
    return row


def summarize(history: dict[int, list[dict[str, Any]]]) -> dict[str, Any]:
    """``workers_<n>_<phase>_s`` medians and ``workers_2_over_1[_<phase>]_ratio``."""
    out: dict[str, Any] = {}
    rows = {n: _medians(steps) for n, steps in history.items()}
    for n, row in rows.items():
        out |= {f"workers_{n}_{k}_s": round(v, 4) for k, v in row.items()}
    for phase in ("step", *PHASES):
        one, two = rows[1][phase], rows[2][phase]
        key = "workers_2_over_1_ratio" if phase == "step" else f"workers_2_over_1_{phase}_ratio"
        out[key] = round(two / one, 3) if one else None
    # the first step's rollouts are the same in both arms (same weights, same seeds), so
    # its losses agree to float rounding; later rollouts may sample apart
    out["workers_first_step_loss"] = history[1][0]["loss"]
    out["workers_first_step_loss_diff"] = abs(history[1][0]["loss"] - history[2][0]["loss"])
    out["workers_cpu_threads"] = os.cpu_count()
    return out


def run_workers_row(
    base: Callable[[Path], list[str]], out: Path, steps: int, log: Callable[[str], None]
) -> dict[str, Any]:
    """Warm-up + ``steps`` steps on 1 and on 2 workers, alternating; the row's figures."""
    import ray

    os.environ.setdefault("RAY_AUTH_MODE", "disabled")
    ray.init(address="local", num_cpus=sum(COUNTS), include_dashboard=False, log_to_driver=False)
    recipes: dict[int, Any] = {}
    try:
        for n in COUNTS:
            recipes[n] = make_recipe(n, base, out)
            log(f"workers row: {n} worker(s) started")
        history: dict[int, list[dict[str, Any]]] = {n: [] for n in COUNTS}
        for step in range(1, steps + 2):
            for n, recipe in recipes.items():
                metrics = recipe.train_step(step)
                history[n].append(metrics)
                log(f"step {step} workers={n}: {metrics['time_s']:.2f} s")
    finally:
        for recipe in recipes.values():
            recipe.cleanup()
        ray.shutdown()
    return summarize(history)
