"""Plug-ins: other packages' entry points, each imported once, under a time bound, and
never allowed to replace an entry that is already registered.

A registry (:mod:`evalkit.registry`) reads its entry-point group on its first lookup, after
its own built-in entries (and those of every registry made so far) are registered. Each
entry point is imported by :func:`load_group`, in a thread of its own that is waited for at
most ``EVALKIT_PLUGIN_TIMEOUT_S`` seconds (default 30):

- every registration the plug-in makes while it imports, in any registry (a module of
  ``evalkit.benchmarks`` may register rules), is journaled as its own; a name or alias
  that is taken refuses the plug-in: what it registered is removed again, so a plug-in
  is loaded whole or not at all. Registrations made by the top-level code of an evalkit
  module that the plug-in happens to import first are evalkit's, never the plug-in's;
- whatever its import raises, ``BaseException`` included (``sys.exit``,
  ``KeyboardInterrupt``), skips it. The thread tells the two kinds of interrupt apart: a
  signal is handled on the main thread, so a Ctrl-C interrupts the main thread's wait and
  stops evalkit as always, while a KeyboardInterrupt raised in the import thread can only
  be the plug-in's own;
- one still importing past the bound is skipped, its registrations removed; its thread
  (a daemon) cannot be stopped and runs on, and anything it registers later is refused.

A skipped plug-in is a :class:`PluginWarning` (one line naming it, its distribution, and
what to do) and a problem recorded here: listings warn and go on, while a run's preflight
(:func:`evalkit.run.preflight.check_plugins`) stops on one before any run directory or
engine exists. :func:`loaded` lists the plug-ins that loaded, for the run manifest.
"""

from __future__ import annotations

import contextlib
import os
import sys
import threading
import warnings
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from types import FrameType
from typing import TYPE_CHECKING, Any, Protocol

from evalkit.errors import EvalkitError

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

TIMEOUT_ENV = "EVALKIT_PLUGIN_TIMEOUT_S"
DEFAULT_TIMEOUT_S = 30.0
"""How long one plug-in's import is waited for (a plug-in importing torch takes seconds)."""


class PluginError(EvalkitError):
    """An installed plug-in that was not loaded (refused, broken, or too slow)."""


class PluginRefused(PluginError):
    """Raised into a plug-in's code at a registration that would replace an entry."""


class PluginWarning(UserWarning):
    """A plug-in skipped (its one line): a listing goes on without it."""


class _Registry(Protocol):
    def load_builtins(self) -> None: ...


LOCK = threading.RLock()
"""Guards every registry's entries against a plug-in's thread (one that outlived its bound
registers while the main thread looks up or rolls back). Never held while importing."""
_REGISTRIES: weakref.WeakSet[_Registry] = weakref.WeakSet()
_PLUGINS: dict[tuple[str, str, str], Plugin] = {}  # (group, name, value) -> its last load
_local = threading.local()  # .plugin: the one this thread imports; .builtins: a depth


@dataclass(eq=False)
class Plugin:
    """One entry point of another distribution, as this process loaded it (or not)."""

    group: str
    name: str
    value: str
    distribution: str
    version: str
    registered: list[tuple[str, str]] = field(default_factory=list)
    """``(registry kind, name)`` of every entry it added (kept only if it loaded)."""
    problem: str | None = None
    """Why it was not loaded (refused, raised, too slow); None once loaded."""
    done: bool = False
    """Its import was waited for and judged: anything it registers from now on is refused."""
    _undo: list[Callable[[], None]] = field(default_factory=list, repr=False)

    @property
    def loaded(self) -> bool:
        """It imported within its bound and registered nothing that was taken."""
        return self.done and self.problem is None

    def describe(self) -> str:
        """How it is named in every message (see :func:`describe`)."""
        return describe(self.name, self.value, self.distribution, self.version, self.group)

    def refuse(self, why: str) -> PluginRefused:
        """The error raised into its code at a refused registration (the first reason
        given is the one it is named by)."""
        with LOCK:
            self.fail(
                f"refused: {why}; nothing it registered is kept (rename its entry, or "
                f"`pip uninstall {self.distribution}`)"
            )
            return PluginRefused(self.problem)

    def added(self, kind: str, name: str, undo: Callable[[], None]) -> None:
        """Journal one registration, with how to take it back."""
        self.registered.append((kind, name))
        self._undo.append(undo)

    def fail(self, why: str) -> None:
        """Mark it not loaded (its first problem stays the one it is named by)."""
        if self.problem is None:
            self.problem = f"{self.describe()} {why}"

    def rollback(self) -> None:
        """Remove everything it registered."""
        with LOCK:
            for undo in reversed(self._undo):
                undo()
            self._undo.clear()
            self.registered.clear()


def describe(name: str, value: str, distribution: str, version: str, group: str) -> str:
    """``plug-in 'x' = 'pkg.mod' of dist 1.0 (entry points 'evalkit.rules')``."""
    dist = f"{distribution} {version}" if version else distribution
    return f"plug-in {name!r} = {value!r} of {dist} (entry points {group!r})"


def timeout_s() -> float:
    """The bound on one plug-in's import: ``$EVALKIT_PLUGIN_TIMEOUT_S`` or 30 s."""
    raw = os.environ.get(TIMEOUT_ENV, "")
    try:
        value = float(raw) if raw else DEFAULT_TIMEOUT_S
    except ValueError:
        value = -1.0
    if not value > 0:
        raise PluginError(f"{TIMEOUT_ENV}={raw!r}: give the seconds a plug-in may import for")
    return value


def track(registry: _Registry) -> None:
    """Have ``registry``'s built-ins registered before any plug-in is imported."""
    _REGISTRIES.add(registry)


@contextlib.contextmanager
def builtins() -> Iterator[None]:
    """While evalkit registers its own entries in this thread: nothing is a plug-in's,
    and lookups load no plug-in (it would be imported before every built-in is in)."""
    _local.builtins = getattr(_local, "builtins", 0) + 1
    try:
        yield
    finally:
        _local.builtins -= 1


def loading_builtins() -> bool:
    """Whether this thread is registering evalkit's own entries."""
    return getattr(_local, "builtins", 0) > 0


def registering() -> Plugin | None:
    """The plug-in a registration made now in this thread belongs to; None when it is
    evalkit's own (its built-ins, or the top-level code of an evalkit module the plug-in
    imported: those register evalkit's entries wherever the first import happens)."""
    plugin: Plugin | None = getattr(_local, "plugin", None)
    if plugin is None or loading_builtins() or _evalkit_module_running():
        return None
    return plugin


def _evalkit_module_running() -> bool:
    """Whether the innermost module body being executed on this stack is evalkit's."""
    frame: FrameType | None = sys._getframe(1)
    while frame is not None and frame.f_code.co_name != "<module>":
        frame = frame.f_back
    if frame is None:  # the import thread's own code (an entry point's object added)
        return False
    name = str(frame.f_globals.get("__name__", ""))
    return name == "evalkit" or name.startswith("evalkit.")


def owner(kind: str, name: str) -> str:
    """Who registered ``name`` in the registry of ``kind``: a loaded plug-in, or evalkit."""
    for plugin in list(_PLUGINS.values()):  # one still importing may meet its own names
        if plugin.problem is None and (kind, name) in plugin.registered:
            return plugin.describe()
    return "evalkit"


def load_group(group: str, add: Callable[[str, Any], None], met: set[tuple[str, str]]) -> None:
    """Import each entry point of ``group`` not in ``met`` (each added to it) and hand what
    it names to ``add(name, object)``; one that does not load is skipped and warned of."""
    for registry in list(_REGISTRIES):  # every built-in first, wherever a plug-in registers
        registry.load_builtins()
    for ep in entry_points(group):
        with LOCK:
            if (ep.name, ep.value) in met:
                continue
            met.add((ep.name, ep.value))
        load(ep, group, add)


def load(ep: EntryPoint, group: str, add: Callable[[str, Any], None]) -> Plugin:
    """Import one entry point under the time bound (see the module); the record of it."""
    dist = getattr(ep, "dist", None)
    plugin = Plugin(
        group,
        ep.name,
        ep.value,
        getattr(dist, "name", None) or "its package",
        getattr(dist, "version", None) or "",
    )
    _PLUGINS[(group, ep.name, ep.value)] = plugin
    bound = timeout_s()
    thread = threading.Thread(
        target=_import, args=(plugin, ep, add), name=f"evalkit-plugin {group}:{ep.name}"
    )
    thread.daemon = True  # one past its bound must not keep evalkit from exiting
    thread.start()
    try:
        thread.join(bound)
    except BaseException:  # the user's Ctrl-C (or SIGTERM) while waiting: evalkit stops
        _judge(plugin, "was interrupted while importing")
        raise
    if _judge(plugin, _too_slow(bound) if thread.is_alive() else None):
        warnings.warn(PluginWarning(plugin.problem), stacklevel=2)
    return plugin


def _import(plugin: Plugin, ep: EntryPoint, add: Callable[[str, Any], None]) -> None:
    """The import thread: everything registered here is ``plugin``'s."""
    _local.plugin = plugin
    try:
        add(ep.name, ep.load())
    except BaseException as exc:  # SystemExit, KeyboardInterrupt: this thread's, the plug-in's
        with LOCK:
            reason = " ".join(str(exc).split()) or "(no message)"
            plugin.fail(
                f"does not load: {type(exc).__name__}: {reason}; skipped (fix it, or "
                f"`pip uninstall {plugin.distribution}`)"
            )
    finally:
        _local.plugin = None


def _too_slow(bound: float) -> str:
    return (
        f"is still importing after {bound:g} s ({TIMEOUT_ENV}): skipped, and kept out "
        "even if it finishes (raise the bound if it is only slow, or `pip uninstall` it)"
    )


def _judge(plugin: Plugin, problem: str | None) -> bool:
    """Close the wait for ``plugin``; roll it back when it has a problem (True then)."""
    with LOCK:
        plugin.done = True
        if problem is not None:
            plugin.fail(problem)
        if plugin.problem is None:
            return False
        plugin.rollback()
        return True


def entry_points(group: str) -> list[EntryPoint]:
    """The entry points of ``group``, each once (a distribution found twice on the path
    is one), sorted by name."""
    from importlib.metadata import entry_points as found

    seen: dict[tuple[str, str], EntryPoint] = {}
    for ep in found(group=group):
        seen.setdefault((ep.name, ep.value), ep)
    return sorted(seen.values(), key=lambda ep: ep.name)


def loaded() -> list[Plugin]:
    """Every plug-in this process loaded, by group and name."""
    return sorted((p for p in _PLUGINS.values() if p.loaded), key=lambda p: (p.group, p.name))


def problems(groups: Iterable[str] | None = None) -> list[Plugin]:
    """The plug-ins (of ``groups``, default all) that were met and not loaded."""
    wanted = None if groups is None else set(groups)
    return [
        p
        for p in _PLUGINS.values()
        if p.problem is not None and (wanted is None or p.group in wanted)
    ]
