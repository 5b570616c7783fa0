"""A reward function named in the config, loaded at startup: ``path/to/file.py:function``,
or the name of a registered one (:data:`REWARD_FUNCTIONS`: ``evalkit``, and those other
packages add through the entry points ``evalkit.rewards``).

The function follows :data:`trainer.rewards.RewardFn`: ``fn(sample, prediction, w_acc=...,
w_fmt=...) -> {"accuracy", "format", "overall"}``. Every mistake (no such file, a file that
does not import, no such function, a signature that cannot take those arguments) is a
:class:`ConfigError` naming the file and the function, before any model is loaded.
"""

from __future__ import annotations

import inspect
from collections.abc import Callable, Mapping
from pathlib import Path

from evalkit.errors import ConfigError
from evalkit.registry import Registry, load_module

RewardFn = Callable[..., Mapping[str, float | None]]
"""``(sample, prediction, w_acc=..., w_fmt=...) -> {"accuracy", "format", "overall"}``;
accuracy and overall are None when the sample could not be scored; an optional
``scorer_failed`` (truthy: the scorer raised, the reward is 0) is counted in the metrics.
Here, not in :mod:`trainer.rewards`: the config checks a name against the registry below
without importing torch (and without a circle back to the config)."""

REWARD_FUNCTIONS: Registry[RewardFn] = Registry("reward function", group="evalkit.rewards")
"""Reward functions by name (a plug-in's entry point names its function, ``module:fn``)."""
REWARD_FUNCTIONS.register_lazy("evalkit", "evalkit.scoring:reward")


def load_reward_function(spec: str) -> RewardFn:
    """A registered reward function's name, or ``file.py:function`` (a path relative to the
    working directory or absolute)."""
    where = f"rewards.function={spec!r}"
    if ":" not in spec:
        registered = REWARD_FUNCTIONS.get(spec)  # unknown: RegistryError with a hint
        _check_signature(registered, where, Path(spec), spec)
        return registered
    path_text, sep, name = spec.rpartition(":")
    if not sep or not path_text or not name:
        raise ConfigError(f"{where}: expected path/to/file.py:function")
    path = Path(path_text).expanduser().resolve()
    module = load_module(str(path), where=where, error=ConfigError)
    fn = getattr(module, name, None)
    if not callable(fn):
        found = sorted(n for n, v in vars(module).items() if callable(v) and not n.startswith("_"))
        raise ConfigError(f"{where}: {path} has no function {name!r} (it has: {found})")
    _check_signature(fn, where, path, name)
    reward_fn: RewardFn = fn
    return reward_fn


def _check_signature(fn: object, where: str, path: Path, name: str) -> None:
    try:
        inspect.signature(fn).bind(None, "", w_acc=0.9, w_fmt=0.1)  # type: ignore[arg-type]
    except TypeError as exc:
        raise ConfigError(
            f"{where}: {name}() in {path} must accept (sample, prediction, w_acc=..., "
            f"w_fmt=...) and return {{'accuracy', 'format', 'overall'}}: {exc}"
        ) from exc
    except ValueError:  # builtins without a signature: accept, the first call will tell
        return
