"""``evalkit repro RUN --tolerance 1.0``: does each benchmark reproduce its reference?

Exit status: 0 when every benchmark with a matching reference is within tolerance, 1 on
any miss, when no benchmark had a reference for the model ("nothing checked": a CI job
that checks nothing must not pass) or, with ``--strict``, when any benchmark lacks one;
2 on bad input. A benchmark the run covered only in part (``--limit``, an unfinished run)
is named with its count (samples run / samples in the benchmark).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from rich.console import RenderableType

if TYPE_CHECKING:
    from evalkit.reports.model import RunReport


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The run, the tolerance, and how to name the model."""
    from evalkit.cli.checks import non_negative_float

    parser.add_argument("run", nargs="?", metavar="RUN", help="run directory (runs/<id>)")
    parser.add_argument("--run", dest="run_opt", metavar="RUN", help="same as RUN")
    parser.add_argument(
        "--tolerance",
        type=non_negative_float,
        default=1.0,
        help="points a score may differ by (default 1.0)",
    )
    parser.add_argument(
        "--model-name", help="name matched against reference entries (default: from --model)"
    )
    parser.add_argument(
        "--strict", action="store_true", help="a benchmark with no matching reference fails"
    )
    parser.add_argument(
        "--exclude-failed",
        action="store_true",
        help="leave failed samples out of the aggregate (default: they count as wrong)",
    )
    parser.add_argument("--json", metavar="FILE", help="also write the verdicts as JSON")


def run(args: argparse.Namespace) -> int:
    """Print the verdict table; name every miss on stderr; exit non-zero on a miss."""
    from rich.console import Console

    from evalkit.cli.checks import writable_file
    from evalkit.errors import ConfigError
    from evalkit.reports.load import load_run
    from evalkit.reports.reference import MATCH_RULE, verdicts
    from evalkit.textwidth import terminal_width, wrap

    path = args.run or args.run_opt
    if not path:
        raise ConfigError("give the run directory: evalkit repro runs/<id> --tolerance 1.0")
    if args.json:  # checked before the work, not after it
        writable_file(args.json, "--json")
    run_ = load_run(path, failed="exclude" if args.exclude_failed else "zero")
    results = verdicts(run_, args.tolerance, args.model_name)
    width = terminal_width()  # COLUMNS, the terminal, else 100 when piped
    console = Console(width=width)
    console.print(_verdict_table(run_, results, width))
    for line in wrap(f"tolerance ±{args.tolerance:g} points; matching: {MATCH_RULE}", width):
        console.print(line, markup=False, highlight=False)
    failing = [v for v in results if v.status in ("miss", "no score")]
    if args.strict:
        failing += [v for v in results if v.status == "no reference"]
    for v in results:
        if v.status == "no reference":
            print(f"no reference: {v.message}", file=sys.stderr)
    for v in failing:
        print(f"FAIL {v.status}: {v.message}", file=sys.stderr)
    for v in results:
        if v.partial:
            print(
                f"partial run: {v.benchmark} ran {v.samples_run} of its "
                f"{v.samples_in_benchmark} samples; its score is over that slice, the "
                "reference over the whole benchmark"
            )
    for v in results:  # the data a reference was measured on, where it says
        for said in dict.fromkeys(d for c in v.checks for d in c.settings_diff):
            if said.startswith("data commit"):
                print(f"data differs: {v.benchmark} read {said}")
    checked = [v for v in results if v.checks]
    ok = bool(checked) and not failing
    if args.json:
        doc = {
            "run": str(run_.path),
            "tolerance": args.tolerance,
            "ok": ok,
            "checked": len(checked),
            "verdicts": [v.to_dict() for v in results],
        }
        with open(args.json, "w") as f:
            json.dump(doc, f, indent=2)
    print(_verdict_line(run_, results, checked, failing, args.model_name))
    return 0 if ok else 1


def _verdict_line(
    run_: RunReport, results: list[Any], checked: list[Any], failing: list[Any], name: str | None
) -> str:
    """The last line: OK with what was checked, what failed, or that nothing was."""
    if failing:
        return f"repro: {len(failing)} benchmark(s) failed"
    if not checked:
        from evalkit.reports.reference import model_names

        names = " / ".join(model_names(run_.model, name))
        return (
            f"repro: nothing checked: no benchmark of the run has a reference for model "
            f"{names} (pass --model-name NAME if the checkpoint is a published model)"
        )
    said = [f"{len(checked)} benchmark(s) checked"]
    if len(checked) < len(results):
        said.append(f"{len(results) - len(checked)} without a reference")
    if sliced := [v for v in checked if v.partial]:
        said.append(f"{len(sliced)} on a slice of the benchmark")
    return f"repro: OK ({', '.join(said)})"


def _verdict_table(run_: RunReport, results: list[Any], width: int) -> RenderableType:
    """One row per (benchmark, reference metric); a benchmark without references gets one;
    within ``width`` columns, words never split."""
    from evalkit.textwidth import table

    headers = ["benchmark", "metric", "reference", "ours", "± se", "delta", "verdict",
               "settings differing from reference"]  # fmt: skip
    rows: list[list[str]] = []
    for v in results:
        if not v.checks:
            ours = _n(run_.benchmarks[v.benchmark].overall)
            rows.append([v.benchmark, "-", "-", ours, _n(v.stderr), "-", v.status, "-"])
        for c in v.checks:
            rows.append(
                [
                    v.benchmark,
                    c.metric,
                    f"{c.reference:g} ({c.model})",
                    _n(c.value),
                    _n(v.stderr) if c.metric == "overall" else "-",
                    _n(c.delta),
                    c.verdict,
                    ", ".join(c.settings_diff) or "none",
                ]
            )
    title = f"reproduction check: {run_.run_id} ({run_.model})"
    return table(headers, rows, width, title=title)


def _n(v: float | None) -> str:
    return "-" if v is None else f"{v:.2f}"
