"""Weight sync into a vLLM CPU engine: the old file round trip vs in-memory shm buckets.

For each model (the tiny test model, and a random ``medium`` Qwen2.5-VL built on the fly,
~120M parameters, fp32), one vLLM CPU engine is started and the actor's weights are synced
``--repeats`` times by each method; the median seconds per sync are reported:

- ``file_old``: what ``sync_weights`` did before: the whole state dict written to one
  safetensors file in a temporary directory, its path sent by ``collective_rpc``, loaded by
  vLLM's ``reload_weights`` (``WeightSyncExtension.trainer_load_weights``);
- ``shm_<N>mb``: :class:`trainer.weight_sync.EngineWeightSync` with POSIX shared-memory
  buckets of N MB (no file).

Timed from the trainer's side, end to end (packing, RPCs, the worker's load and
re-processing, cache resets excluded for both). Prints ONE JSON object on stdout.
Needs the vLLM CPU stack (CPU_STACK.md); ~3-5 minutes on 2 cores.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
sys.path.insert(0, str(Path(__file__).resolve().parent))

OPTIONS = {"dtype": "float32", "enforce_eager": True, "max_num_batched_tokens": 256,
           "max_num_seqs": 4, "max_model_len": 2048}  # fmt: skip


def old_file_sync(core: Any, model: Any, loop: Any, scratch: str) -> float:
    """The pre-issue-16 path: one safetensors file of the whole state dict, reload_weights."""
    from safetensors.torch import save_file

    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="trainer-sync-", dir=scratch) as tmp:
        path = str(Path(tmp) / "weights.safetensors")
        seen: set[int] = set()
        tensors = {}
        for name, value in model.state_dict().items():
            t = value.detach().cpu().contiguous()
            if t.data_ptr() in seen:
                t = t.clone()
            seen.add(t.data_ptr())
            tensors[name] = t
        save_file(tensors, path)
        loop.run(core.collective_rpc("trainer_load_weights", args=(path,)))
    return time.perf_counter() - t0


def measure(model_dir: Path, repeats: int, buckets_mb: list[float], scratch: str) -> dict:
    """Median seconds per sync for each method on one engine."""
    import transformers as tf

    from evalkit.trainer.rollout import EngineLoop, make_rollout_engine
    from evalkit.trainer.weight_sync import EngineWeightSync

    model = tf.Qwen2_5_VLForConditionalGeneration.from_pretrained(model_dir, dtype="float32")
    holder = SimpleNamespace(model=model)
    loop = EngineLoop()
    engine = make_rollout_engine("vllm", str(model_dir), holder, OPTIONS, loop)
    core = engine._engine
    out: dict[str, Any] = {"params_m": round(sum(p.numel() for p in model.parameters()) / 1e6, 1)}
    out["bytes_mb"] = round(sum(t.numel() * 4 for t in model.state_dict().values()) / 2**20, 1)
    try:
        times = [old_file_sync(core, model, loop, scratch) for _ in range(repeats)]
        out["file_old_s"] = round(statistics.median(times), 3)
        for mb in buckets_mb:

            def rpc(method: str, *args: Any) -> list[Any]:
                return loop.run(core.collective_rpc(method, args=args))

            sync = EngineWeightSync(rpc, transport="shm", bucket_mb=mb)
            runs = [sync.send(model.state_dict().items()) for _ in range(repeats)]
            out[f"shm_{mb:g}mb_s"] = round(statistics.median(r.seconds for r in runs), 3)
            out[f"shm_{mb:g}mb_buckets"] = runs[0].buckets
    finally:
        loop.run(engine.close())
        loop.close()
    out["speedup_ratio"] = round(out["file_old_s"] / min(
        v for k, v in out.items() if k.startswith("shm_") and k.endswith("_s")), 2)  # fmt: skip
    return out


def main(argv: list[str] | None = None) -> int:
    """Build the models, measure, print JSON."""
    from gpu_train_check import build_model

    from tests._engine_env import engine_env

    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--repeats", type=int, default=3)
    p.add_argument("--sizes", nargs="+", default=["tiny", "medium"])
    p.add_argument("--buckets-mb", type=float, nargs="+", default=[64.0, 512.0])
    a = p.parse_args(argv)
    import os

    os.environ.update(engine_env())
    res: dict[str, Any] = {}
    with tempfile.TemporaryDirectory(prefix="weight-sync-perf-") as tmp:
        for size in a.sizes:
            model_dir = build_model(Path(tmp) / size, size)
            res[size] = measure(model_dir, a.repeats, a.buckets_mb, tmp)
            print(f"[perf/weight_sync] {size}: {res[size]}", file=sys.stderr, flush=True)
    print(json.dumps(res))
    return 0


if __name__ == "__main__":
    sys.exit(main())
