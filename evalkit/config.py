"""Typed configuration helpers: YAML onto pydantic models, CLI flags from field docstrings."""

from __future__ import annotations

import argparse
import math
import types
import typing
from pathlib import Path
from typing import Any, TypeVar

import yaml
from pydantic import BaseModel, Field, ValidationError

from evalkit.errors import ConfigError

M = TypeVar("M", bound=BaseModel)


def load_yaml_model(path: str | Path, model: type[M]) -> M:
    """Load ``path`` onto ``model``; unknown keys and bad values name the file and field."""
    path = Path(path)
    try:
        data = yaml.safe_load(path.read_text()) or {}
    except (OSError, yaml.YAMLError) as exc:
        raise ConfigError(f"{path}: cannot read YAML: {exc}") from exc
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        raise ConfigError(f"{path}: {_explain(exc)}") from exc


def _explain(exc: ValidationError) -> str:
    parts = []
    for err in exc.errors():
        loc = ".".join(str(x) for x in err["loc"]) or "<root>"
        parts.append(f"field {loc!r}: {err['msg']}")
    return "; ".join(parts)


def _scalar_type(annotation: Any) -> type | None:
    """The plain type a CLI flag should parse to, or None when a flag makes no sense."""
    origin = typing.get_origin(annotation)
    if origin in (typing.Union, types.UnionType):
        args = [a for a in typing.get_args(annotation) if a is not type(None)]
        return _scalar_type(args[0]) if len(args) == 1 else None
    if origin is typing.Literal and all(isinstance(a, str) for a in typing.get_args(annotation)):
        return str
    return annotation if annotation in (int, float, str, bool) else None


def finite_float(text: str) -> float:
    """A finite number (``nan``/``inf`` are refused: every float setting is a finite one;
    ``--frames-fps nan`` used to reach the sampler after the engine had started)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be a number, got {text!r}") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"must be a finite number, got {text}")
    return value


def _choices(annotation: Any) -> list[str] | None:
    """The allowed values of a (possibly optional) Literal field, for argparse."""
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is typing.Literal:
            return [str(a) for a in typing.get_args(arg)]
    return None


def add_model_args(
    parser: argparse.ArgumentParser, model: type[BaseModel], prefix: str = ""
) -> None:
    """Add one ``--flag`` per scalar field of ``model``, with help from its docstring."""
    for name, info in model.model_fields.items():
        typ = _scalar_type(info.annotation)
        if typ is None:
            continue
        flag = "--" + (prefix + name).replace("_", "-")
        # argparse %-formats help strings: a docstring's "2%" must not read as a format
        help_ = f"{info.description or ''} (default: {info.default})".replace("%", "%%")
        if typ is bool:
            parser.add_argument(
                flag,
                dest=prefix + name,
                action=argparse.BooleanOptionalAction,
                default=None,
                help=help_,
            )
        else:
            parser.add_argument(
                flag,
                dest=prefix + name,
                type=finite_float if typ is float else typ,
                default=None,
                choices=_choices(info.annotation),
                help=help_,
            )


def model_from_args(
    args: argparse.Namespace, model: type[M], prefix: str = "", base: M | None = None
) -> M:
    """Build ``model`` from flags added by :func:`add_model_args` (unset flags keep defaults)."""
    values = base.model_dump() if base is not None else {}
    for name in model.model_fields:
        v = getattr(args, prefix + name, None)
        if v is not None:
            values[name] = v
    try:
        return model.model_validate(values)
    except ValidationError as exc:
        raise ConfigError(_explain(exc)) from exc


THROUGHPUT_ONLY = "throughput_only"
"""Field metadata key: the field changes speed or memory (or how a service is called), never
a result, so a run's fingerprint leaves it out (:func:`throughput_only_fields`)."""


def throughput_only(default: Any = ..., **kwargs: Any) -> Any:
    """``Field(default, **kwargs)`` marked throughput-only (left out of fingerprints)."""
    return Field(default, json_schema_extra={THROUGHPUT_ONLY: True}, **kwargs)


def throughput_only_fields(model: type[BaseModel]) -> frozenset[str]:
    """The names of ``model``'s fields marked with :func:`throughput_only`."""
    return frozenset(
        name
        for name, info in model.model_fields.items()
        if isinstance(info.json_schema_extra, dict) and info.json_schema_extra.get(THROUGHPUT_ONLY)
    )
