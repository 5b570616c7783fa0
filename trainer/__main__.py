"""``python -m evalkit.trainer train --config NAME|X.yaml key=value ...``, ``configs``,
``filter``, ``export``."""

from __future__ import annotations

import argparse
import logging
import sys
from pathlib import Path


def _train(args: argparse.Namespace) -> int:
    from .config import find_config, load_config
    from .recipe import GRPORecipe

    path = find_config(args.config) if args.config is not None else None
    cfg = load_config(path, args.overrides)
    recipe = GRPORecipe(cfg)
    if cfg.distributed.workers > 0:  # the actor update on a Ray worker group
        from .distributed.recipe import DistributedGRPORecipe

        recipe = DistributedGRPORecipe(cfg)
    recipe.setup(resume=not args.no_resume)
    try:
        recipe.run()
    finally:
        recipe.cleanup()
    print(f"metrics: {recipe.metrics.path}")
    return 0


def _about(path: Path, width: int = 72) -> str:
    """The first sentence of a config's leading comment, cut to ``width`` characters."""
    head = []
    for line in path.read_text(encoding="utf-8").splitlines():
        if not line.startswith("#"):
            break
        head.append(line.lstrip("#").strip())
    text = " ".join(head)
    cut = min((i for i in (text.find(". "), text.find(": ")) if i > 0), default=len(text))
    text = text[:cut].rstrip(".")
    return text if len(text) <= width else text[: width - 3].rsplit(" ", 1)[0] + "..."


def _configs(args: argparse.Namespace) -> int:
    from .config import shipped_configs

    for name, path in shipped_configs().items():
        print(f"{name:<28} {_about(path)}")
    print("run one with: python -m evalkit.trainer train --config NAME [key=value ...]")
    return 0


def _filter(args: argparse.Namespace) -> int:
    from .filter import run_filter

    run_filter(
        args.data,
        args.model,
        args.k,
        args.out,
        engine=args.engine,
        temperature=args.temperature,
        max_tokens=args.max_tokens,
        video_root=args.video_root,
        cache_root=args.cache_root,
        concurrency=args.concurrency,
    )
    return 0


def _export(args: argparse.Namespace) -> int:
    from .export import export_checkpoint

    out = export_checkpoint(args.checkpoint, args.out, model=args.model, dtype=args.dtype)
    print(f"exported: {out} (evaluate with: evalkit run --model {out} ...)")
    return 0


def build_parser() -> argparse.ArgumentParser:
    from evalkit.config import finite_float

    """The trainer's command line."""
    parser = argparse.ArgumentParser(prog="python -m evalkit.trainer", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True)
    train = sub.add_parser("train", help="RL post-training (GRPO family)")
    train.add_argument(
        "--config", default=None, help="a YAML file, or a shipped config's name (see: configs)"
    )
    train.add_argument("--no-resume", action="store_true", help="ignore existing checkpoints")
    train.add_argument("overrides", nargs="*", help="key=value overrides, e.g. rollout.n=4")
    train.set_defaults(func=_train)
    configs = sub.add_parser("configs", help="list the shipped configs (--config NAME)")
    configs.set_defaults(func=_configs)
    filt = sub.add_parser("filter", help="keep items with 0 < pass rate < 1 over k samples")
    filt.add_argument("--data", required=True, help="unified JSONL of training items")
    filt.add_argument("--model", required=True, help="checkpoint directory")
    filt.add_argument("--k", type=int, default=8, help="samples per item")
    filt.add_argument("--out", required=True, help="where the kept items go (JSONL)")
    filt.add_argument("--engine", default="hf", help="evalkit engine (hf, vllm)")
    filt.add_argument("--temperature", type=finite_float, default=1.0, help="sampling temperature")
    filt.add_argument("--max-tokens", type=int, default=256, help="response budget")
    filt.add_argument("--video-root", default=None, help="media folder (default: data's)")
    filt.add_argument("--cache-root", default=None, help="frame cache folder")
    filt.add_argument("--concurrency", type=int, default=8, help="requests in flight")
    filt.set_defaults(func=_filter)
    exp = sub.add_parser("export", help="a checkpoint as a HF model directory (evalkit run)")
    exp.add_argument("checkpoint", help="a step_* directory, or a checkpoint folder (newest)")
    exp.add_argument("out", help="new (or empty) output directory")
    exp.add_argument("--model", default=None, help="base model (default: the run's, from meta)")
    exp.add_argument("--dtype", default=None, help="cast the weights (e.g. bfloat16)")
    exp.set_defaults(func=_export)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Entry point; errors from evalkit are printed for people, not as tracebacks."""
    from evalkit.errors import EvalkitError

    logging.basicConfig(level=logging.INFO, format="%(levelname)s %(name)s: %(message)s")
    from evalkit.engines.lifecycle import Termination

    args = build_parser().parse_args(argv)
    # SIGTERM unwinds like Ctrl-C: engines close, weight-sync segments are unlinked
    term = Termination()
    try:
        with term:
            return int(args.func(args))
    except EvalkitError as exc:
        if term.signum is None:
            print(f"error: {exc}", file=sys.stderr)
            return 2
    except KeyboardInterrupt:
        pass
    print(f"trainer: stopped by signal {term.signum or 2}", file=sys.stderr)
    return term.exit_code


if __name__ == "__main__":
    sys.exit(main())
