"""``evalkit bench list | show NAME | validate NAME --root DIR``: the pinned benchmark specs."""

from __future__ import annotations

import argparse
import json
import sys

from evalkit.bench.registry import registry
from evalkit.bench.spec import BenchmarkSpec


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Subcommands list, show and validate."""
    sub = parser.add_subparsers(dest="action", required=True)
    ls = sub.add_parser("list", help="every shipped benchmark with its pinned settings")
    ls.add_argument("--root", help="folder holding one sub-folder per benchmark (counts samples)")
    show = sub.add_parser("show", help="the full spec of one benchmark (YAML-like JSON)")
    show.add_argument("name", help="benchmark name or alias, optionally NAME:VARIANT")
    val = sub.add_parser("validate", help="check a local copy: files, fields, videos")
    val.add_argument("name", help="benchmark name or alias, optionally NAME:VARIANT")
    val.add_argument("--root", required=True, help="the downloaded official release")
    val.add_argument("--decode", action="store_true", help="also decode every video")
    val.add_argument("--max-problems", type=int, default=50, help="problems printed (all counted)")


def _count(spec: BenchmarkSpec, root: str | None) -> str:
    if not root:
        return "-"
    from pathlib import Path

    from evalkit.bench.loader import validate

    for cand in (Path(root) / spec.name, Path(root) / spec.key):
        if cand.is_dir():
            return str(len(validate(spec, cand).samples))
    return "-"


def _list(args: argparse.Namespace) -> int:
    from rich.console import Console
    from rich.table import Table

    table = Table(title="benchmarks")
    for col in (
        "name",
        "task types",
        "samples",
        "fps",
        "max_frames",
        "max_pixels",
        "aggregation",
        "variants",
    ):
        table.add_column(col)
    for spec in registry().specs():
        f = spec.frames
        table.add_row(
            spec.name,
            ", ".join(spec.task_types),
            _count(spec, args.root),
            f"{f.nframes} frames" if f.nframes else f"{f.fps:g}",
            str(f.max_frames),
            str(f.max_pixels),
            spec.aggregation.name,
            ", ".join(sorted(spec.variants)) or "-",
        )
    # Piped output (logs, tests) is not cut to 80 columns.
    Console(width=None if sys.stdout.isatty() else 200).print(table)
    return 0


def _show(args: argparse.Namespace) -> int:
    spec = registry().get(args.name)
    print(json.dumps(spec.model_dump(mode="json", exclude={"variants"}), indent=2))
    if spec.variants:
        print(f"variants: {', '.join(sorted(spec.variants))}")
    return 0


def _validate(args: argparse.Namespace) -> int:
    from evalkit.bench.loader import validate

    spec = registry().get(args.name)
    report = validate(spec, args.root, decode=args.decode)
    print(f"{spec.name}: {len(report.samples)} samples loaded from {args.root}")
    if report.ok:
        print("no problems found")
        return 0
    print(f"{len(report.problems)} problem(s):")
    for p in report.problems[: args.max_problems]:
        print(f"  {p}")
    if len(report.problems) > args.max_problems:
        print(f"  ... and {len(report.problems) - args.max_problems} more")
    print(f"expected layout:\n{spec.layout}")
    return 1


def run(args: argparse.Namespace) -> int:
    """Dispatch to the chosen action."""
    return {"list": _list, "show": _show, "validate": _validate}[args.action](args)
