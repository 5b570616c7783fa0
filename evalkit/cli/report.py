"""``evalkit report RUN [RUN ...]``: official scores, references, comparisons, plots."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from rich.console import Console


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Runs to report, outputs, and the knobs of the statistics."""
    from evalkit.cli.checks import non_negative_float, non_negative_int

    parser.add_argument(
        "runs",
        nargs="+",
        metavar="RUN",
        help="run directories (runs/<id>); each later run is compared with the first; a "
        "sweep directory (holding sweep.json) alone gives the sweep report, a watch directory "
        "(holding watch.json) its curve",
    )
    parser.add_argument(
        "--out", help="folder for report.md/.html/.json and plots/ (default: <first RUN>/report)"
    )
    parser.add_argument(
        "--format",
        default="table,md,html,json",
        help="comma-separated subset of table,md,html,json (default: %(default)s)",
    )
    parser.add_argument(
        "--tolerance", type=non_negative_float, default=1.0, help="points a reference may differ by"
    )
    parser.add_argument(
        "--model-name", help="name matched against reference entries (default: from --model)"
    )
    parser.add_argument(
        "--exclude-failed",
        action="store_true",
        help="leave failed samples out of the aggregate (default: they count as wrong)",
    )
    parser.add_argument(
        "--bootstrap",
        type=non_negative_int,
        default=1000,
        help="bootstrap resamples (default: %(default)s)",
    )
    parser.add_argument("--seed", type=int, default=0, help="bootstrap seed")


def run(args: argparse.Namespace) -> int:
    """Build the report, print/write the requested formats, list the files written."""
    from evalkit.cli.checks import output_dir
    from evalkit.errors import ConfigError
    from evalkit.reports import FORMATS, build_report, write_report

    formats = [f.strip() for f in args.format.split(",") if f.strip()]
    bad = [f for f in formats if f not in FORMATS]
    if bad:
        raise ConfigError(f"--format: unknown {', '.join(bad)}; choose from {', '.join(FORMATS)}")
    if args.out:
        output_dir(args.out, "--out")
    if len(args.runs) == 1 and (Path(args.runs[0]) / "sweep.json").is_file():
        return _sweep(args, formats)
    if len(args.runs) == 1 and (Path(args.runs[0]) / "watch.json").is_file():
        return _watch(args)
    report = build_report(
        args.runs,
        tolerance=args.tolerance,
        model_name=args.model_name,
        failed="exclude" if args.exclude_failed else "zero",
        bootstrap=args.bootstrap,
        seed=args.seed,
    )
    files = write_report(report, _out(args), formats, _console())
    return _written(files)


def _sweep(args: argparse.Namespace, formats: list[str]) -> int:
    """A sweep directory: each benchmark's score against the sweep's settings."""
    from evalkit.reports.sweep import load_sweep, write_sweep_report

    report = load_sweep(
        args.runs[0],
        bootstrap=args.bootstrap,
        seed=args.seed,
        tolerance=args.tolerance,
        model_name=args.model_name,
        failed="exclude" if args.exclude_failed else "zero",
    )
    files = write_sweep_report(report, _out(args), formats, _console())
    return _written(files)


def _watch(args: argparse.Namespace) -> int:
    """A watch directory: each benchmark's score against the training step (its runs are
    ordinary runs: ``evalkit report WATCH/step-N`` reports one)."""
    from evalkit.reports.curve import sections, write_page
    from evalkit.reports.render import to_terminal

    path = Path(args.runs[0])
    to_terminal(sections(path, figures=False), _console())
    print(f"html: {write_page(path)}")
    return 0


def _out(args: argparse.Namespace) -> Path:
    return Path(args.out) if args.out else Path(args.runs[0]) / "report"


def _console() -> Console:
    from rich.console import Console

    from evalkit.textwidth import terminal_width

    return Console(width=terminal_width())


def _written(files: dict[str, Path]) -> int:
    """Name the files written (the terminal form was printed already); exit 0."""
    for kind in ("md", "html", "json"):
        if kind in files:
            print(f"{kind}: {files[kind]}")
    return 0
