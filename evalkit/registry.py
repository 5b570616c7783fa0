"""A typed registry: plug-in points are names mapped to objects, never if/elif chains.

Every named plug-in kind (task types, scorers, rules, benchmarks, aggregations, engines,
trainer algorithms, reward functions) is one :class:`Registry`: registering a name twice
is an error; an unknown name gets a "did you mean" hint; names and aliases are normalised
here, once, by the registry's own ``normalize``; an entry may be an explicit lazy
``"module:attr"`` reference so that listing a registry does not import heavy modules
(vLLM, torch); a registry with a ``base`` type refuses an object of another type.

Other packages add entries through entry points, one group per kind (``evalkit.rules``,
``evalkit.benchmarks``, ``evalkit.engines``, ...). A group is read on the registry's first
lookup or listing, never when evalkit is imported, and only once evalkit's own entries are
all registered: a plug-in can add names, never take one (see :mod:`evalkit.plugins`: one
that tries is refused whole, one that does not load or hangs is skipped, each named).
"""

from __future__ import annotations

import difflib
import hashlib
import importlib
import importlib.util
import re
import sys
import threading
from collections.abc import Callable, Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, Generic, TypeVar, cast

from evalkit import plugins
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


@dataclass(frozen=True)
class Ref:
    """An explicit lazy entry: ``"module:attr"``, or ``"path/to/file.py:attr"``."""

    target: str

    def load(self) -> Any:
        """The object it names (see :func:`resolve_ref`)."""
        return resolve_ref(self.target)


def resolve_ref(
    ref: str,
    *,
    folder: str | Path | None = None,
    where: str = "",
    error: type[EvalkitError] = RegistryError,
) -> Any:
    """The object ``"module:attr"`` names; the one place lazy references are resolved.

    The module part may be a Python file (``path/to/file.py``, relative to the working
    directory) or, with ``folder``, a ``module.py`` beside a file in ``folder`` (a
    benchmark's adapter beside its YAML), tried before an import. Every failure is an
    ``error`` (one line, prefixed by ``where``) naming the reference and what to do.
    """
    module_name, sep, attr = ref.rpartition(":")
    if not sep or not module_name or not attr:
        where_ = f"{where}: " if where else ""
        raise error(f"{where_}{ref!r} is not a 'module:attr' reference")
    module = load_module(module_name, folder=folder, where=where, error=error)
    try:
        return getattr(module, attr)
    except AttributeError:
        found = sorted(n for n, v in vars(module).items() if callable(v) and n[0] != "_")
        raise error(
            f"{where + ': ' if where else ''}{module_name!r} has no {attr!r} "
            f"(it has: {', '.join(found) or 'nothing'})"
        ) from None


def load_module(
    name: str,
    *,
    folder: str | Path | None = None,
    where: str = "",
    error: type[EvalkitError] = RegistryError,
) -> ModuleType:
    """The module part of a reference: a ``.py`` file, ``NAME.py`` in ``folder``, or an
    import (see :func:`resolve_ref`)."""
    prefix = f"{where}: " if where else ""
    here = Path(folder) / f"{name}.py" if folder is not None else None
    if name.endswith(".py"):
        return _module_from_file(Path(name).expanduser().resolve(), prefix, error)
    if here is not None and here.is_file():
        return _module_from_file(here.resolve(), prefix, error)
    try:
        return importlib.import_module(name)
    except ImportError as exc:
        raise error(f"{prefix}cannot import {name!r}: {exc}") from exc


def _module_from_file(path: Path, prefix: str, error: type[EvalkitError]) -> ModuleType:
    """A Python file imported once per path (a module name unique per file, so two files
    called ``adapter.py`` never share one module object)."""
    if not path.is_file():
        raise error(f"{prefix}file {path} not found")
    key = "evalkit_file_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    module = sys.modules.get(key)
    if module is not None:
        return module
    spec = importlib.util.spec_from_file_location(key, path)
    if spec is None or spec.loader is None:
        raise error(f"{prefix}{path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(spec)
    sys.modules[key] = module
    try:
        spec.loader.exec_module(module)
    except Exception as exc:
        del sys.modules[key]
        raise error(f"{prefix}importing {path} failed: {exc!r}") from exc
    return module


AddFn = Callable[[str, Any], None]
"""How a registry adds what a plug-in's entry point loads: ``(entry point name, object)``."""


class Registry(Generic[T]):
    """Names to objects of one kind (scorers, engines, aggregations, ...).

    ``base``: the type every entry must be (a lazy one is checked when resolved).
    ``normalize``: the lookup key of a name or alias (default: the name itself).
    ``group``: the entry-point group other packages register into. ``modules``: evalkit's
    own modules that register on import (a folder of rules), imported on the first lookup
    or registration, and before any plug-in of any group is imported.
    ``add``: how an entry point's object is added (default: a module registered itself
    on import; anything else is registered under the entry point's name).
    """

    def __init__(
        self,
        kind: str,
        *,
        base: type | tuple[type, ...] | None = None,
        normalize: Callable[[str], str] | None = None,
        group: str | None = None,
        modules: Callable[[], Iterable[str]] | None = None,
        add: AddFn | None = None,
    ) -> None:
        self.kind = kind
        self.base = base
        self.group = group
        self._normalize = normalize or str
        self._modules = modules
        self._add = add or self._add_plugin
        self._entries: dict[str, T | Ref] = {}
        self._keys: dict[str, str] = {}  # normalised name or alias -> name
        self.version = 0
        """Counts registrations and removals (a cache of lookups knows it is stale)."""
        self._builtins_done = modules is None
        self._builtins_lock = threading.RLock()  # another thread waits for them all
        self._builtins_running = False  # a module imported here registering: no recursion
        self._plugins_done = group is None
        self._met: set[tuple[str, str]] = set()  # entry points imported (or tried) here
        if modules is not None:
            plugins.track(self)

    def register(self, name: str, obj: T | Ref | str, *, aliases: Iterable[str] = ()) -> Any:
        """Add ``obj`` under ``name`` and ``aliases``; a name or alias taken is an error.

        ``obj`` may be a :class:`Ref` (or, as before, a ``"module:attr"`` string: in a
        registry every string entry is a lazy reference). Returns ``obj``.
        """
        self.load_builtins()  # evalkit's own first: a plug-in can never take their names
        entry = self._entry(name, obj)
        keys = list(dict.fromkeys(self._normalize(k) for k in (name, *aliases)))
        with plugins.LOCK:
            plugin = plugins.registering()
            taken = self._taken(name, keys)
            if plugin is not None and (taken is not None or plugin.done):
                raise plugin.refuse(taken or f"it registers {self.kind} {name!r} too late")
            if taken is not None:
                raise RegistryError(taken)
            self._entries[name] = entry
            self._keys.update(dict.fromkeys(keys, name))
            self.version += 1
            if plugin is not None:
                plugin.added(self.kind, name, lambda: self.unregister(name))
        return obj

    def _taken(self, name: str, keys: list[str]) -> str | None:
        """Why ``name`` with lookup ``keys`` cannot be registered, or None."""
        if name in self._entries:
            return f"{self.kind} {name!r} is already registered{self._by(name)}"
        for key in keys:
            if key in self._keys:
                owner = self._keys[key]
                return f"{self.kind} alias {key!r} already names {owner!r}{self._by(owner)}"
        return None

    def _by(self, name: str) -> str:
        # said only to a plug-in: who it collides with
        return f" (by {plugins.owner(self.kind, name)})" if plugins.registering() else ""

    def refusal(self, message: str, error: type[EvalkitError] = RegistryError) -> EvalkitError:
        """The error for a name that is taken: the refusal of the plug-in registering it
        now (see :mod:`evalkit.plugins`), else ``error(message)``."""
        plugin = plugins.registering()
        return plugin.refuse(message) if plugin is not None else error(message)

    def register_lazy(self, name: str, ref: str, *, aliases: Iterable[str] = ()) -> None:
        """Add the lazy entry ``"module:attr"`` under ``name`` (imported on first ``get``)."""
        self.register(name, Ref(ref), aliases=aliases)

    def _entry(self, name: str, obj: T | Ref | str) -> T | Ref:
        if isinstance(obj, str):
            if ":" not in obj:
                raise RegistryError(f"{self.kind} {name!r}: {obj!r} is not a 'module:attr' ref")
            return Ref(obj)
        if not isinstance(obj, Ref):
            self._check(name, obj)
        return obj

    def _check(self, name: str, obj: object) -> None:
        if self.base is not None and not isinstance(obj, self.base):
            want = getattr(self.base, "__name__", str(self.base))
            raise RegistryError(
                f"{self.kind} {name!r} is a {type(obj).__name__}, not a {want}: register one"
            )

    def unregister(self, name: str) -> None:
        """Remove ``name`` and its aliases (a test's own entry, when it is done)."""
        with plugins.LOCK:
            self._entries.pop(name, None)
            for key in [k for k, v in self._keys.items() if v == name]:
                del self._keys[key]
            self.version += 1

    def __call__(self, *names: str) -> Callable[[T], T]:
        """Decorator form: ``@registry("name", "other_name")`` (each name an entry)."""

        def deco(obj: T) -> T:
            for name in names:
                self.register(name, obj)
            return obj

        return deco

    def canonical(self, name: str) -> str:
        """The registered name ``name`` or an alias stands for (RegistryError if none)."""
        self.load()
        key = self._normalize(name)
        if key in self._keys:
            return self._keys[key]
        raise RegistryError(self._unknown(name, key))

    def get(self, name: str) -> T:
        """The entry for ``name`` (or an alias), importing it if it was registered lazily."""
        name = self.canonical(name)
        entry = self._entries[name]
        if isinstance(entry, Ref):
            loaded = entry.load()
            self._check(name, loaded)
            self._entries[name] = loaded
            return cast(T, loaded)
        return entry

    def items(self) -> list[tuple[str, T]]:
        """Every ``(name, entry)``, sorted by name, lazy entries resolved."""
        return [(name, self.get(name)) for name in self]

    def owner(self, name: str) -> str | None:
        """The name that ``name`` (or an alias) is taken by now, else None (loads nothing:
        for checks made while registering)."""
        return self._keys.get(self._normalize(name))

    def keys(self) -> dict[str, str]:
        """Every lookup key (a normalised name or alias) and the name it stands for."""
        self.load()
        return dict(self._keys)

    def _unknown(self, name: str, key: str | None = None) -> str:
        """The message of an unknown ``name`` (trainer/config.py says it in a ValueError)."""
        key = self._normalize(name) if key is None else key
        known = self.names()
        hint = did_you_mean(key, self._keys, n=6)
        return f"unknown {self.kind} {name!r}{hint} (known: {', '.join(known) or 'none'})"

    def names(self) -> list[str]:
        """Every registered name, sorted (aliases left out)."""
        self.load()
        return sorted(self._entries)

    def __contains__(self, name: object) -> bool:
        self.load()
        return isinstance(name, str) and self._normalize(name) in self._keys

    def __iter__(self) -> Iterator[str]:
        return iter(self.names())

    def __len__(self) -> int:
        self.load()
        return len(self._entries)

    def load(self) -> None:
        """Register evalkit's own entries of this kind, then add the plug-ins of its group
        (once; one that does not load is skipped and warned of, see :mod:`evalkit.plugins`)."""
        self.load_builtins()
        if self._plugins_done or plugins.loading_builtins():
            return  # a lookup while built-ins register: the plug-ins come after all of them
        assert self.group is not None
        plugins.load_group(self.group, self._add, self._met)
        self._plugins_done = True

    def load_builtins(self) -> None:
        """Import evalkit's own modules of this kind (each registers on import), once."""
        if self._builtins_done:
            return
        with self._builtins_lock, plugins.builtins():
            if self._builtins_done or self._builtins_running:
                return
            self._builtins_running = True
            try:
                for module in self._modules() if self._modules else ():
                    importlib.import_module(module)
                self._builtins_done = True
            finally:
                self._builtins_running = False

    def _add_plugin(self, name: str, obj: Any) -> None:
        if not isinstance(obj, ModuleType):  # a module registered its entries on import
            self.register(name, obj)
