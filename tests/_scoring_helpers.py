"""Builds samples for the scoring tests."""

from __future__ import annotations

from typing import Any

from evalkit.sample import Sample


def sample(
    task_type: str, target: Any = None, options: list[str] | None = None, **fields: Any
) -> Sample:
    """A sample of ``task_type`` with ``target``, option texts and breakdown fields."""
    return Sample(
        id="s1",
        task_type=task_type,
        question="What happens in the video?",
        target=target,
        options=options or [],
        fields=fields,
    )
