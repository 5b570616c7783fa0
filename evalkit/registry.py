"""A typed registry: plug-in points are names mapped to objects, never if/elif chains.

Registering a name twice is an error; an unknown name gets a "did you mean" hint; an
entry may be a lazy ``"module:attr"`` string so that listing a registry does not import
heavy modules (vLLM, torch).
"""

from __future__ import annotations

import difflib
import importlib
import re
from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import Generic, TypeVar

from evalkit.errors import EvalkitError

T = TypeVar("T")


def normalize_name(name: str) -> str:
    """The lookup key of a name: lower case, letters and digits only (Video-MME ->
    videomme, "Spatial-Temporal Grounding" -> spatialtemporalgrounding): benchmarks, task
    types and their aliases are all matched this one way."""
    return re.sub(r"[^a-z0-9]", "", str(name).lower())


def did_you_mean(
    name: str, known: Iterable[str] | Mapping[str, str], *, n: int = 3, cutoff: float = 0.6
) -> str:
    """``"; did you mean 'a', 'b'?"`` for the known names closest to ``name``, else ``""``.

    ``known`` may map lookup keys to the names to show (aliases to their canonical name):
    the ``n`` closest keys are matched, their names shown once each, three at most.
    """
    keys = list(known)
    close = difflib.get_close_matches(name, keys, n=n, cutoff=cutoff)
    if isinstance(known, Mapping):
        close = list(dict.fromkeys(known[c] for c in close))[:3]
    return f"; did you mean {', '.join(map(repr, close))}?" if close else ""


class RegistryError(EvalkitError, KeyError):
    """Duplicate or unknown registry name."""

    def __str__(self) -> str:  # KeyError would repr() the message
        return str(self.args[0]) if self.args else ""


class Registry(Generic[T]):
    """Names to objects of one kind (scorers, engines, aggregations, ...)."""

    def __init__(self, kind: str) -> None:
        self.kind = kind
        self._entries: dict[str, T | str] = {}

    def register(self, name: str, obj: T | str) -> T | str:
        """Add ``obj`` under ``name``; ``obj`` may be a lazy ``"module:attr"`` string."""
        if name in self._entries:
            raise RegistryError(f"{self.kind} {name!r} is already registered")
        self._entries[name] = obj
        return obj

    def __call__(self, *names: str) -> Callable[[T], T]:
        """Decorator form: ``@registry("name", "alias")``."""

        def deco(obj: T) -> T:
            for name in names:
                self.register(name, obj)
            return obj

        return deco

    def get(self, name: str) -> T:
        """Return the entry for ``name``, importing it if it was registered lazily."""
        try:
            entry = self._entries[name]
        except KeyError:
            raise RegistryError(self._unknown(name)) from None
        if isinstance(entry, str) and ":" in entry:
            module, _, attr = entry.partition(":")
            obj: T = getattr(importlib.import_module(module), attr)
            self._entries[name] = obj
            return obj
        return entry  # type: ignore[return-value]

    def _unknown(self, name: str) -> str:
        known = sorted(self._entries)
        hint = did_you_mean(name, known)
        return f"unknown {self.kind} {name!r}{hint} (known: {', '.join(known) or 'none'})"

    def __contains__(self, name: object) -> bool:
        return name in self._entries

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._entries))

    def __len__(self) -> int:
        return len(self._entries)
