"""Argument checks shared by the subcommands: argparse types that refuse bad values with
a message naming the value, and path checks that say what to do."""

from __future__ import annotations

import argparse
import math
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from evalkit.errors import ConfigError


def non_negative_int(text: str) -> int:
    """An integer >= 0."""
    value = _parse(text, int, "an integer")
    if value < 0:
        raise argparse.ArgumentTypeError(f"must be 0 or more, got {text}")
    return value


def non_negative_float(text: str) -> float:
    """A number >= 0 (tolerances, points)."""
    value = _parse(text, float, "a number")
    if not 0 <= value < math.inf:  # also refuses nan and inf
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0, got {text}")
    return value


def _parse(text: str, kind: type[Any], what: str) -> Any:
    try:
        return kind(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be {what}, got {text!r}") from None


def existing_dir(path: str, flag: str) -> Path:
    """``path`` as a directory that exists; ConfigError naming ``flag`` otherwise."""
    p = Path(path).expanduser()
    if not p.exists():
        raise ConfigError(f"{flag} {path}: no such directory; check the path")
    if not p.is_dir():
        raise ConfigError(f"{flag} {path}: is a file, not a directory")
    return p


def output_dir(path: str, flag: str) -> Path:
    """``path`` as a directory to write into: absent (it will be made) or a directory."""
    p = Path(path).expanduser()
    if p.exists() and not p.is_dir():
        raise ConfigError(f"{flag} {path}: is a file; give a directory to write into")
    return p


def writable_file(path: str, flag: str) -> Path:
    """``path`` as a file to write: its folder must exist and it must not be a folder."""
    p = Path(path).expanduser()
    if p.is_dir():
        raise ConfigError(f"{flag} {path}: is a directory; give a file name")
    if not p.parent.is_dir():
        raise ConfigError(f"{flag} {path}: folder {p.parent} does not exist; create it first")
    return p


def validate_model(model: type[BaseModel], data: dict[str, Any]) -> Any:
    """``model.model_validate(data)``; a bad field is a one-line ConfigError naming both
    its flag and its config key (``frames.fps`` is ``--frames-fps``)."""
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        parts = []
        for err in exc.errors():
            loc = ".".join(str(x) for x in err["loc"])
            if not loc:  # a check across fields: its own sentence, without pydantic's prefix
                parts.append(str(err["msg"]).removeprefix("Value error, "))
                continue
            flag = "--" + loc.replace(".", "-").replace("_", "-")
            parts.append(f"{flag} (`{loc}` in --config): {err['msg']}, got {err.get('input')!r}")
        raise ConfigError("; ".join(parts)) from None
