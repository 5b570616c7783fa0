"""Shared fixtures: small synthetic media built by code, once per session."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.video.synth import write_index_video


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session-wide scratch folder for generated media."""
    return tmp_path_factory.mktemp("media")


@pytest.fixture(scope="session")
def index_video(media_dir: Path) -> Path:
    """3 s, 30 fps, 160x120 H.264 mp4 whose frames encode their index (see evalkit.video.synth)."""
    return write_index_video(media_dir / "index_90f_30fps.mp4", 90, fps=30.0, width=160, height=120)
