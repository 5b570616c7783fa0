"""Exceptions meant for people: each says what was wrong, where, and what to do."""

from __future__ import annotations

import errno
from dataclasses import dataclass
from typing import Any, Literal


class EvalkitError(Exception):
    """Base class of every error evalkit raises on purpose."""


class ConfigError(EvalkitError):
    """A configuration file or option is invalid."""


class VideoError(EvalkitError):
    """A video or image could not be opened, decoded or sampled."""

    def __init__(self, path: str, reason: str) -> None:
        self.path = path
        self.reason = reason
        super().__init__(f"{path}: {reason}")


class CacheError(EvalkitError):
    """A frame-cache entry is missing, damaged or could not be written."""


class DataError(EvalkitError):
    """A benchmark file, row or field is missing or malformed."""


class EngineStartError(EvalkitError):
    """The engine could not be built from the model and its options (a checkpoint folder
    without its processor or tokenizer files, an option the backend refuses, no memory for
    the weights): the backend's own words, in one line."""


class DiskError(EvalkitError):
    """A write into a run directory or the cache failed: disk full, read-only, no access."""


# errno -> (what happened, what to do), for :func:`disk_error`
_DISK_ERRNOS = {
    errno.ENOSPC: ("disk full", "free space"),
    errno.EDQUOT: ("disk quota exceeded", "free space"),
    errno.EROFS: ("read-only file system", "make it writable"),
    errno.EACCES: ("permission denied", "make it writable"),
    errno.EPERM: ("permission denied", "make it writable"),
}


def disk_error(
    exc: OSError, path: object, safe: str = "", then: str = "resume"
) -> DiskError | None:
    """A one-line DiskError for ``exc`` while writing ``path`` (``safe``: what is kept,
    e.g. "12 records are safe"; ``then``: what to do once fixed); None when ``exc`` is
    not about the disk."""
    if exc.errno not in _DISK_ERRNOS:
        return None
    what, todo = _DISK_ERRNOS[exc.errno]
    kept = f": {safe}" if safe else ""
    return DiskError(f"{what} while writing {path}{kept}; {todo} and {then}")


class PromptTooLong(DataError):
    """A sample's prompt cannot fit the model's context (found before decoding its video)."""


class TransientError(EvalkitError):
    """A failure worth retrying (a dropped connection, an overloaded server)."""


class Terminated(KeyboardInterrupt):
    """The process got SIGTERM: unwinds like Ctrl-C (asyncio cancels tasks, ``finally``
    blocks close engines), and the command exits 143."""


@dataclass(frozen=True)
class Problem:
    """One thing wrong with a row of a file: which file, which row, which field, and what.

    The one row-error type: a benchmark file's row that did not load (``evalkit.bench``),
    a results-store line that is not a valid record (``evalkit.records``). ``row`` says
    where in the file for people (``line 3``, ``item 2``, ``key 'x'``; None: the whole
    file); ``field`` the field at fault (None: the row as a whole). ``level`` "error": the
    row (or file) was left out; "warning": it loaded after a repair (a repeated id given
    a suffix).
    """

    file: str
    row: str | None
    field: str | None
    message: str
    level: Literal["error", "warning"] = "error"

    def __str__(self) -> str:
        where = self.file
        if self.row is not None:
            where += f", {self.row}"
        if self.field is not None:
            where += f", field {self.field!r}"
        tag = "warning: " if self.level == "warning" else ""
        return f"{where}: {tag}{self.message}"

    def to_dict(self) -> dict[str, Any]:
        """JSON form (``reason`` is the message), as recorded in a run directory."""
        return {
            "file": self.file,
            "row": self.row,
            "field": self.field,
            "reason": self.message,
            "level": self.level,
        }

    @classmethod
    def from_dict(cls, d: dict[str, Any]) -> Problem:
        """Inverse of :meth:`to_dict`."""
        warning = d.get("level") == "warning"
        return cls(
            str(d["file"]),
            d.get("row"),
            d.get("field"),
            str(d["reason"]),
            "warning" if warning else "error",
        )


def not_utf8(exc: UnicodeDecodeError) -> str:
    """Why a text file could not be read, for an error that names the file."""
    return (
        f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
        "save it as UTF-8"
    )
