"""A fake training loop for ``evalkit watch``'s tests: it writes checkpoints of a tiny model
with changed weights into a folder, some atomically (written under a temporary name, then
renamed into place, as TRL and evalkit's trainer do) and some in place, slowly (config
first, then the weights in pieces, as a plain ``save_pretrained`` into the final folder
does), so a watcher that read too early would load half a file.

``python _fake_training.py BASE OUT STEP:MODE ... [--every S] [--piece-s S]``: one
``checkpoint-STEP`` per argument (MODE ``atomic`` or ``inplace``), ``--every`` seconds
apart; the weights are BASE's plus noise seeded by the step.
"""

from __future__ import annotations

import argparse
import shutil
import time
from pathlib import Path


def changed_weights(base: Path, step: int) -> bytes:
    """BASE's weights plus noise seeded by ``step``, as safetensors bytes."""
    import torch
    from safetensors.torch import load_file, save

    state = load_file(str(base / "model.safetensors"))
    g = torch.Generator().manual_seed(step)
    out = {}
    for name, t in state.items():
        if t.is_floating_point() and t.ndim >= 2:
            noise = torch.randn(t.shape, generator=g) * t.float().std() * 0.5
            t = (t.float() + noise).to(t.dtype)
        out[name] = t.contiguous()
    return save(out, metadata={"format": "pt"})


def write(base: Path, out: Path, step: int, mode: str, piece_s: float) -> None:
    """Write ``checkpoint-STEP`` into ``out``."""
    data = changed_weights(base, step)
    final = out / f"checkpoint-{step}"
    target = out / f".tmp-checkpoint-{step}" if mode == "atomic" else final
    target.mkdir(parents=True)
    for f in base.iterdir():  # config, tokenizer, processor: as the base has them
        if f.is_file() and not f.name.endswith(".safetensors"):
            shutil.copy2(f, target / f.name)
    with open(target / "model.safetensors", "wb") as fh:
        pieces = 4 if mode == "inplace" else 1
        size = -(-len(data) // pieces)
        for i in range(pieces):
            fh.write(data[i * size : (i + 1) * size])
            fh.flush()
            if mode == "inplace" and i < pieces - 1:
                time.sleep(piece_s)
    if mode == "atomic":
        target.rename(final)


def main() -> None:
    p = argparse.ArgumentParser()
    p.add_argument("base", type=Path)
    p.add_argument("out", type=Path)
    p.add_argument("plan", nargs="+", help="STEP:MODE")
    p.add_argument("--every", type=float, default=2.0)
    p.add_argument("--piece-s", type=float, default=0.8)
    args = p.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    for item in args.plan:
        time.sleep(args.every)
        step, mode = item.split(":")
        write(args.base, args.out, int(step), mode, args.piece_s)
        print(f"wrote checkpoint-{step} ({mode})", flush=True)


if __name__ == "__main__":
    main()
