"""Padded vs padding-free (packed) log-prob passes of the actor, side by side (CPU).

Both arms score the same batch with the trainer's own code: ``compute_logprobs`` (old /
reference log-probs, no gradient) and one update forward + backward
(``logprobs_and_entropy`` with gradient), on the tiny random Qwen2.5-VL
(``evalkit.tiny_checkpoint``). The batch mixes video, video + image, image and text prompts
whose responses range from a few tokens to ``--max-response`` (rollouts are ragged: most
rows carry padding up to the longest). The arms alternate repeat by repeat; figures are
medians; ratios are padded / packed. Also printed: tokens the model runs over in each arm
(padded B x L vs the sum of sequence lengths), the largest logits tensor each arm
allocates (floats), and the largest |difference| of the two arms' log-probs.

The tiny model's vocabulary and layers are small, so times mostly follow token counts;
beside a 7B model the logits memory (B x T x V floats vs chunk x V) is the larger gain.
On CPU, sdpa runs the packed row against a dense (N, N) block-diagonal mask: the blocks
between sequences are computed and masked, so attention costs N^2 for the packed row
(flash-attention's varlen kernel on GPU skips them); the update pass also recomputes each
logits chunk in backward. Both can make the packed arm slower here: read the figures so.

Prints ONE JSON object on stdout.

    python perf/packing.py [--quick] [--repeats 5] [--max-response 256]
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
os.environ.setdefault("HF_HUB_OFFLINE", "1")

from evalkit.engines.base import Request
from evalkit.trainer.actor import ActorPolicy
from evalkit.trainer.batch import Group, Response, TrainBatch, collate
from evalkit.trainer.entropy import logprobs_and_entropy
from evalkit.trainer.step import compute_logprobs
from evalkit.video.types import Frames, VideoMeta

H, W = 56, 84  # on Qwen2.5-VL's 28-pixel merge grid


def _video(seed: int, frames: int) -> Frames:
    meta = VideoMeta(
        source_fps=2.0,
        total_frames=frames,
        duration_s=frames / 2,
        indices=list(range(frames)),
        timestamps=[i / 2 for i in range(frames)],
        height=H,
        width=W,
        source_height=H,
        source_width=W,
        decoder="synthetic",
    )
    pixels = np.random.default_rng(seed).integers(0, 255, (frames, H, W, 3), dtype=np.uint8)
    return Frames(pixels, meta)


def _batch(actor: ActorPolicy, n: int, max_response: int) -> TrainBatch:
    image = np.random.default_rng(0).integers(0, 255, (H, W, 3), dtype=np.uint8)
    requests = [
        Request(id="video", text="What moves?", videos=[_video(1, 8)]),
        Request(id="both", text="Count.", videos=[_video(2, 4)], images=[image]),
        Request(id="image", text="Colour?", images=[image]),
        Request(id="text", text="Say yes."),
    ]
    encoded = [actor.encode(r) for r in requests]
    rng = np.random.default_rng(0)
    groups = []
    for g, enc in enumerate(encoded):
        lengths = rng.integers(4, max_response // 4, n)  # most responses short ...
        lengths[0] = max_response if g == 0 else lengths[0]  # ... one runs to the limit
        responses = [Response(rng.integers(100, 400, int(k)).tolist()) for k in lengths]
        groups.append(Group(g, enc.prompt_ids, responses))
    actor.set_rows([enc for enc in encoded for _ in range(n)])
    return collate(groups, pad_id=0)


def _timed(fn: Any) -> tuple[float, Any]:
    start = time.perf_counter()
    out = fn()
    return time.perf_counter() - start, out


def _update(actor: ActorPolicy, batch: TrainBatch, mbs: int) -> None:
    actor.zero_grad(set_to_none=True)
    for start in range(0, len(batch), mbs):
        mb = batch.select(slice(start, start + mbs))
        logp, _ = logprobs_and_entropy(actor, mb, 1.0, entropy_grad=False)
        (logp * mb.response_mask).sum().backward()


def main(argv: list[str] | None = None) -> dict[str, Any]:
    """Run both arms and print the JSON figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--quick", action="store_true", help="2 repeats, short responses")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--max-response", type=int, default=256)
    ap.add_argument("--n", type=int, default=4, help="responses per prompt")
    args = ap.parse_args(argv)
    repeats, max_response = (2, 64) if args.quick else (args.repeats, args.max_response)
    from evalkit.tiny_checkpoint import build_tiny_model

    torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
    with tempfile.TemporaryDirectory() as tmp:
        actor = ActorPolicy.from_pretrained(build_tiny_model(Path(tmp) / "m", "qwen2_5_vl", 0))
    batch = _batch(actor, args.n, max_response)
    mbs = len(batch) // 2
    times: dict[str, dict[str, list[float]]] = {a: {"logprob": [], "update": []} for a in "PF"}
    logps: dict[str, torch.Tensor] = {}
    for _ in range(repeats):
        for arm in "PF":  # P: padded, F: padding-free
            actor.padding_free = arm == "F"
            seconds, logps[arm] = _timed(lambda: compute_logprobs(actor, batch, mbs))
            times[arm]["logprob"].append(seconds)
            times[arm]["update"].append(_timed(lambda: _update(actor, batch, mbs))[0])
    med = {a: {k: statistics.median(v) for k, v in t.items()} for a, t in times.items()}
    vocab = int(actor.model.get_output_embeddings().weight.shape[0])
    mask = batch.response_mask.bool()
    figures = {
        "rows": len(batch),
        "micro_batch_rows": mbs,
        "padded_tokens": int(batch.input_ids.numel()),
        "packed_tokens": int(batch.attention_mask.sum()),
        "padded_logprob_s": med["P"]["logprob"],
        "packed_logprob_s": med["F"]["logprob"],
        "logprob_speedup_ratio": med["P"]["logprob"] / med["F"]["logprob"],
        "padded_update_s": med["P"]["update"],
        "packed_update_s": med["F"]["update"],
        "update_speedup_ratio": med["P"]["update"] / med["F"]["update"],
        "padded_logit_floats": mbs * batch.input_ids.shape[1] * vocab,
        "packed_logit_floats": min(actor.logprob_chunk_tokens, int(mask.sum())) * vocab,
        "max_abs_logprob_diff": float((logps["P"][mask] - logps["F"][mask]).abs().max()),
        "repeats": repeats,
    }
    figures["token_ratio"] = figures["padded_tokens"] / figures["packed_tokens"]
    print(json.dumps(figures, indent=1))
    return figures


if __name__ == "__main__":
    main()
