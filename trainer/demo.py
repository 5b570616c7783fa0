"""``python -m evalkit.trainer.demo``: the training leg of ``python -m evalkit.demo --train``.

The evalkit demo runs this as a subprocess (evalkit never imports the trainer): generate
SynthVideo-train with per-item offline trajectories (:mod:`evalkit.synthvideo.offline`),
train the given model with the packaged config ``configs/demo_synthvideo.yaml`` (mix-policy,
the periodic eval hook on), and write the trained weights as a Hugging Face checkpoint that
``evalkit run --model`` evaluates. Prints a JSON summary as the last line of stdout.
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path
from typing import Any

from evalkit.synthvideo.offline import FAMILIES as OFFLINE_FAMILIES

CONFIG = "demo_synthvideo.yaml"
FAMILIES = OFFLINE_FAMILIES
"""Families with offline trajectories (choice, yes/no, count); the rest stay untrained."""


def config_path() -> Path:
    """The packaged demo config (package data, found through importlib.resources)."""
    from evalkit._layout import package_folder

    return package_folder("evalkit.trainer") / "configs" / CONFIG


def prepare(work: Path, n_per_family: int, seed: int) -> Path:
    """SynthVideo-train rows with offline trajectories (30% of them wrong)."""
    from evalkit.synthvideo import generate
    from evalkit.synthvideo.offline import write_offline

    ann = generate(work / "synthvideo-train", n_per_family, "train", seed, families=FAMILIES)
    return write_offline(ann, seed=seed)


def _means(history: list[dict[str, Any]], first: bool, k: int = 5) -> dict[str, float]:
    """Online format/accuracy/reward means over the first or last ``k`` steps."""
    rows = history[:k] if first else history[-k:]
    out = {}
    for key in ("format", "accuracy", "overall"):
        vals = [float(h[f"online/{key}"]) for h in rows if f"online/{key}" in h]
        out[key] = round(sum(vals) / len(vals), 4) if vals else math.nan
    return out


def _eval_points(metrics: Path) -> list[dict[str, float]]:
    """The eval hook's rows of metrics.jsonl (``eval/*`` keys)."""
    if not metrics.is_file():
        return []
    rows = [json.loads(x) for x in metrics.read_text().splitlines() if x.strip()]
    return [{k: v for k, v in r.items() if k.startswith("eval/")} for r in rows if "eval/step" in r]


def train(args: argparse.Namespace) -> dict[str, Any]:
    """Train, save the HF checkpoint, return the summary."""
    from evalkit.trainer.config import load_config
    from evalkit.trainer.recipe import GRPORecipe

    work = Path(args.workdir).resolve()
    data = prepare(work, args.n, args.seed)
    overrides = [
        f"model={args.model}",
        f"seed={args.seed}",
        f"data.train_path={data}",
        f"data.cache_root={args.cache_root or work / 'cache'}",
        f"schedule.eval_data_root={args.eval_data_root}",
        f"checkpoint.dir={work / 'checkpoints'}",
        f"output_dir={work}",
        *args.overrides,
    ]
    cfg = load_config(config_path(), overrides)
    recipe = GRPORecipe(cfg)
    recipe.setup(resume=False)
    t0 = time.perf_counter()
    try:
        history = recipe.run()
    finally:
        recipe.cleanup()
    out = work / "model"
    recipe.actor.model.save_pretrained(out, safe_serialization=True)
    recipe.actor.processor.save_pretrained(out)
    return {
        "model": str(out),
        "steps": cfg.schedule.steps,
        "train_s": round(time.perf_counter() - t0, 1),
        "first_steps": _means(history, True),
        "last_steps": _means(history, False),
        "offline_slots": sum(float(h.get("offline_slots", 0.0)) for h in history),
        "eval_hook": _eval_points(recipe.metrics.path),
        "eval_hook_errors": recipe.eval_hook.errors,
        "metrics": str(recipe.metrics.path),
        "config": str(config_path()),
    }


def main(argv: list[str] | None = None) -> int:
    """Command line of the demo's training leg."""
    p = argparse.ArgumentParser(prog="python -m evalkit.trainer.demo", description=__doc__)
    p.add_argument("--model", required=True, help="HF checkpoint to start from")
    p.add_argument("--workdir", required=True, help="where data, metrics and the model go")
    p.add_argument("--eval-data-root", required=True, help="SynthVideo test split folder")
    p.add_argument("--cache-root", default=None, help="frame cache folder")
    p.add_argument("--n", type=int, default=6, help="train questions per family")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("overrides", nargs="*", help="key=value config overrides, e.g. schedule.steps=2")
    args = p.parse_args(argv)
    summary = train(args)
    print(json.dumps(summary))
    return 0


if __name__ == "__main__":
    sys.exit(main())
