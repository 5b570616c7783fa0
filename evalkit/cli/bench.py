"""``evalkit bench list | show NAME | validate NAME --root DIR``: the pinned benchmark specs."""

from __future__ import annotations

import argparse
import json
import os
import sys
from pathlib import Path
from typing import Any

from evalkit.bench.registry import registry
from evalkit.bench.spec import BenchmarkSpec
from evalkit.cli.checks import existing_dir, existing_file, non_negative_int
from evalkit.errors import ConfigError


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Subcommands list, show and validate."""
    sub = parser.add_subparsers(dest="action", required=True)
    ls = sub.add_parser("list", help="every shipped benchmark with its pinned settings")
    ls.add_argument("--root", help="folder holding one sub-folder per benchmark (counts samples)")
    show = sub.add_parser("show", help="the full spec of one benchmark (YAML-like JSON)")
    show.add_argument("name", help="benchmark name or alias, optionally NAME:VARIANT")
    val = sub.add_parser(
        "validate", help="check a local copy (NAME --root DIR) or a unified file (--data FILE)"
    )
    val.add_argument("name", nargs="?", help="benchmark name or alias, optionally NAME:VARIANT")
    val.add_argument("--root", help="the downloaded official release (with NAME)")
    val.add_argument("--data", help="a unified JSON/JSONL file, as `evalkit run --data` reads it")
    val.add_argument("--video-root", help="where --data's media paths live (default: its folder)")
    val.add_argument("--decode", action="store_true", help="also decode every video")
    val.add_argument("--json", action="store_true", help="print the counts and reasons as JSON")
    val.add_argument(
        "--max-problems", type=non_negative_int, default=50, help="problems printed (all counted)"
    )


def _count(spec: BenchmarkSpec, root: str | None) -> str:
    if not root:
        return "-"
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
    reg = registry()
    if not len(reg):
        # an empty table would read as "evalkit ships no benchmarks"; it is a broken install
        raise ConfigError(
            f"no benchmark specs (*.yaml) in {reg.folder}; reinstall evalkit, or point "
            "EVALKIT_BENCHMARKS at a folder of specs"
        )
    for spec in reg.specs():
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
    for kind, rule in headline_rules(spec).items():
        print(f"headline rule ({kind}): {rule.name} - {rule.source}")
    return 0


def headline_rules(spec: BenchmarkSpec) -> dict[str, Any]:
    """Task type -> the registered rule whose verdicts make the headline number."""
    from evalkit import tasks
    from evalkit.scoring.rules import get_rule

    kinds = [tasks.canonical(t) for t in spec.task_types]
    return {k: get_rule(spec.headline_rule(k), k) for k in kinds}


def _validate(args: argparse.Namespace) -> int:
    if args.data:
        if args.name or args.root:
            raise ConfigError("give NAME --root DIR or --data FILE, not both")
        existing_file(args.data, "--data")
        return _validate_data(args)
    if not (args.name and args.root):
        raise ConfigError("give NAME --root DIR, or --data FILE")
    from evalkit.bench.loader import validate

    spec = registry().get(args.name)
    existing_dir(args.root, "--root")
    report = validate(spec, args.root, decode=args.decode)
    invalid = [p for p in report.problems if p.level == "error"]
    counts = {
        "rows": report.rows,
        "valid": len(report.samples),
        "invalid": len(invalid),
        "warnings": len(report.problems) - len(invalid),
        "skipped": report.skipped,
    }
    if args.json:
        reasons = [p.to_dict() for p in report.problems]
        print(json.dumps({"benchmark": spec.name, **counts, "reasons": reasons}, indent=2))
        return 0 if report.ok else 1
    print(f"{spec.name}: {len(report.samples)} samples loaded from {args.root}")
    print(_counts_line(counts))
    _print_problems(report.problems, args.max_problems)
    if report.ok:
        print("no problems found" if not report.problems else "no invalid rows")
        return 0
    print(f"expected layout:\n{spec.layout}")
    return 1


def _counts_line(c: dict[str, int]) -> str:
    return (
        f"{c['rows']} rows: {c['valid']} valid, {c['invalid']} invalid, "
        f"{c['warnings']} loaded with a warning, {c['skipped']} skipped by the adapter"
    )


def _print_problems(problems: list[Any], limit: int) -> None:
    if not problems:
        return
    print(f"{len(problems)} problem(s):")
    for p in problems[:limit]:
        print(f"  {p}")
    if len(problems) > limit:
        print(f"  ... and {len(problems) - limit} more")


def _validate_data(args: argparse.Namespace) -> int:
    from evalkit.bench.unified_known import load_data

    data = load_data(args.data, args.video_root)
    summary = data.loaded.summary()
    benches = [{"name": b.name, **b.info(Path(args.data))} for b in data.benches]
    missing = _missing_media(data, args)
    if args.json:
        media = {"missing_media": [_missing_json(m) for m in missing]}
        print(json.dumps({"file": args.data, **summary, "benchmarks": benches, **media}, indent=2))
    else:
        print(f"{args.data}: {_counts_line(summary)}")
        for b in benches:
            print(f"  {b['name']}: {b['valid']} samples; {b['note']}")
        _print_problems(data.loaded.problems, args.max_problems)
        if missing:
            from evalkit.preflight import describe_missing

            print(f"missing media, as `evalkit run` would refuse them: {describe_missing(missing)}")
    return 1 if summary["invalid"] or missing else 0


def _missing_media(data: Any, args: argparse.Namespace) -> list[Any]:
    """The samples whose media are not on disk, by the run's own preflight check."""
    from evalkit.preflight import missing_media

    root = args.video_root or str(Path(args.data).parent)
    found = [missing_media(b.name, b.samples, root) for b in data.benches]
    return [m for m in found if m.samples]


def _missing_json(m: Any) -> dict[str, Any]:
    return {
        "benchmark": m.benchmark,
        "samples": len(m.samples),
        "of": m.total,
        "searched": os.path.abspath(m.searched),
        "paths": [os.path.abspath(p) for p in m.paths],
    }


def run(args: argparse.Namespace) -> int:
    """Dispatch to the chosen action."""
    return {"list": _list, "show": _show, "validate": _validate}[args.action](args)
