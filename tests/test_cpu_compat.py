"""The CPU torchvision shim: a lazy, one-line .pth hook that never imports torch at startup."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

from evalkit import _cpu_compat


def _run(code: str, **env: str) -> subprocess.CompletedProcess[str]:
    import os

    full_env = {**os.environ, **env}
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, env=full_env, timeout=300
    )


def test_pth_line_is_a_single_import_line() -> None:
    assert _cpu_compat.PTH_LINE.startswith("import ")
    assert _cpu_compat.PTH_LINE.count("\n") == 1 and _cpu_compat.PTH_LINE.endswith("\n")


def test_pth_line_adds_one_lazy_finder_and_imports_nothing_heavy() -> None:
    code = (
        f"exec({_cpu_compat.PTH_LINE!r}); exec({_cpu_compat.PTH_LINE!r})\n"
        "import sys\n"
        "names = [getattr(f, '__name__', '') for f in sys.meta_path]\n"
        "print(names.count('_EvalkitTorchvisionHook'), 'torch' in sys.modules,"
        " 'evalkit' in sys.modules)\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["1", "False", "False"]


def test_hook_can_be_switched_off_by_env() -> None:
    code = (
        f"exec({_cpu_compat.PTH_LINE!r})\nimport sys\n"
        "print(any(getattr(f, '__name__', '') == '_EvalkitTorchvisionHook' for f in sys.meta_path))"
    )
    out = _run(code, EVALKIT_CPU_COMPAT="0")
    assert out.stdout.strip() == "False"


def test_install_and_uninstall_write_and_remove_the_pth(tmp_path: Path) -> None:
    dest = _cpu_compat.install(tmp_path)
    assert dest.read_text() == _cpu_compat.PTH_LINE
    assert _cpu_compat.uninstall(tmp_path) is True
    assert not dest.exists()
    assert _cpu_compat.uninstall(tmp_path) is False


def test_importing_evalkit_does_not_import_torch() -> None:
    out = _run("import evalkit, evalkit._cpu_compat, sys; print('torch' in sys.modules)")
    assert out.stdout.strip() == "False", out.stderr


@pytest.mark.skipif(importlib.util.find_spec("torchvision") is None, reason="no torchvision")
def test_torchvision_transforms_import_with_the_hook() -> None:
    code = (
        f"exec({_cpu_compat.PTH_LINE!r})\n"
        "import torch, torchvision.transforms.v2.functional as F\n"
        "x = torch.zeros(3, 56, 56, dtype=torch.uint8)\n"
        "print(tuple(F.resize(x, [28, 28]).shape))\n"
    )
    out = _run(code)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "(3, 28, 28)"


@pytest.mark.skipif(importlib.util.find_spec("torch") is None, reason="no torch")
def test_shim_is_a_no_op_when_the_schema_already_exists() -> None:
    code = (
        "import torch\n"
        "lib = torch.library.Library('torchvision', 'DEF')\n"
        "lib.define('nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor')\n"
        "from evalkit import _cpu_compat as m\n"
        "print(m.before_torchvision_import(), m.applied())\n"
    )
    out = _run(code, EVALKIT_CPU_COMPAT="0")
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.split() == ["False", "False"]
