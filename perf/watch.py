"""``evalkit watch`` against separate ``evalkit run``s: N checkpoints of the tiny random
Qwen2.5-VL model (its weights plus seeded noise) on a small SynthVideo suite, real vLLM
CPU engine.

(watch)    one watch over the checkpoint folder (``--once``): one engine start, every later
           checkpoint's weights loaded into it in place, the suite planned once
(separate) N runs one after another, as ``evalkit run --model CKPT`` does them (each starts
           its engine and plans the suite)

Both arms read one frame cache, built before either (a user's second run finds it warm
too), so the difference is the engine's starts and the planning. The watch's cost per
checkpoint is split into weight load (in place, or the engine's start for the first) and
evaluation. Prints progress on stderr and ONE JSON object last on stdout. ``--dry-run``
builds the model and checkpoints without starting an engine.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import shutil
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# perf/ itself: PYTHONSAFEPATH (tox) keeps a script's folder off sys.path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _tiny_engine import ENGINE_OPTIONS, offline_env


def log(msg: str) -> None:
    print(f"[perf/watch] {msg}", file=sys.stderr, flush=True)


def checkpoints(base: Path, out: Path, n: int) -> list[Path]:
    """``checkpoint-10`` ... : ``base`` with its matrices shifted by seeded noise."""
    import torch
    from safetensors.torch import load_file, save_file

    state = load_file(str(base / "model.safetensors"))
    made = []
    for i in range(1, n + 1):
        folder = out / f"checkpoint-{10 * i}"
        shutil.copytree(base, folder)
        g = torch.Generator().manual_seed(i)
        changed = {
            k: (v.float() + torch.randn(v.shape, generator=g) * v.float().std() * 0.5).to(v.dtype)
            if v.is_floating_point() and v.ndim >= 2
            else v
            for k, v in state.items()
        }
        save_file(changed, str(folder / "model.safetensors"), metadata={"format": "pt"})
        made.append(folder)
    return made


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--checkpoints", type=int, default=4, help="checkpoints to evaluate")
    p.add_argument("--per-family", type=int, default=4, help="SynthVideo samples per family")
    p.add_argument("--families", default="yes_no,flash_count", help="SynthVideo families")
    p.add_argument("--dry-run", action="store_true", help="set up only; no engine")
    args = p.parse_args()
    offline_env()

    import evalkit.run.execute as runner
    from evalkit.cache.build import build
    from evalkit.engines.logs import quiet_engine_logs
    from evalkit.run.config import RunConfig
    from evalkit.run.plan import plan_run, refs_of
    from evalkit.synthvideo import generate
    from evalkit.tiny_checkpoint import build_tiny_model
    from evalkit.watch import Follower, Watch, WatchConfig, follow

    quiet_engine_logs()
    tmp = Path(tempfile.mkdtemp(prefix="perf-watch-"))
    generate(tmp / "synth", args.per_family, "test", 0, families=args.families.split(","))
    base = build_tiny_model(tmp / "model", "qwen2_5_vl", seed=0)
    made = checkpoints(Path(base), tmp / "ckpts", args.checkpoints)

    def cfg(model: Path, runs: str) -> RunConfig:
        return RunConfig(
            model=str(model),
            bench=["SynthVideo"],
            data_root=str(tmp / "synth"),
            engine_options=ENGINE_OPTIONS,
            max_tokens=8,
            cache_root=str(tmp / "cache"),
            cache_workers=1,
            runs_dir=str(tmp / runs),
        )

    plan = plan_run(cfg(made[0], "plan"))
    for bench in plan.benches:  # one warm cache for both arms
        build(
            runner.make_cache(plan.config),
            refs_of(bench.samples),
            bench.frame_spec,
            workers=0,
            progress=False,
        )
    out: dict[str, Any] = {
        "checkpoints": len(made),
        "samples_per_checkpoint": sum(len(b.samples) for b in plan.benches),
    }
    if args.dry_run:
        print(json.dumps({**out, "dry_run": True}))
        return

    starts: list[str] = []
    real = runner.make_engine

    def counted(p: Any) -> Any:
        starts.append(p.config.model)
        return real(p)

    runner.make_engine = counted  # type: ignore[assignment]

    log(f"watch arm: {len(made)} checkpoints")
    watch_cfg = WatchConfig(
        ckpt_dir=str(tmp / "ckpts"), watch_dir=str(tmp / "watch"), once=True, settle_s=0
    )
    watch = Watch.open(watch_cfg, cfg(made[0], "watch-runs"))
    t0 = time.perf_counter()
    asyncio.run(follow(Follower(watch, say=log)))
    out["watch_wall_s"] = round(time.perf_counter() - t0, 3)
    outcomes = [watch.outcomes[s] for s in sorted(watch.outcomes)]
    out["watch_engine_starts"] = len(starts)
    out["watch_loaded"] = [o.loaded for o in outcomes]
    out["watch_load_s"] = [o.load_s for o in outcomes]
    out["watch_eval_s"] = [o.eval_s for o in outcomes]
    in_place = [o.load_s for o in outcomes if o.loaded == "in place"]
    out["in_place_load_mean_s"] = round(sum(in_place) / len(in_place), 3) if in_place else None

    log("separate arm")
    starts.clear()
    t0 = time.perf_counter()
    for model in made:
        runner.execute(cfg(model, "separate-runs"))
    out["separate_wall_s"] = round(time.perf_counter() - t0, 3)
    out["separate_engine_starts"] = len(starts)
    out["watch_over_separate_runs_ratio"] = round(out["watch_wall_s"] / out["separate_wall_s"], 3)
    print(json.dumps(out))


if __name__ == "__main__":
    main()
