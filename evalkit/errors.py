"""Exceptions meant for people: each says what was wrong, where, and what to do."""

from __future__ import annotations


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


class PromptTooLong(DataError):
    """A sample's prompt cannot fit the model's context (found before decoding its video)."""


class TransientError(EvalkitError):
    """A failure worth retrying (a dropped connection, an overloaded server)."""


class Terminated(KeyboardInterrupt):
    """The process got SIGTERM: unwinds like Ctrl-C (asyncio cancels tasks, ``finally``
    blocks close engines), and the command exits 143."""


def not_utf8(exc: UnicodeDecodeError) -> str:
    """Why a text file could not be read, for an error that names the file."""
    return (
        f"not UTF-8 text (byte {exc.object[exc.start]:#04x} at offset {exc.start}); "
        "save it as UTF-8"
    )
