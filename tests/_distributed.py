"""What the distributed trainer tests share: the tiny model they train and a local Ray."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest


def tiny_model(factory: pytest.TempPathFactory, family: str = "qwen2_5_vl") -> Path:
    """A tiny random ``family`` model (seed 0) in a fresh temporary folder."""
    from evalkit.models.tiny import build_tiny_model

    return build_tiny_model(factory.mktemp("tiny") / family, family, seed=0)


@contextmanager
def local_ray(num_cpus: int) -> Iterator[Any]:
    """A local Ray instance with ``num_cpus`` logical CPUs (skips without Ray), shut down after."""
    ray = pytest.importorskip("ray")
    os.environ["RAY_AUTH_MODE"] = "disabled"
    ray.init(address="local", num_cpus=num_cpus, include_dashboard=False, log_to_driver=False)
    try:
        yield ray
    finally:
        ray.shutdown()
