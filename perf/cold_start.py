"""The cold-start study: pure online vs mix-policy (gated, ungated) on SynthVideo, over seeds.

Setup (CPU, a tiny RANDOMLY initialised Qwen2.5-VL from evalkit.tiny_checkpoint):

- data: SynthVideo families moving_shape (multiple choice), yes_no (boolean) and
  flash_count (counting). A train split for training and a held-out TEST split for
  evaluation; the two come from disjoint random streams (ids ``<family>-train-*`` vs
  ``<family>-test-*``), generated once with data seed 0 and shared by every seed and arm.
- offline trajectories (:mod:`evalkit.synthvideo.offline`): reasoning that names each
  item's own objects in one of several phrasings; an exact 30% reach a wrong answer.
- arms (same seed, model init, data and settings; only mix_policy differs), mix-policy in
  evalkit's ``append`` mode (n-1 online responses + the offline slot):
  ``pure_online``; ``mix_gated`` (slot only when the group's online mean accuracy <= the
  gate, 0.5); ``mix_ungated`` (slot in every group).
- seeds: each seed changes the model's random init and the rollout sampling.
- per step: the ONLINE responses' format reward, train reward (overall = 0.9 acc + 0.1
  format) and accuracy (the offline slot excluded: it would score itself); every
  ``--eval-every`` steps (and before step 1) held-out accuracy and format of one greedy
  and one sampled (T=1) response per test item, scored by evalkit's scorers.
- intervals: mean over seeds +- a two-sided 95% Student t-interval (t_{0.975, k-1} * sd /
  sqrt(k), k = number of seeds; with 3 seeds t = 4.30, so the intervals are wide).
- baseline: the held-out accuracy of always giving each family's most frequent test
  answer (a model that learnt the answer prior, not the video, reaches it).

Prints progress, then ONE JSON object as the last line of stdout (also saved as
``<out>/cold_start.json``); saves a PNG plot (``<out>/cold_start.png``).

    python perf/cold_start.py [--seeds 0 1 2] [--steps 40] [--quick]
"""

from __future__ import annotations

import argparse
import json
import math
import os
import shutil
import time
from collections import Counter
from pathlib import Path
from typing import Any

FAMILIES = ("moving_shape", "yes_no", "flash_count")
ARMS: dict[str, list[str]] = {
    "pure_online": ["mix_policy.enable_mix_policy=false"],
    "mix_gated": ["mix_policy.enable_mix_policy=true", "mix_policy.accuracy_gate=0.5"],
    "mix_ungated": ["mix_policy.enable_mix_policy=true", "mix_policy.accuracy_gate=null"],
}
SERIES = ("format", "train_reward", "accuracy")
EXAMPLES: dict[str, list[str]] = {}


def prepare_data(out: Path, n_train: int, n_test: int, wrong_share: float) -> tuple[Path, Path]:
    """SynthVideo train rows with offline trajectories, and held-out test rows."""
    from evalkit.synthvideo import generate, write_unified
    from evalkit.synthvideo.offline import write_offline

    data = out / "synthvideo"
    train = generate(data, n_train, split="train", seed=0, families=FAMILIES)
    test = generate(data, n_test, split="test", seed=0, families=FAMILIES)
    return write_offline(train, wrong_share, seed=0), write_unified(test)


def majority_baseline(test_path: Path) -> float:
    """Held-out accuracy of answering each family's most frequent test answer."""
    rows = [json.loads(x) for x in test_path.read_text().splitlines() if x.strip()]
    hits = 0
    for fam in {r["family"] for r in rows}:
        answers = Counter(r["solution"] for r in rows if r["family"] == fam)
        hits += answers.most_common(1)[0][1]
    return hits / len(rows)


def score_heldout(recipe: Any, temperature: float) -> tuple[dict[str, float], list[str]]:
    """Mean accuracy and format of one response per held-out item at ``temperature``."""
    from evalkit.engines.base import SamplingParams
    from evalkit.trainer.rollout import (
        cut_at_visual_tokens,
        sample_responses,
        sync_weights,
        visual_token_ids,
    )

    items, actor = recipe.test.items, recipe.actor
    requests = [recipe.test_builder(it.sample) for it in items]
    budget = recipe.cfg.rollout.max_response_tokens
    sampling = SamplingParams(max_tokens=budget, temperature=temperature)
    actor.model.eval()
    sync_weights(recipe.engine, actor, recipe.loop)
    got = sample_responses(recipe.engine, requests, [1] * len(items), sampling, 7, recipe.loop)
    tok = actor.processor.tokenizer
    banned = set(visual_token_ids(tok, actor.family))
    acc = fmt = 0.0
    texts = []
    for it, (resp,) in zip(items, got, strict=True):
        resp = cut_at_visual_tokens(resp, banned, tok)
        r = recipe._rewards(it, [resp.text], [len(resp.token_ids)])
        acc += float(r["accuracy"][0])
        fmt += float(r["format"][0])
        texts.append(resp.text)
    return {"accuracy": acc / len(items), "format": fmt / len(items)}, texts


def _recipe_class() -> Any:
    from evalkit.cache import FrameCache
    from evalkit.engines.base import SamplingParams
    from evalkit.trainer.data import TrainData, load_items
    from evalkit.trainer.recipe import GRPORecipe

    class StudyRecipe(GRPORecipe):
        """The recipe plus a held-out evaluation (greedy and sampled) every ``eval_every`` steps."""

        test_path: Path
        eval_every: int

        def setup(self, resume: bool = False) -> None:
            super().setup(resume=False)
            cfg = self.cfg
            items = load_items(self.test_path)
            cache = FrameCache(cfg.data.cache_root)
            self.test = TrainData(items, cfg.data, cache, cfg.seed, self.actor.family.factor)
            self.test.build_cache()
            self.test_builder = self.test.request_builder(SamplingParams())
            self.heldout: list[dict[str, Any]] = [{"step": 0, **self.evaluate()}]

        def evaluate(self) -> dict[str, float]:
            """Held-out accuracy and format: one greedy and one sampled (T=1) response per item."""
            greedy, texts = score_heldout(self, 0.0)
            sampled, _ = score_heldout(self, 1.0)
            self.heldout_texts = texts
            return greedy | {f"sampled_{k}": v for k, v in sampled.items()}

        def train_step(self, step: int) -> dict[str, Any]:
            values = super().train_step(step)
            if step % self.eval_every == 0 or step == self.cfg.schedule.steps:
                self.heldout.append({"step": step, **self.evaluate()})
                print(f"held-out at step {step}: {self.heldout[-1]}", flush=True)
            return values

    return StudyRecipe


def run_arm(arm: str, seed: int, paths: dict[str, Path], args: argparse.Namespace) -> dict:
    """One training run; returns its per-step series and held-out evaluations."""
    from evalkit.tiny_checkpoint import build_tiny_model
    from evalkit.trainer.config import load_config

    out = paths["out"] / f"seed{seed}" / arm
    shutil.rmtree(out, ignore_errors=True)  # a fresh run, never a resumed one
    model = build_tiny_model(paths["out"] / f"seed{seed}" / "model", "qwen2_5_vl", seed)
    overrides = [
        f"model={model}",
        f"seed={seed}",
        f"data.train_path={paths['train']}",
        f"data.cache_root={paths['out'] / 'cache'}",
        "data.video_max_pixels=12544",
        "data.video_max_frames=4",
        f"rollout.n={args.n}",
        f"rollout.max_response_tokens={args.max_tokens}",
        f"optimizer.lr={args.lr}",
        f"schedule.ppo_epochs={args.ppo_epochs}",
        "optimizer.weight_decay=0.0",
        f"schedule.steps={args.steps}",
        f"schedule.batch_size={args.batch}",
        f"schedule.micro_batch_size={args.n * args.batch}",
        f"checkpoint.dir={out / 'checkpoints'}",
        "checkpoint.every=0",
        "checkpoint.keep_last=1",
        f"output_dir={out}",
        *ARMS[arm],
    ]
    recipe = _recipe_class()(load_config(None, overrides))
    recipe.test_path, recipe.eval_every = paths["test"], args.eval_every
    recipe.setup()
    try:
        history = recipe.run()
    finally:
        recipe.cleanup()
    EXAMPLES[f"{arm}/seed{seed}"] = recipe.heldout_texts[:3]

    def per_step(key: str) -> list[float]:
        return [float(h.get(f"online/{key}", math.nan)) for h in history]

    return {
        "format": per_step("format"),
        "train_reward": per_step("overall"),
        "accuracy": per_step("accuracy"),
        "offline_share": [  # share of the step's groups that got the offline slot
            float(h.get("offline_slots", 0.0)) / max(float(h.get("groups", 1.0)), 1.0)
            for h in history
        ],
        "heldout": recipe.heldout,
    }


# two-sided 95% Student t critical values t_{0.975, df}, df = 1..30 (standard tables; no
# scipy in the project's dependencies); beyond 30 the normal 1.96 is within 2%
_T975 = (12.706, 4.303, 3.182, 2.776, 2.571, 2.447, 2.365, 2.306, 2.262, 2.228, 2.201, 2.179,
         2.160, 2.145, 2.131, 2.120, 2.110, 2.101, 2.093, 2.086, 2.080, 2.074, 2.069, 2.064,
         2.060, 2.056, 2.052, 2.048, 2.045, 2.042)  # fmt: skip


def t_interval(values: list[float]) -> tuple[float, float, float]:
    """Mean and two-sided 95% Student t-interval over seeds (NaNs left out), the interval
    clipped to [0, 1], the range of every figure here."""
    xs = [v for v in values if not math.isnan(v)]
    if not xs:
        return math.nan, math.nan, math.nan
    mean = sum(xs) / len(xs)
    if len(xs) < 2:
        return mean, math.nan, math.nan
    sd = math.sqrt(sum((x - mean) ** 2 for x in xs) / (len(xs) - 1))
    df = len(xs) - 1
    half = (_T975[df - 1] if df <= len(_T975) else 1.96) * sd / math.sqrt(len(xs))
    return mean, max(0.0, mean - half), min(1.0, mean + half)


def summarise(runs: dict[str, list[dict]]) -> dict[str, dict[str, Any]]:
    """Per arm and series: per-step mean and CI over seeds; held-out curve likewise."""
    out: dict[str, dict[str, Any]] = {}
    for arm, per_seed in runs.items():
        arm_out: dict[str, Any] = {}
        for key in (*SERIES, "offline_share"):
            cols = list(zip(*(r[key] for r in per_seed), strict=True))
            arm_out[key] = [[round(v, 4) for v in t_interval(list(c))] for c in cols]
        steps = [e["step"] for e in per_seed[0]["heldout"]]
        for key in ("accuracy", "format", "sampled_accuracy", "sampled_format"):
            cols = list(zip(*([e[key] for e in r["heldout"]] for r in per_seed), strict=True))
            arm_out[f"heldout_{key}"] = [[round(v, 4) for v in t_interval(list(c))] for c in cols]
        arm_out["heldout_steps"] = steps
        out[arm] = arm_out
    return out


def plot(summary: dict[str, dict[str, Any]], baseline: float, path: Path) -> None:
    """Format reward, train reward, held-out accuracy: mean over seeds with 95% CI bands."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 5, figsize=(23, 4.2))
    panels = (
        ("format", "online format reward per step"),
        ("train_reward", "online train reward (0.9 acc + 0.1 fmt)"),
        ("heldout_accuracy", "held-out accuracy (greedy)"),
        ("heldout_format", "held-out format reward (greedy)"),
        ("heldout_sampled_format", "held-out format reward (sampled, T=1)"),
    )
    for ax, (key, title) in zip(axes, panels, strict=True):
        for arm, res in summary.items():
            rows = res[key]
            xs = res["heldout_steps"] if key.startswith("heldout") else range(1, len(rows) + 1)
            mean, low, high = (list(c) for c in zip(*rows, strict=True))
            ax.plot(list(xs), mean, label=arm, marker="." if key.startswith("heldout") else None)
            ax.fill_between(list(xs), low, high, alpha=0.2)
        if key == "heldout_accuracy":
            ax.axhline(baseline, color="grey", ls="--", label="most-frequent-answer baseline")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("step")
        ax.set_ylim(-0.05, 1.05)
        ax.legend(fontsize=8)
    fig.suptitle("cold start, tiny random Qwen2.5-VL: mean over seeds, 95% t-interval bands")
    fig.tight_layout()
    fig.savefig(path, dpi=90)
    plt.close(fig)


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command line; ``--quick`` shrinks everything to a < 60 s smoke run."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", type=int, nargs="+", default=[0, 1, 2])
    ap.add_argument("--steps", type=int, default=40)
    ap.add_argument("--n", type=int, default=4, help="group size")
    ap.add_argument("--batch", type=int, default=4, help="prompts per step")
    ap.add_argument("--n-train", type=int, default=8, help="train items per family")
    ap.add_argument("--n-test", type=int, default=8, help="held-out items per family")
    ap.add_argument("--eval-every", type=int, default=10)
    ap.add_argument("--max-tokens", type=int, default=48)
    ap.add_argument("--lr", type=float, default=5e-3)
    ap.add_argument("--ppo-epochs", type=int, default=1, help="passes over each rollout batch")
    ap.add_argument("--wrong-share", type=float, default=0.3)
    ap.add_argument("--out", default="perf/out/cold_start")
    ap.add_argument("--arms", nargs="+", choices=list(ARMS), default=list(ARMS))
    ap.add_argument("--quick", action="store_true", help="2 seeds x 3 steps (a smoke test)")
    args = ap.parse_args(argv)
    if args.quick:
        args.seeds, args.steps, args.batch, args.eval_every = args.seeds[:2], 2, 2, 2
        args.n_train, args.n_test = 1, 1
    return args


def figures(summary: dict[str, dict[str, Any]], args: argparse.Namespace) -> dict[str, Any]:
    """The headline keys: final held-out accuracy per arm with its interval, and tails."""
    out: dict[str, Any] = {}
    tail = max(1, min(10, args.steps // 4))
    for arm, res in summary.items():
        mean, low, high = res["heldout_accuracy"][-1]
        out |= {
            f"arm_{arm}_heldout_acc": mean,
            f"arm_{arm}_heldout_acc_ci95_low": low,
            f"arm_{arm}_heldout_acc_ci95_high": high,
            f"arm_{arm}_heldout_format": res["heldout_format"][-1][0],
            f"arm_{arm}_heldout_sampled_acc": res["heldout_sampled_accuracy"][-1][0],
            f"arm_{arm}_heldout_sampled_format": res["heldout_sampled_format"][-1][0],
        }
        for key in SERIES:
            values = [row[0] for row in res[key][-tail:] if not math.isnan(row[0])]
            out[f"arm_{arm}_online_{key}_last{tail}"] = (
                round(sum(values) / len(values), 4) if values else math.nan
            )
    return out


def main(argv: list[str] | None = None) -> None:
    """Run every arm for every seed; print the JSON figures last."""
    args = parse_args(argv)
    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    t0 = time.perf_counter()
    train, test = prepare_data(out, args.n_train, args.n_test, args.wrong_share)
    paths = {"out": out, "train": train, "test": test}
    runs: dict[str, list[dict]] = {arm: [] for arm in args.arms}
    walls: dict[str, float] = {}
    for seed in args.seeds:
        for arm in args.arms:
            t1 = time.perf_counter()
            runs[arm].append(run_arm(arm, seed, paths, args))
            walls[f"{arm}/seed{seed}"] = round(time.perf_counter() - t1, 1)
            acc = runs[arm][-1]["heldout"][-1]["accuracy"]
            print(f"{arm} seed {seed}: held-out acc {acc:.3f} ({walls[f'{arm}/seed{seed}']} s)")
    summary = summarise(runs)
    baseline = round(majority_baseline(test), 4)
    png = out / "cold_start.png"
    plot(summary, baseline, png)
    result = {
        "seeds": list(args.seeds),
        "arms": list(args.arms),
        "mix_mode": "append",
        "accuracy_gate": 0.5,
        **figures(summary, args),
        "heldout_most_frequent_answer_baseline": baseline,
        "ci_method": "two-sided 95% Student t-interval over seeds",
        "steps": args.steps,
        "group_size": args.n,
        "prompts_per_step": args.batch,
        "families": list(FAMILIES),
        "train_items": args.n_train * len(FAMILIES),
        "heldout_items": args.n_test * len(FAMILIES),
        "offline_wrong_share": args.wrong_share,
        "max_response_tokens": args.max_tokens,
        "lr": args.lr,
        "ppo_epochs": args.ppo_epochs,
        "per_step": summary,
        "run_s": walls,
        "total_s": round(time.perf_counter() - t0, 1),
        "plot": str(png),
        "heldout_texts_examples": EXAMPLES,
    }
    (out / "cold_start.json").write_text(json.dumps(result, indent=1))
    print(json.dumps(result))


if __name__ == "__main__":
    main()
