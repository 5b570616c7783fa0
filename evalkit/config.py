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
from pydantic.fields import FieldInfo

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
    if origin is list and len(typing.get_args(annotation)) == 1:
        (item,) = typing.get_args(annotation)
        return list if item is str or _scalar_type(item) is str else None
    return annotation if annotation in (int, float, str, bool) else None


def section_model(annotation: Any) -> type[BaseModel] | None:
    """The model of a nested section field (``FrameOverrides``, ``JudgeConfig | None``)."""
    for arg in (annotation, *typing.get_args(annotation)):
        if isinstance(arg, type) and issubclass(arg, BaseModel):
            return arg
    return None


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


def positive_int(text: str) -> int:
    """An integer >= 1 (``--limit``, ``--max-tokens``, worker counts)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"must be an integer, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be a positive integer, got {text}")
    return value


def comma_list(text: str) -> list[str] | None:
    """``"a, b"`` -> ``["a", "b"]`` (None when nothing is named: the flag is then unset)."""
    items = [item.strip() for item in text.split(",") if item.strip()]
    return items or None


def _choices(annotation: Any) -> list[str] | None:
    """The allowed values of a (possibly optional, or listed) Literal field, for argparse."""
    for arg in (annotation, *typing.get_args(annotation)):
        if typing.get_origin(arg) is typing.Literal:
            return [str(a) for a in typing.get_args(arg)]
        if typing.get_origin(arg) is list:
            (item,) = typing.get_args(arg) or (None,)
            return _choices(item) if typing.get_origin(item) is typing.Literal else None
    return None


def _at_least_one(info: FieldInfo) -> bool:
    """Whether an int field's constraints refuse everything below 1 (``gt=0``, ``ge=1``)."""
    for meta in info.metadata:
        gt, ge = getattr(meta, "gt", None), getattr(meta, "ge", None)
        if (gt is not None and gt >= 0) or (ge is not None and ge >= 1):
            return True
    return False


def field_help(info: FieldInfo) -> str:
    """A field's ``--help`` line: the first paragraph of its docstring, on one line."""
    summary = (info.description or "").strip().split("\n\n")[0]
    return " ".join(summary.split())


def flag_type(info: FieldInfo) -> Any:
    """What argparse parses a field's flag with: finite numbers only for a float, a
    positive integer where the field refuses less, a comma-separated list for ``list[str]``
    (None: the field has no flag)."""
    typ = _scalar_type(info.annotation)
    if typ is float:
        return finite_float
    if typ is int and _at_least_one(info):
        return positive_int
    if typ is list:
        return comma_list
    return typ


def add_model_args(
    parser: Any,
    model: type[BaseModel],
    prefix: str = "",
    *,
    fields: typing.Iterable[str] | None = None,
    extra: typing.Mapping[str, dict[str, Any]] | None = None,
) -> None:
    """Add one ``--flag`` per scalar field of ``model`` (``--PREFIX-NAME``, dest
    ``PREFIX_NAME``, default None: unset), its type, choices and help (the docstring's
    first paragraph, then the field's default unless None or said there) from the field.

    ``fields``: only these fields, in this order (default: every one). ``extra``: more
    ``add_argument`` keywords by field name (``aliases``: further option strings, listed
    before the generated one). A field without a flag type (a dict, a nested model) is left
    out: :func:`model_from_args` callers give those their own flags.
    """
    extra = extra or {}
    for name in fields if fields is not None else model.model_fields:
        info = model.model_fields[name]
        typ = flag_type(info)
        if typ is None:
            continue
        more = dict(extra.get(name, {}))
        flag = "--" + (prefix + name).replace("_", "-")
        help_ = field_help(info)
        value = None if info.is_required() else info.get_default(call_default_factory=True)
        if value not in (None, [], {}) and "default" not in help_:
            help_ += f" (default: {value})"
        # argparse %-formats help strings: a docstring's "2%" must not read as a format
        kwargs: dict[str, Any] = {
            "dest": prefix + name,
            "default": None,
            "help": help_.replace("%", "%%"),
        }
        if typ is bool:
            kwargs["action"] = argparse.BooleanOptionalAction
        elif typ is comma_list:  # a list of choices is checked by the model (one line, exit 2)
            kwargs.update(type=typ, metavar=",".join(_choices(info.annotation) or []) or None)
        else:
            kwargs.update(type=typ, choices=_choices(info.annotation))
        kwargs.update(more)
        aliases = kwargs.pop("aliases", [])
        parser.add_argument(*aliases, flag, **kwargs)


def values_from_args(
    args: argparse.Namespace, model: type[BaseModel], prefix: str = ""
) -> dict[str, Any]:
    """The fields of ``model`` whose flags were given (nested sections as dicts of theirs,
    flags ``--SECTION-NAME``; a section none of whose flags were given is left out)."""
    out: dict[str, Any] = {}
    for name, info in model.model_fields.items():
        section = section_model(info.annotation)
        if section is not None:
            sub = values_from_args(args, section, f"{prefix}{name}_")
            if sub:
                out[name] = sub
            continue
        value = getattr(args, prefix + name, None)
        if value is not None:
            out[name] = value
    return out


def overlay(base: dict[str, Any], given: dict[str, Any], model: type[BaseModel]) -> dict[str, Any]:
    """``given`` over ``base`` (``model``'s settings as dicts): nested sections merge field by
    field, option dicts (``engine_options``) key by key, every other value is replaced."""
    out = dict(base)
    for key, value in given.items():
        old = out.get(key)
        info = model.model_fields.get(key)
        section = section_model(info.annotation) if info is not None else None
        if isinstance(value, dict) and isinstance(old, dict):
            value = overlay(old, value, section) if section is not None else {**old, **value}
        out[key] = value
    return out


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
