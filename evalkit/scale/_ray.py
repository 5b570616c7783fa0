"""Ray, imported lazily and started (or joined) for the length of one command."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from types import ModuleType

from evalkit.errors import ConfigError

log = logging.getLogger(__name__)


def require_ray() -> ModuleType:
    """The ``ray`` module, or a ConfigError that says how to install it."""
    try:
        import ray
    except ImportError:
        raise ConfigError(
            "this needs Ray, which is not installed: pip install 'evalkit[ray]'"
        ) from None
    return ray


@contextmanager
def ensure_ray(address: str | None = None, num_cpus: int | None = None) -> Iterator[ModuleType]:
    """Yield ``ray``, connected: to ``address`` (an existing cluster, e.g. ``auto`` or
    ``HOST:6379``), or to a local instance started here with ``num_cpus`` and shut down
    on exit. A Ray session already initialised by the caller is used and left running."""
    ray = require_ray()
    if ray.is_initialized():
        yield ray
        return
    if address:
        try:
            ray.init(address=address)
        except ConnectionError as exc:
            raise ConfigError(
                f"--ray-address {address}: no Ray cluster answers there ({exc}); start one "
                "with `ray start --head` or leave the flag out for a local instance"
            ) from None
    else:
        # "local": always a new instance of our own, never a cluster found on the box
        ray.init(address="local", num_cpus=num_cpus, include_dashboard=False)
    try:
        yield ray
    finally:
        ray.shutdown()
