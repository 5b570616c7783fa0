"""Shared fixtures: small synthetic media built by code, once per session."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit.video.synth import write_index_video
from tests._sensitivity_rules import last_letter_registered


@pytest.fixture(scope="session", autouse=True)
def own_ray_temp_dir() -> Iterator[str]:
    """Every Ray instance this session starts (tests, ``evalkit`` subprocesses, their
    workers) keeps its session files in a folder of its own: another cluster on the
    machine (``/tmp/ray``) is never read, attached to or overwritten. Short path: Ray's
    unix sockets live under it."""
    root = tempfile.mkdtemp(prefix="ekray-", dir="/tmp")
    before = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = root
    try:
        yield root
    finally:
        if before is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = before
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session-wide scratch folder for generated media."""
    return tmp_path_factory.mktemp("media")


@pytest.fixture(scope="session")
def index_video(media_dir: Path) -> Path:
    """3 s, 30 fps, 160x120 H.264 mp4 whose frames encode their index (see evalkit.video.synth)."""
    return write_index_video(media_dir / "index_90f_30fps.mp4", 90, fps=30.0, width=160, height=120)


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """torch on one thread for the test (tiny tensors: thread start-up costs more than it
    saves on a shared 2-core box); restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def last_letter_rule() -> Iterator[str]:
    """The test-only rule ``sensitivity_test_last_letter``, registered for one test."""
    with last_letter_registered() as name:
        yield name


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs mounted for the test (a disk that fills up); skipped where this
    process may not mount (not root)."""
    import subprocess

    mnt = tmp_path / "tiny_disk"
    mnt.mkdir()
    done = subprocess.run(
        ["mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", str(mnt)], capture_output=True
    )
    if done.returncode != 0:
        pytest.skip(f"cannot mount a tmpfs here: {done.stderr.decode().strip()}")
    try:
        yield mnt
    finally:
        subprocess.run(["umount", "-l", str(mnt)], check=False)
