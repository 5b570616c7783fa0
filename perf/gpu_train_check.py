"""Device check on one NVIDIA GPU: colocated training + vLLM rollouts, in-memory weight sync.

A small random Qwen2.5-VL is built on the fly (no download; ``--size small`` ~ 50M params),
trained for ``--steps`` steps at world size 1 in bf16 (FSDP2 ``fully_shard`` per decoder and
vision block, root last, bf16 params / fp32 reduce; ``--no-fsdp`` for a plain module) next
to a vLLM engine on the same GPU. Every step: wake + sync the weights (CUDA IPC buckets,
:mod:`trainer.weight_sync`) -> seeded rollouts of a video prompt -> vLLM sleep -> the
actor's update (NLL of a fixed target answer plus a group-baseline policy-gradient term on
the rollouts). After the last step: sync, then vLLM's greedy tokens must equal the
actor's (HF ``generate``), and before that sync they must not (the sync is what moved them).

Prints progress on stderr and ONE JSON object last on stdout (``ok``, ``greedy_match``,
per-step sync seconds and bytes, GPU memory freed by sleep, min top-2 logit margin of
the actor's greedy path: a mismatch at a tiny margin is bf16 noise, not a sync bug).
``--dry-run`` runs the same code on CPU without vLLM (tiny model, gloo, fp32, the shm
transport into an in-process fake worker that loads the buckets into a second copy of the
model) and exits 0 when the synced copy's greedy tokens equal the actor's; a test runs it.
Budget: under 8 minutes on an H200 (engine start dominates).

``--config NAME --tiny`` runs a shipped recipe config instead (``dapo_qwen3vl_8b``: the
report's recipe as EasyVideoR1 runs it) through the real distributed trainer at toy scale
(perf/_recipe_check.py); with ``--dry-run`` on CPU. Exit 0 when every step ran.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

SIZES = {  # TinySpec fields; "small" ~ 50M parameters, "tiny" the CPU test model
    "tiny": {},
    "small": dict(
        text_hidden=768, text_layers=8, text_heads=12, text_kv_heads=4, head_dim=64,
        vision_depth=4, vision_hidden=256, vision_heads=4,
    ),
    "medium": dict(  # ~120M: perf/weight_sync.py's larger model
        text_hidden=1024, text_layers=12, text_heads=16, text_kv_heads=4, head_dim=64,
        vision_depth=4, vision_hidden=256, vision_heads=4,
    ),
}  # fmt: skip
TARGET = "The red ball moves to the left, then it stops."
VISUAL_IDS: set[int] = set()  # the tokenizer's media placeholders (set by target_ids)


def log(msg: str) -> None:
    print(f"[perf/gpu_train_check] {msg}", file=sys.stderr, flush=True)


def build_model(out: Path, size: str) -> Path:
    """A random Qwen2.5-VL checkpoint of ``size`` (evalkit.tiny_checkpoint, wider/deeper)."""
    import transformers as tf

    from evalkit.tiny_checkpoint import TinySpec, build_config, build_processor, build_tokenizer

    spec = TinySpec(family="qwen2_5_vl", **SIZES[size])
    tok = build_tokenizer()
    config = build_config(spec, tok)
    # M-RoPE sections must sum to head_dim / 2 (vLLM asserts it; transformers does not)
    k = spec.head_dim // 32
    config.text_config.rope_parameters["mrope_section"] = [4 * k, 6 * k, 6 * k]
    torch.manual_seed(0)
    model = tf.Qwen2_5_VLForConditionalGeneration(config).float().eval()
    model.generation_config.do_sample = False
    model.generation_config.eos_token_id = [tok.convert_tokens_to_ids("<|im_end|>")]
    model.save_pretrained(out, safe_serialization=True)
    build_processor(spec, tok).save_pretrained(out)
    tok.save_pretrained(out)
    log(f"model {size}: {sum(p.numel() for p in model.parameters()) / 1e6:.1f}M params")
    return out


def video_request(seed: int = 0) -> Any:
    """A video prompt: 8 random frames of 112x112 (T/2 <= H/28: HF and vLLM M-RoPE agree)."""
    from evalkit.engines.base import Request
    from evalkit.video.types import Frames, VideoMeta

    t, h, w = 8, 112, 112
    rng = np.random.default_rng(seed)
    idx = [2 * i for i in range(t)]
    meta = VideoMeta(
        source_fps=4.0, total_frames=2 * t, duration_s=t / 2, indices=idx,
        timestamps=[i / 4.0 for i in idx], height=h, width=w, source_height=h,
        source_width=w, decoder="synthetic",
    )  # fmt: skip
    frames = Frames(array=rng.integers(0, 256, (t, h, w, 3), dtype=np.uint8), meta=meta)
    return Request(id="check", text="What does the ball do?", videos=[frames])


def init_dist(device: str) -> None:
    """A process group of one (NCCL on GPU, gloo on CPU), as the Ray worker group has."""
    import torch.distributed as dist

    if not dist.is_initialized():
        os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
        os.environ.setdefault("MASTER_PORT", str(29500 + os.getpid() % 1000))
        dist.init_process_group("nccl" if device == "cuda" else "gloo", rank=0, world_size=1)


def load_actor(model_dir: Path, device: str, dtype: torch.dtype, fsdp: bool) -> Any:
    """The HF model on ``device``: FSDP2 per block, vision tower, embedding, root last
    (bf16 compute, fp32 reduce)."""
    import transformers as tf

    from evalkit.engines.reference_rope import use_reference_rope

    cls: Any = tf.Qwen2_5_VLForConditionalGeneration
    model = cls.from_pretrained(model_dir, dtype=torch.float32).to(device)
    # the M-RoPE positions vLLM uses (HF 5.x's text positions after a video are off)
    use_reference_rope(model)
    if not fsdp:
        return model.to(dtype)
    from torch.distributed.fsdp import MixedPrecisionPolicy, fully_shard

    init_dist(device)
    mp = MixedPrecisionPolicy(param_dtype=dtype, reduce_dtype=torch.float32)
    inner = model.model
    # generate() calls the vision tower and the embedding outside the root's forward, so
    # they are units of their own (their hooks gather their parameters), blocks first
    blocks = [*inner.language_model.layers, *inner.visual.blocks]
    for block in [*blocks, inner.visual, inner.language_model.embed_tokens]:
        fully_shard(block, mp_policy=mp)
    fully_shard(model, mp_policy=mp)
    return model


def model_inputs(processor: Any, request: Any, device: str, dtype: torch.dtype) -> dict[str, Any]:
    """The processor output for ``request`` on ``device`` (pixels in the compute dtype)."""
    from evalkit.engines.family import family_from_config
    from evalkit.engines.prompting import processor_inputs

    qwen25 = family_from_config({"model_type": "qwen2_5_vl"})  # the 28-pixel grid it checks
    out = processor_inputs(processor, qwen25, request)
    moved = {k: v.to(device) for k, v in out.items() if isinstance(v, torch.Tensor)}
    moved["pixel_values_videos"] = moved["pixel_values_videos"].to(dtype)
    return moved


@torch.no_grad()
def actor_greedy(model: Any, inputs: dict[str, Any], max_tokens: int) -> tuple[list[int], float]:
    """HF greedy tokens and the smallest top-1 minus top-2 logit gap along them."""
    model.eval()
    out = model.generate(
        **inputs, max_new_tokens=max_tokens, do_sample=False,
        output_scores=True, return_dict_in_generate=True,
    )  # fmt: skip
    n = inputs["input_ids"].shape[1]
    gaps = [float(s[0].float().topk(2).values.diff().abs()) for s in out.scores]
    return out.sequences[0, n:].tolist(), min(gaps) if gaps else 0.0


def cut_visual(seq: list[int]) -> list[int]:
    """``seq`` up to its first media placeholder token."""
    return seq[: next((i for i, t in enumerate(seq) if t in VISUAL_IDS), len(seq))]


def train_step(
    model: Any, opt: Any, inputs: dict[str, Any], target: list[int], rollouts: list[list[int]]
) -> float:
    """NLL of ``target`` + a group-baseline policy gradient on ``rollouts`` (reward: share
    of target tokens at the right place); one optimizer step; returns the loss."""
    model.train()
    ids = inputs["input_ids"]
    # a sampled visual placeholder would be taken for a media slot: cut there (as the recipe)
    rollouts = [cut_visual(r) for r in rollouts]
    seqs = [target, *rollouts]
    hits = [[a == b for a, b in zip(r, target, strict=False)] for r in rollouts]
    rewards = torch.tensor([float(np.mean(h)) if h else 0.0 for h in hits])
    adv = rewards - rewards.mean() if len(rollouts) > 1 else rewards * 0
    loss = torch.zeros((), device=ids.device)
    for i, seq in enumerate(seqs):
        if not seq:
            continue
        full = torch.cat([ids, torch.tensor([seq], device=ids.device)], 1)
        per_token = ("input_ids", "attention_mask", "mm_token_type_ids")  # prompt-length
        extra = {k: v for k, v in inputs.items() if k not in per_token}
        logits = model(input_ids=full, **extra).logits[0, ids.shape[1] - 1 : -1].float()
        logp = torch.log_softmax(logits, -1).gather(1, full[0, ids.shape[1] :, None]).sum()
        loss = loss - logp / len(seq) if i == 0 else loss - float(adv[i - 1]) * logp / len(seq)
    opt.zero_grad()
    loss.backward()
    opt.step()
    return float(loss.detach())


def target_ids(processor: Any) -> list[int]:
    """The fixed answer the NLL term teaches (makes the greedy path decisive in bf16)."""
    tok = processor.tokenizer
    names = ("<|vision_start|>", "<|vision_end|>", "<|image_pad|>", "<|video_pad|>")
    VISUAL_IDS.update(int(tok.convert_tokens_to_ids(n)) for n in names)
    return [*tok(TARGET).input_ids, tok.convert_tokens_to_ids("<|im_end|>")]


def strip_eos(ids: list[int], eos: int) -> list[int]:
    """``ids`` without a final EOS (vLLM and HF differ in whether they keep it)."""
    return ids[:-1] if ids and ids[-1] == eos else ids


def vllm_tokens(engine: Any, request: Any, loop: Any, n: int, temp: float, seed: int) -> Any:
    """``n`` completions of ``request`` from the rollout engine (greedy at ``temp=0``)."""
    from evalkit.engines.base import SamplingParams
    from evalkit.trainer.rollout import sample_responses

    params = SamplingParams(max_tokens=24, temperature=temp)
    (group,) = sample_responses(engine, [request], [n], params, seed, loop)
    return [r.token_ids for r in group]


def run_gpu(a: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The device check proper (see the module docstring)."""
    from types import SimpleNamespace

    from transformers import AutoProcessor

    from evalkit.trainer.rollout import EngineLoop, make_rollout_engine, sleep_engine, sync_weights

    dtype = torch.bfloat16
    model_dir = build_model(work / "model", a.size)
    processor = AutoProcessor.from_pretrained(model_dir)
    actor = load_actor(model_dir, "cuda", dtype, a.fsdp)
    holder = SimpleNamespace(model=actor)  # what sync_weights reads: .model.state_dict()
    opts = {"dtype": "bfloat16", "gpu_memory_utilization": a.gpu_memory_utilization,
            "enforce_eager": True, "max_model_len": 4096, "max_num_seqs": 16,
            "enable_prefix_caching": False}  # fmt: skip
    loop = EngineLoop()
    t0 = time.perf_counter()
    engine = make_rollout_engine("vllm", str(model_dir), holder, opts, loop, a.sleep_level)
    res: dict[str, Any] = {"engine_start_s": round(time.perf_counter() - t0, 1), "steps": []}
    try:
        req = video_request()
        inputs, target = model_inputs(processor, req, "cuda", dtype), target_ids(processor)
        opt = torch.optim.AdamW(actor.parameters(), lr=a.lr)
        for step in range(1, a.steps + 1):
            stats = sync_weights(engine, holder, loop, a.bucket_mb, "auto")
            rollouts = vllm_tokens(engine, req, loop, a.n, 1.0, 1000 * step)
            free0 = torch.cuda.mem_get_info()[0]
            slept = sleep_engine(engine, loop, a.sleep_level)
            freed = (torch.cuda.mem_get_info()[0] - free0) / 2**30
            loss = train_step(actor, opt, inputs, target, rollouts)
            assert stats is not None
            row = {"step": step, "loss": round(loss, 4), "slept": slept}
            row |= {"sleep_freed_gib": round(freed, 2), "sync_s": round(stats.seconds, 3)}
            row |= {"sync_mb": round(stats.bytes / 2**20, 1), "buckets": stats.buckets}
            res["steps"].append(row)
            log(f"step {step}: {res['steps'][-1]}")
        res |= final_check(a, engine, holder, req, inputs, loop, processor)
    finally:
        loop.run(engine.close())
        loop.close()
    return res


def final_check(
    a: argparse.Namespace, engine: Any, holder: Any, req: Any, inputs: Any, loop: Any, proc: Any
) -> dict[str, Any]:
    """Greedy tokens before the last sync (stale weights) and after it, vs the actor's."""
    from evalkit.trainer.rollout import sync_weights

    eos = proc.tokenizer.convert_tokens_to_ids("<|im_end|>")
    want, margin = actor_greedy(holder.model, inputs, 24)
    want = strip_eos(want, eos)
    stale = None
    if a.sleep_level == 1:  # level 1 kept the previous step's weights in host memory
        loop.run(engine._engine.wake_up())
        stale = strip_eos(vllm_tokens(engine, req, loop, 1, 0.0, 0)[0], eos)
    stats = sync_weights(engine, holder, loop, a.bucket_mb, "auto")
    got = strip_eos(vllm_tokens(engine, req, loop, 1, 0.0, 0)[0], eos)
    seeded = [vllm_tokens(engine, req, loop, 2, 1.0, 7) for _ in range(2)]
    return {
        "greedy_match": got == want,
        "stale_differs": None if stale is None else stale != want,
        "actor_tokens": want,
        "vllm_tokens": got,
        "actor_min_top2_margin": round(margin, 4),
        "final_sync_s": round(stats.seconds, 3) if stats else None,
        "seeded_rollouts_reproducible": seeded[0] == seeded[1],
    }


class _CopyWorker:
    """Dry run's stand-in for a vLLM worker: buckets land in a second copy of the model."""

    def __init__(self, model: Any) -> None:
        self.model = model
        self.got: dict[str, Any] = {}

    def __call__(self, method: str, *args: Any) -> list[Any]:
        from evalkit.trainer.weight_sync import open_bucket

        if method == "trainer_load_bucket":  # (handle, first, last)
            self.got.update(open_bucket(args[0]))
            if args[2]:
                self.model.load_state_dict(self.got, strict=True)
                self.got = {}
        return [None]


def run_dry(a: argparse.Namespace, work: Path) -> dict[str, Any]:
    """The same training and sync code on CPU (tiny model, gloo, fp32, shm buckets)."""
    import transformers as tf
    from transformers import AutoProcessor

    from evalkit.engines.reference_rope import use_reference_rope
    from evalkit.trainer.weight_sync import EngineWeightSync

    model_dir = build_model(work / "model", "tiny")
    processor = AutoProcessor.from_pretrained(model_dir)
    actor = load_actor(model_dir, "cpu", torch.float32, a.fsdp)
    cls: Any = tf.Qwen2_5_VLForConditionalGeneration
    copy = cls.from_pretrained(model_dir, dtype=torch.float32)
    use_reference_rope(copy)  # as the actor (load_actor)
    bucket_mb = min(a.bucket_mb, 0.5)  # the tiny model in several buckets
    sync = EngineWeightSync(_CopyWorker(copy), transport="shm", bucket_mb=bucket_mb)
    req = video_request()
    inputs, target = model_inputs(processor, req, "cpu", torch.float32), target_ids(processor)
    opt = torch.optim.AdamW(actor.parameters(), lr=a.lr)
    eos = processor.tokenizer.convert_tokens_to_ids("<|im_end|>")
    res: dict[str, Any] = {"steps": []}
    for step in range(1, a.steps + 1):
        stats = sync.send(actor.state_dict().items())
        rollouts = [actor_greedy(copy, inputs, 8)[0]]
        loss = train_step(actor, opt, inputs, target, rollouts)
        row = {"step": step, "loss": round(loss, 4), "sync_s": round(stats.seconds, 3)}
        res["steps"].append(row | {"buckets": stats.buckets})
    stale = strip_eos(actor_greedy(copy, inputs, 24)[0], eos)
    sync.send(actor.state_dict().items())
    want, margin = actor_greedy(actor, inputs, 24)
    got = strip_eos(actor_greedy(copy, inputs, 24)[0], eos)
    res |= {"greedy_match": got == strip_eos(want, eos), "stale_differs": stale != got,
            "actor_min_top2_margin": round(margin, 4)}  # fmt: skip
    return res


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """Command-line options."""
    p = argparse.ArgumentParser(description=(__doc__ or "").split("\n")[0])
    p.add_argument("--dry-run", action="store_true", help="CPU, no vLLM: validate the code")
    p.add_argument("--size", choices=sorted(SIZES), default="small")
    p.add_argument("--steps", type=int, default=5)
    p.add_argument("--n", type=int, default=4, help="rollouts per step")
    p.add_argument("--lr", type=float, default=3e-3)
    p.add_argument("--bucket-mb", type=float, default=64.0)
    p.add_argument("--sleep-level", type=int, choices=(0, 1, 2), default=1)
    p.add_argument("--gpu-memory-utilization", type=float, default=0.3)
    p.add_argument("--fsdp", action=argparse.BooleanOptionalAction, default=True)
    p.add_argument("--work", type=Path, default=None, help="scratch dir (default: a temp dir)")
    p.add_argument("--config", default=None, help="run a shipped recipe config (with --tiny)")
    p.add_argument("--tiny", action="store_true", help="--config at toy scale (tiny model)")
    p.add_argument("--family", default=None, help="--tiny model family (default: by name)")
    return p.parse_args(argv)


def main_config(a: argparse.Namespace, work: Path) -> int:
    """``--config NAME --tiny``: the recipe at toy scale; JSON last on stdout."""
    # perf/ itself: PYTHONSAFEPATH (tox) keeps a script's folder off sys.path
    sys.path.insert(0, str(Path(__file__).resolve().parent))
    from _recipe_check import run_config

    if not a.tiny:
        print(json.dumps({"ok": False, "error": "--config runs at toy scale only: add --tiny"}))
        return 2
    if not a.dry_run and not torch.cuda.is_available():
        print(json.dumps({"ok": False, "error": "no CUDA device; use --dry-run"}))
        return 2
    t0 = time.perf_counter()
    res = run_config(a.config, a.steps, a.family, work, a.dry_run)
    res |= {"dry_run": a.dry_run, "total_s": round(time.perf_counter() - t0, 1)}
    print(json.dumps(res))
    return 0 if res["ok"] else 1


def main(argv: list[str] | None = None) -> int:
    """Run the check (or the dry run); JSON last on stdout; 0 when the greedy tokens match."""
    import tempfile

    a = parse_args(argv)
    t0 = time.perf_counter()
    with tempfile.TemporaryDirectory(prefix="gpu-train-check-") as tmp:
        work = a.work or Path(tmp)
        if a.config is not None:
            return main_config(a, work)
        if a.dry_run:
            res = run_dry(a, work)
        else:
            if not torch.cuda.is_available():
                print(json.dumps({"ok": False, "error": "no CUDA device; use --dry-run"}))
                return 2
            res = run_gpu(a, work)
    res |= {"dry_run": a.dry_run, "fsdp": a.fsdp, "size": "tiny" if a.dry_run else a.size}
    res |= {"sleep_level": a.sleep_level, "total_s": round(time.perf_counter() - t0, 1)}
    res["ok"] = bool(res["greedy_match"]) and res.get("stale_differs") is not False
    print(json.dumps(res))
    return 0 if res["ok"] else 1


if __name__ == "__main__":
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))
    sys.exit(main())
