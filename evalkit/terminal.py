"""What reaches the terminal during ``evalkit run``: evalkit's own progress, summary and
warnings. Everything else printed while the run's engines live (vLLM and its engine
processes, transformers, torch's C++ warnings, Ray and its workers' forwarded output)
goes to the run directory's log file (``RunDir.log_path``), named in the summary;
``--verbose`` leaves the terminal as it is.

The redirection is of file descriptors 1 and 2, not of ``sys.stdout``: child processes
(vLLM's engine core and workers, decoding pools, Ray) inherit them, C++ code writes to
them, and a library handler that keeps a reference to ``sys.stdout`` keeps working after
the run. evalkit writes to the terminal through :attr:`Terminal.out` / :attr:`Terminal.err`
(the original descriptors, duplicated).
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TextIO


class Terminal:
    """The terminal of one command; :meth:`capture` sends the rest to a log file."""

    def __init__(self) -> None:
        self.log_path: Path | None = None
        """Where the other output went (None: not captured)."""
        self._saved: tuple[int, int] | None = None
        self._streams: tuple[TextIO, TextIO] | None = None
        self._handler: logging.Handler | None = None
        self._sys: tuple[TextIO, TextIO] | None = None
        self._temp = False

    @property
    def out(self) -> TextIO:
        """evalkit's standard output (the terminal even while captured)."""
        return self._streams[0] if self._streams else sys.stdout

    @property
    def err(self) -> TextIO:
        """evalkit's standard error (progress, warnings)."""
        return self._streams[1] if self._streams else sys.stderr

    def capture_early(self) -> None:
        """Capture into a temporary file until the run directory exists (``capture``
        then moves what it holds there; ``release`` before that deletes it): what Ray
        prints while connecting to a cluster, before there is a run directory."""
        import tempfile

        fd, name = tempfile.mkstemp(prefix="evalkit-output-", suffix=".log")
        os.close(fd)
        self.capture(name)
        self._temp = True

    def capture(self, log_path: str | Path) -> None:
        """From now on, descriptors 1 and 2 write to ``log_path`` (appended: a resumed
        run keeps its earlier output); evalkit's warnings still reach the terminal."""
        if self._saved is not None:
            if Path(log_path) != self.log_path:
                self._move(Path(log_path))
            return
        self.log_path = Path(log_path)
        sys.stdout.flush()
        sys.stderr.flush()
        self._saved = (os.dup(1), os.dup(2))
        fd = os.open(self.log_path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.dup2(fd, 1)
            os.dup2(fd, 2)
        finally:
            os.close(fd)
        self._streams = (_stream(self._saved[0]), _stream(self._saved[1]))
        # sys.stdout/stderr as streams on descriptors 1 and 2 (where they usually write
        # anyway; an embedding host or a test harness may have replaced them): not closed
        # at the end, so a library handler that took them keeps writing to 1 and 2
        self._sys = (sys.stdout, sys.stderr)
        sys.stdout, sys.stderr = _stream(1), _stream(2)
        self._handler = logging.StreamHandler(self._streams[1])
        self._handler.setLevel(logging.WARNING)
        self._handler.setFormatter(logging.Formatter("evalkit: warning: %(message)s"))
        logging.getLogger("evalkit").addHandler(self._handler)

    def _move(self, path: Path) -> None:
        """Go on writing into ``path``, with what the temporary log held so far."""
        assert self.log_path is not None
        for stream in (sys.stdout, sys.stderr):
            stream.flush()
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_APPEND, 0o644)
        try:
            os.write(fd, self.log_path.read_bytes())
            os.dup2(fd, 1)
            os.dup2(fd, 2)
        finally:
            os.close(fd)
        if self._temp:
            self.log_path.unlink(missing_ok=True)
            self._temp = False
        self.log_path = path

    def release(self) -> None:
        """Descriptors 1 and 2 back to the terminal (idempotent); a temporary log that
        never found its run directory is deleted."""
        if self._saved is None:
            return
        if self._temp and self.log_path is not None:
            self.log_path.unlink(missing_ok=True)
            self.log_path, self._temp = None, False
        if self._handler is not None:
            logging.getLogger("evalkit").removeHandler(self._handler)
            self._handler = None
        for stream in (sys.stdout, sys.stderr, *(self._streams or ())):
            with contextlib.suppress(OSError, ValueError):  # closed by a library: nothing to flush
                stream.flush()
        for stream in self._streams or ():
            stream.close()  # closefd=False: the descriptor is closed below
        if self._sys is not None:
            sys.stdout, sys.stderr = self._sys
            self._sys = None
        out, err = self._saved
        os.dup2(out, 1)
        os.dup2(err, 2)
        os.close(out)
        os.close(err)
        self._saved = self._streams = None

    def __enter__(self) -> Terminal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.release()


def _stream(fd: int) -> TextIO:
    """A line-buffered text stream on ``fd`` that never closes it."""
    return open(fd, "w", buffering=1, closefd=False, encoding="utf-8", errors="replace")


@contextlib.contextmanager
def progress_bar(title: str, total: int, enabled: bool) -> Iterator[Callable[[str], None]]:
    """A rich progress bar on stderr (done of total, elapsed, remaining, the last item's
    label); yields ``advance(label)``. Disabled (a terminal that is no TTY): does nothing."""
    if not enabled:
        yield lambda _label: None
        return
    from rich.console import Console
    from rich.progress import (
        BarColumn,
        MofNCompleteColumn,
        Progress,
        TextColumn,
        TimeElapsedColumn,
        TimeRemainingColumn,
    )

    columns = (
        TextColumn(f"[bold]{title}"),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.description}"),
    )
    with Progress(*columns, console=Console(stderr=True)) as bar:
        task = bar.add_task("", total=total)

        def advance(label: str) -> None:
            bar.update(task, advance=1, description=label)

        yield advance
