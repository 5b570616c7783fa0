"""``evalkit synth --out DIR --split test --n 8 --seed 0``: generate the SynthVideo benchmark."""

from __future__ import annotations

import argparse
import time

DEFAULT_OUT = "~/.cache/evalkit/synthvideo"  # benchmarks/synthvideo.yaml's local_path


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Output folder, split, size, seed and frame geometry."""
    from evalkit.config import positive_int

    parser.add_argument(
        "--out", default=DEFAULT_OUT, help=f"output folder (default: {DEFAULT_OUT})"
    )
    parser.add_argument(
        "--split", choices=["train", "test", "both"], default="test", help="split to write"
    )
    parser.add_argument(
        "--n", type=positive_int, default=8, help="questions per family (default: 8)"
    )
    parser.add_argument("--seed", type=int, default=0, help="generation seed (default: 0)")
    parser.add_argument("--width", type=int, default=224, help="frame width in px (default 224)")
    parser.add_argument("--height", type=int, default=168, help="frame height in px (default 168)")
    from evalkit.config import finite_float

    parser.add_argument(
        "--fps", type=finite_float, default=4.0, help="video frame rate (default 4)"
    )
    parser.add_argument(
        "--families", help="comma-separated subset of families (default: all)", default=None
    )
    parser.add_argument(
        "--unified",
        action="store_true",
        help="also write synthvideo_<split>.unified.jsonl (EasyVideoR1 schema, for the trainer)",
    )


def run(args: argparse.Namespace) -> int:
    """Write the requested split(s); print where the annotation files went."""
    from evalkit.cli.checks import output_dir
    from evalkit.errors import ConfigError
    from evalkit.registry import RegistryError
    from evalkit.synthvideo import FAMILIES, generate, read_rows, write_unified

    out = output_dir(args.out, "--out")
    families = [f.strip() for f in args.families.split(",")] if args.families else list(FAMILIES)
    splits = ["train", "test"] if args.split == "both" else [args.split]
    for split in splits:
        t0 = time.perf_counter()
        try:
            ann = generate(
                out,
                args.n,
                split,
                args.seed,
                width=args.width,
                height=args.height,
                fps=args.fps,
                families=families,
            )
        except (ValueError, RegistryError) as exc:
            raise ConfigError(str(exc)) from None
        n = len(read_rows(ann))
        took = time.perf_counter() - t0
        print(
            f"SynthVideo {split}: {n} questions ({len(families)} families x {args.n}, "
            f"seed {args.seed}) in {took:.1f} s -> {ann}"
        )
        if args.unified:
            print(f"  unified schema -> {write_unified(ann)}")
    print(f"evaluate with: evalkit run --bench SynthVideo --data-root {out}")
    return 0
