"""The cold-start experiment: pure-online GRPO vs mix-policy on SynthVideo-train (CPU).

A tiny random Qwen2.5-VL model (evalkit.models.tiny) never writes a well-formed, correct
answer, so every reward in a pure-online group is (nearly) equal and GRPO's advantages are
(nearly) zero. Mix-policy puts one offline trajectory - the ground-truth answer in the
expected ``<think>...</think><answer>X</answer>`` form - into each group. Both runs share
seeds, data, model and every other setting. Per step we log the ONLINE responses' format
reward and accuracy (the offline slot is excluded, otherwise mixing would score itself).

Prints progress lines, then ONE JSON object as the last line of stdout; saves a PNG plot.

    python perf/cold_start.py [--steps 80] [--out perf/out/cold_start]
"""

from __future__ import annotations

import argparse
import json
import os
import re
import shutil
import time
from pathlib import Path
from typing import Any

FAMILIES = ("moving_shape", "yes_no")  # multiple_choice and boolean
EXAMPLES: dict[str, dict[str, list[str]]] = {}


def offline_output(row: dict[str, Any]) -> str:
    """The ground-truth answer in the expected format (what a teacher would have written)."""
    from evalkit.bench.parse import unwrap_solution

    answer = unwrap_solution(row["solution"])
    return f"<think>The answer is {answer}.</think><answer>{answer}</answer>"


def prepare(out: Path, n_per_family: int, seed: int) -> tuple[Path, Path]:
    """Tiny model + SynthVideo-train rows (unified schema) with offline trajectories."""
    from evalkit.models.tiny import build_tiny_model
    from evalkit.synthvideo import generate, read_rows, to_unified

    model = build_tiny_model(out / "tiny-qwen2_5_vl", "qwen2_5_vl", seed)
    ann = generate(out / "synthvideo", n_per_family, split="train", seed=seed, families=FAMILIES)
    rows = [to_unified(r) for r in read_rows(ann)]
    for row in rows:
        row["offline_output"] = offline_output(row)
    data = ann.with_name("train.cold_start.jsonl")
    data.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return model, data


TAGGED = re.compile(r"^\s*<think>.*?</think>\s*<answer>[^<]+</answer>\s*$", re.S)


def tagged_share(texts: list[str]) -> float:
    """Share of texts that are exactly ``<think>...</think><answer>...</answer>``.

    A check of the form alone, independent of how leniently a scorer reads an answer.
    """
    return sum(bool(TAGGED.match(t)) for t in texts) / max(len(texts), 1)


def train(name: str, model: Path, data: Path, out: Path, args: argparse.Namespace) -> list[dict]:
    """One run of the recipe; returns its per-step metrics."""
    from evalkit.trainer.config import load_config

    overrides = [
        f"model={model}",
        f"seed={args.seed}",
        f"data.train_path={data}",
        f"data.cache_root={out / 'cache'}",
        "data.video_max_pixels=12544",
        "data.video_max_frames=4",
        f"rollout.n={args.n}",
        "rollout.temperature=1.0",
        f"rollout.max_response_tokens={args.max_tokens}",
        f"optimizer.lr={args.lr}",
        "optimizer.weight_decay=0.0",
        f"schedule.steps={args.steps}",
        f"schedule.batch_size={args.batch}",
        f"schedule.micro_batch_size={args.n * args.batch}",
        f"checkpoint.dir={out / name / 'checkpoints'}",
        "checkpoint.every=0",
        f"output_dir={out / name}",
        f"mix_policy.enable_mix_policy={'true' if name == 'mix_policy' else 'false'}",
    ]
    shutil.rmtree(out / name, ignore_errors=True)  # a fresh run, not a resumed one
    recipe = _recipe_class()(load_config(None, overrides))
    recipe.setup(resume=False)
    try:
        history = recipe.run()
    finally:
        recipe.cleanup()
    EXAMPLES[name] = {k: v[:2] for k, v in recipe.last_texts.items()}
    return history


def _recipe_class() -> Any:
    from evalkit.trainer.recipe import GRPORecipe

    class TaggedRecipe(GRPORecipe):
        """The recipe, plus the strict-format share of each step's online responses."""

        def train_step(self, step: int) -> dict[str, Any]:
            values = super().train_step(step)
            texts = [t for ts in self.last_texts.values() for t in ts]
            return values | {"online/tagged": tagged_share(texts)}

    return TaggedRecipe


def series(history: list[dict], key: str) -> list[float]:
    """``online/<key>`` per step (0 where a step had no online responses)."""
    return [round(float(h.get(f"online/{key}", 0.0)), 4) for h in history]


def plot(results: dict[str, dict[str, list[float]]], path: Path) -> None:
    """Format reward and accuracy per step, both runs."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(14, 3.8), sharex=True)
    panels = (
        (axes[0], "format", "format reward"),
        (axes[1], "accuracy", "accuracy"),
        (axes[2], "tagged", "strict <think><answer> share"),
    )
    for ax, key, title in panels:
        for name, res in results.items():
            ax.plot(range(1, len(res[key]) + 1), res[key], label=name, marker=".")
        ax.set_title(f"online {title} per step")
        ax.set_xlabel("step")
        ax.set_ylim(-0.05, 1.05)
        ax.legend()
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def tail_mean(values: list[float], n: int = 5) -> float:
    """Mean of the last ``n`` values."""
    last = values[-n:]
    return round(sum(last) / max(len(last), 1), 4)


def main() -> None:
    """Run both arms and print the JSON figures last."""
    ap = argparse.ArgumentParser(description=__doc__)
    ap.add_argument("--steps", type=int, default=80)
    ap.add_argument("--n", type=int, default=4, help="group size")
    ap.add_argument("--batch", type=int, default=2, help="prompts per step")
    ap.add_argument("--n-per-family", type=int, default=4)
    ap.add_argument("--max-tokens", type=int, default=32)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--out", default="perf/out/cold_start")
    args = ap.parse_args()
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    model, data = prepare(out, args.n_per_family, args.seed)
    results: dict[str, dict[str, list[float]]] = {}
    walls: dict[str, float] = {}
    for name in ("pure_online", "mix_policy"):
        t1 = time.perf_counter()
        history = train(name, model, data, out, args)
        walls[name] = round(time.perf_counter() - t1, 1)
        results[name] = {
            "format": series(history, "format"),
            "accuracy": series(history, "accuracy"),
            "tagged": series(history, "tagged"),
            "response_length": [round(float(h.get("response_length", 0.0)), 1) for h in history],
        }
        print(f"{name}: done in {walls[name]} s", flush=True)
    png = out / "cold_start.png"
    plot(results, png)
    summary = {
        "steps": args.steps,
        "group_size": args.n,
        "prompts_per_step": args.batch,
        "families": list(FAMILIES),
        "items": 2 * args.n_per_family,
        "lr": args.lr,
        "max_response_tokens": args.max_tokens,
        "per_step": results,
        "final_format_last5_mean": {k: tail_mean(v["format"]) for k, v in results.items()},
        "final_accuracy_last5_mean": {k: tail_mean(v["accuracy"]) for k, v in results.items()},
        "final_tagged_last5_mean": {k: tail_mean(v["tagged"]) for k, v in results.items()},
        "train_s": walls,
        "total_s": round(time.perf_counter() - t0, 1),
        "plot": str(png),
        "last_step_online_texts": EXAMPLES,
    }
    print(json.dumps(summary))


if __name__ == "__main__":
    main()
