"""Shared fixtures: small synthetic media built by code, once per session."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit.video.synth import write_index_video
from tests._sensitivity_rules import last_letter_registered


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
