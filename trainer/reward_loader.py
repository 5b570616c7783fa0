"""A reward function named in the config as ``path/to/file.py:function``, loaded at startup.

The function follows :data:`trainer.rewards.RewardFn`: ``fn(sample, prediction, w_acc=...,
w_fmt=...) -> {"accuracy", "format", "overall"}``. Every mistake (no such file, a file that
does not import, no such function, a signature that cannot take those arguments) is a
:class:`ConfigError` naming the file and the function, before any model is loaded.
"""

from __future__ import annotations

import hashlib
import importlib.util
import inspect
from pathlib import Path

from evalkit.errors import ConfigError

from .rewards import RewardFn


def load_reward_function(spec: str) -> RewardFn:
    """Import ``file.py:function`` (a path relative to the working directory or absolute)."""
    path_text, sep, name = spec.rpartition(":")
    where = f"rewards.function={spec!r}"
    if not sep or not path_text or not name:
        raise ConfigError(f"{where}: expected path/to/file.py:function")
    path = Path(path_text).expanduser().resolve()
    if not path.is_file():
        raise ConfigError(f"{where}: file {path} not found")
    # a name unique per file, so two reward files never share one module object
    module_name = "trainer_reward_" + hashlib.sha1(str(path).encode()).hexdigest()[:12]
    loader_spec = importlib.util.spec_from_file_location(module_name, path)
    if loader_spec is None or loader_spec.loader is None:
        raise ConfigError(f"{where}: {path} cannot be imported as a Python module")
    module = importlib.util.module_from_spec(loader_spec)
    try:
        loader_spec.loader.exec_module(module)
    except Exception as exc:
        raise ConfigError(f"{where}: importing {path} failed: {exc!r}") from exc
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
