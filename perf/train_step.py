"""One training step with frames from the cache vs decoded on the fly in every stage (CPU).

Both arms run the trainer's real recipe step (:meth:`GRPORecipe.train_step`): rollout
through the HF engine the trainer uses (sharing the actor's weights), rewards, old
log-probs, reference log-probs (KL in the loss), one PPO update. They differ in one
setting, ``data.frame_source``:

- ``cache``: batches carry frame-cache paths; rollout and the actor map the entries;
- ``decode``: every stage that needs frames decodes the video again with decord at the
  same FrameSpec (rollout, old log-prob, ref log-prob, update), as verl and EasyVideoR1 do.

Frames are bit-identical in both arms (the cache stores what decoding gives) and every
seed is shared, so both arms train identically (``identical_losses`` checks it); only the
time differs. Phase times come from the recipe's own ``timing_s/<phase>`` metrics, the
step time from its ``time_s``. The arms alternate step by step (so load on this shared
machine hits both alike); the first step of each is a warm-up and excluded; figures are
medians over the remaining steps. Ratios are decode arm / cache arm.

The workers row (:mod:`_train_workers`; ``--no-workers-row`` skips it): the same step on 1
vs 2 Ray FSDP2 workers (cache arm, the same KL, its reference on the workers), its phases
(rollout, old and reference log-probs, update, sync) as ``workers_<n>_<phase>_s`` and
``workers_2_over_1[_<phase>]_ratio``. On 2 cores it shows the overhead of the workers, not
a speed-up (see that module's docstring).

Videos: SynthVideo clips (``evalkit.synthvideo``, 640x480, 30 fps source) played forwards
and backwards to 1-3 minutes, H.264 (x264 veryfast, CRF 23, default GOP), written once
into ``perf/out/train_step/`` and reused. The model is the tiny random Qwen2.5-VL
(``evalkit.tiny_checkpoint``): the text and vision forward are small, so frame loading
weighs more here than beside a 7B model; compare the ratios with that in mind.

Prints progress on stderr and ONE JSON object last on stdout.

    python perf/train_step.py [--quick] [--steps 3] [--no-workers-row] [--out DIR]
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import statistics
import sys
import time
from pathlib import Path
from typing import Any

os.environ.setdefault("HF_HUB_OFFLINE", "1")

FAMILIES = ("moving_shape", "yes_no", "location", "word")
PHASES = ("rollout", "reward", "old_logprob", "ref_logprob", "update")
ARMS = ("cache", "decode")
FULL = {
    "durations_s": [60.0, 120.0, 150.0, 180.0],
    "width": 640,
    "height": 480,
    "source_fps": 30,
    "fps": 2.0,
    "max_frames": 32,
    "max_pixels": 65536,
    "n": 4,
    "max_response_tokens": 32,
}
QUICK = FULL | {
    "durations_s": [12.0, 16.0],
    "width": 320,
    "height": 240,
    "max_frames": 8,
    "max_pixels": 12544,
    "n": 2,
    "max_response_tokens": 8,
}


def log(msg: str) -> None:
    """Progress on stderr (stdout carries only the JSON)."""
    print(f"[perf/train_step] {msg}", file=sys.stderr, flush=True)


def write_long_video(path: Path, frames: Any, seconds: float, fps: int) -> Path:
    """``frames`` played forwards then backwards, repeated to ``seconds``, as H.264."""
    if path.exists():
        return path
    import av

    bounce = len(frames) * 2 - 2
    tmp = path.with_name(f".{path.stem}.part.mp4")
    with av.open(str(tmp), "w") as out:
        stream = out.add_stream("libx264", rate=fps)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        stream.options = {"preset": "veryfast", "crf": "23"}
        for i in range(int(seconds * fps)):
            k = i % bounce
            img = frames[k if k < len(frames) else bounce - k]
            out.mux(stream.encode(av.VideoFrame.from_ndarray(img, format="rgb24")))
        out.mux(stream.encode(None))
    os.replace(tmp, path)
    return path


def prepare(out: Path, setup: dict[str, Any]) -> tuple[Path, Path]:
    """The tiny model and a unified-schema data file of long SynthVideo clips."""
    from evalkit.synthvideo import to_unified
    from evalkit.synthvideo.generate import make_row
    from evalkit.synthvideo.scene import Canvas
    from evalkit.tiny_checkpoint import build_tiny_model

    model = out / "tiny-qwen2_5_vl"
    if not (model / "config.json").is_file():
        build_tiny_model(model, "qwen2_5_vl", seed=0)
    canvas = Canvas(setup["width"], setup["height"], float(setup["source_fps"]))
    rows = []
    for i, seconds in enumerate(setup["durations_s"]):
        family = FAMILIES[i % len(FAMILIES)]
        row, frames = make_row(family, "train", i, 0, canvas)
        name = f"{row['id']}_{canvas.width}x{canvas.height}_{int(seconds)}s.mp4"
        t0 = time.perf_counter()
        path = out / "videos" / name
        if not path.exists():
            path.parent.mkdir(parents=True, exist_ok=True)
            write_long_video(path, frames, seconds, setup["source_fps"])
            log(f"wrote {name} in {time.perf_counter() - t0:.0f} s")
        row |= {"video": str(path), "duration": seconds}
        rows.append(to_unified(row))
    data = out / f"train_{canvas.width}x{canvas.height}.jsonl"
    data.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return model, data


def recipe_overrides(
    model: Path, data: Path, out: Path, setup: dict[str, Any], run: Path
) -> list[str]:
    """The config overrides every arm shares (the workers row's too); ``run``: its folder."""
    n_videos = len(setup["durations_s"])
    return [
        f"model={model}",
        f"data.train_path={data}",
        f"data.cache_root={out / 'cache'}",
        f"data.fps={setup['fps']}",
        f"data.video_max_frames={setup['max_frames']}",
        f"data.video_max_pixels={setup['max_pixels']}",
        "data.max_prompt_tokens=8192",
        "data.shuffle=false",
        f"rollout.n={setup['n']}",
        f"rollout.max_response_tokens={setup['max_response_tokens']}",
        f"schedule.batch_size={n_videos}",
        f"schedule.micro_batch_size={setup['n']}",  # one prompt per micro-batch
        "algorithm.kl.estimator=k3",
        "algorithm.kl.coef=0.001",
        f"checkpoint.dir={run / 'ckpt'}",
        f"output_dir={run}",
    ]


def make_recipe(arm: str, model: Path, data: Path, out: Path, setup: dict[str, Any]) -> Any:
    """A recipe ready to step (setup done: model loaded, frame cache built)."""
    from evalkit.trainer.config import load_config
    from evalkit.trainer.recipe import GRPORecipe

    base = recipe_overrides(model, data, out, setup, out / "runs" / arm)
    recipe = GRPORecipe(load_config(None, [*base, f"data.frame_source={arm}"]))
    recipe.setup(resume=False)
    return recipe


def run_steps(recipes: dict[str, Any], steps: int) -> dict[str, list[dict[str, Any]]]:
    """Warm-up + ``steps`` steps per arm, alternating arms step by step."""
    history: dict[str, list[dict[str, Any]]] = {arm: [] for arm in recipes}
    for step in range(1, steps + 2):
        for arm, recipe in recipes.items():
            metrics = recipe.train_step(step)
            history[arm].append(metrics)
            log(f"step {step} {arm}: {metrics['time_s']:.2f} s")
    return history


def summarize(history: dict[str, list[dict[str, Any]]]) -> dict[str, Any]:
    """Median seconds per phase and arm (warm-up excluded) and the decode/cache ratios."""
    seconds: dict[str, dict[str, float]] = {}
    for arm, steps in history.items():
        measured = steps[1:]
        row = {p: statistics.median(m.get(f"timing_s/{p}", 0.0) for m in measured) for p in PHASES}
        row["step"] = statistics.median(m["time_s"] for m in measured)
        seconds[arm] = {k: round(v, 4) for k, v in row.items()}
    out: dict[str, Any] = {"seconds": seconds}
    for phase in ("step", *PHASES):
        base = seconds["cache"][phase]
        out[f"{phase}_speedup_ratio"] = round(seconds["decode"][phase] / base, 3) if base else None
    keys = ("loss", "reward/overall", "grad_norm")
    out["identical_losses"] = all(
        {k: a.get(k) for k in keys} == {k: b.get(k) for k in keys}
        for a, b in zip(history["cache"], history["decode"], strict=True)
    )
    return out


def describe(recipe: Any, setup: dict[str, Any], model: Path) -> dict[str, Any]:
    """What was measured: videos (duration, size), frames per video and their pixels, model."""
    items = recipe.data.items
    metas = [v.meta for it in items for v in it.videos]
    return {
        "videos": len(metas),
        "durations_s": [round(m.duration_s, 1) for m in metas],
        "source": f"{setup['width']}x{setup['height']} @ {setup['source_fps']} fps H.264",
        "frames_per_video": [len(m.indices) for m in metas],
        "frame_pixels": [m.height * m.width for m in metas],
        "frame_size": [f"{m.width}x{m.height}" for m in metas],
        "fps": setup["fps"],
        "rollout_n": setup["n"],
        "max_response_tokens": setup["max_response_tokens"],
        "model": "evalkit.tiny_checkpoint qwen2_5_vl (random weights)",
        "model_params": sum(p.numel() for p in recipe.actor.model.parameters()),
        "rollout_engine": recipe.cfg.rollout.engine,
        "decoder": metas[0].decoder,
        "cpu_threads": os.cpu_count(),
    }


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run both arms and print the JSON figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="two short small clips, one step")
    ap.add_argument("--steps", type=int, default=None, help="measured steps (default 3, 1 quick)")
    ap.add_argument("--out", type=Path, default=Path(__file__).parent / "out" / "train_step")
    ap.add_argument(
        "--workers-row",
        action=argparse.BooleanOptionalAction,
        default=True,
        help="also time the step on 1 vs 2 Ray workers (needs evalkit[ray])",
    )
    args = ap.parse_args(argv)
    logging.basicConfig(level=logging.WARNING)
    setup = QUICK if args.quick else FULL
    steps = args.steps or (1 if args.quick else 3)
    t0 = time.perf_counter()
    args.out.mkdir(parents=True, exist_ok=True)
    model, data = prepare(args.out, setup)
    recipes = {arm: make_recipe(arm, model, data, args.out, setup) for arm in ARMS}
    log(f"setup {time.perf_counter() - t0:.0f} s; {steps} steps after a warm-up, per arm")
    try:
        history = run_steps(recipes, steps)
    finally:
        for recipe in recipes.values():
            recipe.cleanup()
    workers: dict[str, Any] = {}
    if args.workers_row:
        # perf/ itself: PYTHONSAFEPATH (tox) keeps a script's folder off sys.path
        sys.path.insert(0, str(Path(__file__).resolve().parent))
        from _train_workers import run_workers_row

        def base(run: Path) -> list[str]:
            return recipe_overrides(model, data, args.out, setup, run)

        workers = run_workers_row(base, args.out, steps, log)
    result = {
        **summarize(history),
        **workers,
        "measured_steps": steps,
        "setup": describe(recipes["cache"], setup, model),
        "quick": args.quick,
        "wall_s": round(time.perf_counter() - t0, 1),
    }
    print(json.dumps(result), flush=True)
    return result


if __name__ == "__main__":
    main()
