"""``evalkit model``: model utilities (``tiny``: build a tiny random checkpoint of a family;
``fetch``: a model from the Hub into the local cache, as ``--model org/name`` loads it)."""

from __future__ import annotations

import argparse
import time


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Subcommands: ``tiny``."""
    from evalkit.tiny_checkpoint import FAMILIES  # no torch at import

    sub = parser.add_subparsers(dest="action", required=True)
    tiny = sub.add_parser("tiny", help="build a tiny random checkpoint of a family, offline")
    tiny.add_argument("out", help="output directory")
    tiny.add_argument(
        "--family",
        choices=list(FAMILIES),
        default="qwen2_5_vl",
        help="model family (default qwen2_5_vl; `evalkit models` lists them all)",
    )
    tiny.add_argument("--seed", type=int, default=0, help="weight seed (same seed, same bytes)")
    fetch = sub.add_parser(
        "fetch",
        help="fetch a model from the Hugging Face Hub into its cache (what --model ID loads)",
    )
    fetch.add_argument("model", help="hub id org/name[@revision]")


def run(args: argparse.Namespace) -> int:
    """Build the requested model, or fetch one."""
    if args.action == "fetch":
        from evalkit.hub.models import model_from_hub

        found = model_from_hub(args.model)
        print(f"{args.model}: {found.repo_id}@{found.commit[:12]} in {found.path}")
        return 0
    from evalkit.cli.checks import output_dir
    from evalkit.tiny_checkpoint import build_tiny_model

    output_dir(args.out, "OUT")
    t0 = time.time()
    out = build_tiny_model(args.out, family=args.family, seed=args.seed)
    print(f"built tiny {args.family} (seed {args.seed}) in {out} in {time.time() - t0:.1f}s")
    return 0
