"""``evalkit`` entry point: one module per subcommand, imported only when used.

A bad invocation (a flag, a file, a value) ends in ONE line on stderr that names the
argument or file and what to do, and exit status 2; never a traceback, a page of usage,
or a half-made run directory.
"""

from __future__ import annotations

import argparse
import contextlib
import importlib
import os
import sys
import warnings
from collections.abc import Iterator
from typing import Any, NoReturn, TextIO

from evalkit.engines.lifecycle import Termination, end_children
from evalkit.errors import EvalkitError, disk_error

# name -> (module, one-line help). A module provides ``add_arguments(parser)`` and
# ``run(args) -> int``; it is imported only when its command runs.
COMMANDS: dict[str, tuple[str, str]] = {
    "cache": ("evalkit.cli.cache", "build, verify, list and prune the frame cache"),
    "model": ("evalkit.cli.model", "model utilities: a tiny random checkpoint of a family, fetch"),
    "models": ("evalkit.cli.models", "the model families evalkit feeds, with reference settings"),
    "bench": ("evalkit.cli.bench", "list, show and validate the pinned benchmark specs"),
    "synth": ("evalkit.cli.synth", "generate the SynthVideo benchmark"),
    "run": ("evalkit.cli.run", "evaluate a model on benchmarks (async pipeline on vLLM)"),
    "sweep": ("evalkit.cli.sweep", "run a grid of settings: one run each, one engine, one decode"),
    "report": ("evalkit.cli.report", "report runs: official scores, references, plots, A vs B"),
    "repro": ("evalkit.cli.repro", "check a run's scores against published references (CI)"),
    "score": ("evalkit.cli.score", "score predictions made elsewhere into a run directory"),
    "watch": ("evalkit.cli.watch", "evaluate a training run's checkpoints as they appear"),
}

# Errors of the standard library that carry the path a person gave: said in one line.
_PATH_ERRORS = (FileNotFoundError, NotADirectoryError, IsADirectoryError, PermissionError)


class Parser(argparse.ArgumentParser):
    """argparse with no abbreviated flags (``--max-token`` is not ``--max-tokens``) and
    one-line errors; sub-parsers inherit both (``add_subparsers`` uses this class)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        kwargs["allow_abbrev"] = False
        super().__init__(*args, **kwargs)
        self.foreign_flags: dict[str, str] = {}
        """Other tools' flags (lmms-eval's ``--tasks``) -> what to type here instead."""

    def error(self, message: str) -> NoReturn:
        """One line naming the argument, then exit 2 (the usage is one --help away)."""
        hint = self._foreign_hint(message)
        self.exit(2, f"{self.prog}: error: {hint or message} (see `{self.prog} --help`)\n")

    def _foreign_hint(self, message: str) -> str | None:
        """For unrecognised flags that another tool has, what evalkit's flag is."""
        if not message.startswith("unrecognized arguments:"):
            return None
        words = [w.partition("=")[0] for w in message.split(":", 1)[1].split()]
        flags = list(dict.fromkeys(w for w in words if w.startswith("-")))
        known = [f for f in flags if f in self.foreign_flags]
        if not known:
            return None
        said = "; ".join(f"{f} -> {self.foreign_flags[f]}" for f in known)
        others = [f for f in flags if f not in self.foreign_flags]
        rest = f"; also unrecognized: {', '.join(others)}" if others else ""
        return (
            f"lmms-eval / VLMEvalKit flag(s), not {self.prog}'s: {said}{rest} "
            "(README: 'Coming from lmms-eval')"
        )


def _top_parser() -> Parser:
    p = Parser(
        prog="evalkit",
        description="Evaluation-first toolkit for video language models.",
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog="commands:\n"
        + "\n".join(f"  {name:<10} {help_}" for name, (_, help_) in sorted(COMMANDS.items())),
    )
    p.add_argument("command", nargs="?", help="one of the commands below")
    p.add_argument("--version", action="store_true", help="print evalkit's version and exit")
    return p


def command_parser(name: str) -> Parser:
    """The parser of ``evalkit NAME`` with its module's flags (tests parse with it too)."""
    module = importlib.import_module(COMMANDS[name][0])
    parser = Parser(prog=f"evalkit {name}", description=COMMANDS[name][1])
    module.add_arguments(parser)
    parser.foreign_flags = dict(getattr(module, "FOREIGN_FLAGS", {}))
    return parser


def main(argv: list[str] | None = None) -> int:
    """Parse the command name, import its module, run it."""
    argv = list(sys.argv[1:] if argv is None else argv)
    if not argv or argv[0] in ("-h", "--help"):
        _top_parser().print_help()
        return 0 if argv else 2
    if argv[0] in ("--version", "-V"):
        from evalkit import __version__

        print(f"evalkit {__version__}")
        return 0
    name = argv[0]
    if name not in COMMANDS:
        _top_parser().error(f"unknown command {name!r}; choose from {', '.join(sorted(COMMANDS))}")
    with _plugin_warnings(name):
        return _command(name, argv[1:])


@contextlib.contextmanager
def _plugin_warnings(name: str) -> Iterator[None]:
    """A plug-in skipped (``evalkit.plugins``) is one line, ``evalkit NAME: warning: ...``,
    and not said at all by a command whose preflight stops on it instead, naming it in its
    error (``PLUGINS_CHECKED`` in the command's module: run, score, sweep)."""
    from evalkit.plugins import PluginWarning

    module = importlib.import_module(COMMANDS[name][0])
    with warnings.catch_warnings():  # the process's warning settings, back as they were
        if getattr(module, "PLUGINS_CHECKED", False):
            warnings.simplefilter("ignore", PluginWarning)
        show = warnings.showwarning

        def one_line(
            message: Warning | str,
            category: type[Warning],
            filename: str,
            lineno: int,
            file: TextIO | None = None,
            line: str | None = None,
        ) -> None:
            if issubclass(category, PluginWarning):
                print(f"evalkit {name}: warning: {message}", file=sys.stderr)
            else:
                show(message, category, filename, lineno, file, line)

        warnings.showwarning = one_line
        yield


def _command(name: str, argv: list[str]) -> int:
    """Parse ``evalkit NAME``'s flags and run it: one line and exit 2 for an error meant
    for people, the signal's summary when one ends it."""
    try:
        args = command_parser(name).parse_args(argv)
    except EvalkitError as exc:  # e.g. a bad $EVALKIT_PLUGIN_TIMEOUT_S, met building the flags
        return _fail(name, str(exc))
    module = importlib.import_module(COMMANDS[name][0])
    term = Termination()
    try:
        with term:
            code = int(module.run(args) or 0)
            sys.stdout.flush()  # a pipe's block buffer: a closed reader shows here, not at exit
    except KeyboardInterrupt:
        return _terminated(name, term)
    except BrokenPipeError:  # a reader that stopped early (`| head`) has what it wanted
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())  # no error at exit
        return 0
    except Exception as exc:
        if term.signum is not None:  # what the signal's unwinding raised on its way out
            return _terminated(name, term)
        return _error(name, exc)
    # a signal some wait swallowed (see Termination): the command still ends as signalled
    return _terminated(name, term) if term.signum is not None else code


def _terminated(name: str, term: Termination) -> int:
    if term.signum is None:  # a KeyboardInterrupt without our handler (not the main thread)
        print(f"evalkit {name}: interrupted", file=sys.stderr)
        return 130
    end_children(grace_s=3.0)  # an engine still starting, a scoring child
    print(term.summary(name), file=sys.stderr)
    return term.exit_code


def _error(name: str, exc: Exception) -> int:
    """One line for an error meant for people (exit 2); anything else is re-raised."""
    if isinstance(exc, EvalkitError):
        return _fail(name, str(exc))
    if isinstance(exc, OSError):
        where = exc.filename if exc.filename is not None else "?"
        if (disk := disk_error(exc, where, then="run it again")) is not None:
            return _fail(name, str(disk))
        if isinstance(exc, _PATH_ERRORS):
            return _fail(name, f"{where}: {exc.strerror or exc}")
    raise exc


def _fail(name: str, message: str) -> int:
    # One line: a message that spans lines (a layout, a list) is joined, never cut.
    line = " ".join(part.strip() for part in message.splitlines() if part.strip())
    print(f"evalkit {name}: error: {line}", file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main())
