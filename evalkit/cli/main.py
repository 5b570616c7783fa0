"""``evalkit`` entry point: one module per subcommand, imported only when used.

A bad invocation (a flag, a file, a value) ends in ONE line on stderr that names the
argument or file and what to do, and exit status 2; never a traceback, a page of usage,
or a half-made run directory.
"""

from __future__ import annotations

import argparse
import importlib
import signal
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, NoReturn

from evalkit.errors import EvalkitError, Terminated, disk_error

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

# Errors of the standard library that carry the path a person gave: said in one line.
_PATH_ERRORS = (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)


class Parser(argparse.ArgumentParser):
    """argparse with no abbreviated flags (``--max-token`` is not ``--max-tokens``) and
    one-line errors; sub-parsers inherit both (``add_subparsers`` uses this class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)

    def error(self, message: str) -> NoReturn:
        """One line naming the argument, then exit 2 (the usage is one --help away)."""
        self.exit(2, f"{self.prog}: error: {message} (see `{self.prog} --help`)\n")


def _top_parser() -> Parser:
    p = Parser(
        prog="evalkit",
        description="Evaluation-first toolkit for video language models.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n"
        + "\n".join(f"  {name:<10} {help_}" for name, (_, help_) in sorted(COMMANDS.items())),
    )
    p.add_argument("command", nargs="?", help="one of the commands below")
    return p


def command_parser(name: str) -> Parser:
    """The parser of ``evalkit NAME`` with its module's flags (tests parse with it too)."""
    module = importlib.import_module(COMMANDS[name][0])
    parser = Parser(prog=f"evalkit {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the command name, import its module, run it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        _top_parser().print_help()
        return 0 if argv else 2
    name = argv[0]
    if name not in COMMANDS:
        _top_parser().error(f"unknown command {name!r}; choose from {', '.join(sorted(COMMANDS))}")
    args = command_parser(name).parse_args(argv[1:])
    module = importlib.import_module(COMMANDS[name][0])
    try:
        with _sigterm_interrupts():
            return int(module.run(args) or 0)
    except EvalkitError as exc:
        return _fail(name, str(exc))
    except _PATH_ERRORS as exc:
        where = exc.filename if exc.filename is not None else "?"
        if (disk := disk_error(exc, where, then="run it again")) is not None:
            return _fail(name, str(disk))
        return _fail(name, f"{where}: {exc.strerror or exc}")
    except OSError as exc:  # a full or read-only disk under any writer: one line too
        where = exc.filename if exc.filename is not None else "?"
        if (disk := disk_error(exc, where, then="run it again")) is None:
            raise
        return _fail(name, str(disk))
    except Terminated:
        print(f"evalkit {name}: terminated (SIGTERM)", file=sys.stderr)
        return 143
    except KeyboardInterrupt:
        print(f"evalkit {name}: interrupted", file=sys.stderr)
        return 130


def _fail(name: str, message: str) -> int:
    # One line: a message that spans lines (a layout, a list) is joined, never cut.
    line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"evalkit {name}: error: {line}", file=sys.stderr)
    return 2


@contextmanager
def _sigterm_interrupts() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so that ``finally`` blocks close engines and release
    their shared memory (the default action ends the process on the spot)."""

    def _raise(signum: int, frame: object) -> None:
        raise Terminated()

    try:
        previous = signal.signal(signal.SIGTERM, _raise)
    except ValueError:  # not the main thread (an embedding application): leave it alone
        yield
        return
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


if __name__ == "__main__":
    sys.exit(main())
