"""``evalkit`` entry point: one module per subcommand, imported only when used."""

from __future__ import annotations

import argparse
import importlib
import sys

from evalkit.errors import EvalkitError

# name -> (module, one-line help). A module provides ``add_arguments(parser)`` and
# ``run(args) -> int``; it is imported only when its command runs.
COMMANDS: dict[str, tuple[str, str]] = {
    "cache": ("evalkit.cli.cache", "build, verify, list and prune the frame cache"),
    "model": ("evalkit.cli.model", "model utilities: build a tiny random Qwen-VL checkpoint"),
    "bench": ("evalkit.cli.bench", "list, show and validate the pinned benchmark specs"),
    "synth": ("evalkit.cli.synth", "generate the SynthVideo benchmark"),
    "run": ("evalkit.cli.run", "evaluate a model on benchmarks (async pipeline on vLLM)"),
    "report": ("evalkit.cli.report", "report runs: official scores, references, plots, A vs B"),
    "repro": ("evalkit.cli.repro", "check a run's scores against published references (CI)"),
    "score": ("evalkit.cli.score", "score predictions made elsewhere into a run directory"),
}


def _top_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(
        prog="evalkit",
        description="Evaluation-first toolkit for video language models.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n"
        + "\n".join(f"  {name:<10} {help_}" for name, (_, help_) in sorted(COMMANDS.items())),
    )
    p.add_argument("command", nargs="?", help="one of the commands below")
    return p


def main(argv: list[str] | None = None) -> int:
    """Parse the command name, import its module, run it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help") or argv[0] not in COMMANDS:
        parser = _top_parser()
        if argv and argv[0] not in ("-h", "--help"):
            parser.error(f"unknown command {argv[0]!r}")
        parser.print_help()
        return 0 if argv else 2
    name = argv[0]
    module = importlib.import_module(COMMANDS[name][0])
    parser = argparse.ArgumentParser(prog=f"evalkit {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    args = parser.parse_args(argv[1:])
    try:
        return int(module.run(args) or 0)
    except EvalkitError as exc:
        print(f"evalkit {name}: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print(f"evalkit {name}: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":
    sys.exit(main())
