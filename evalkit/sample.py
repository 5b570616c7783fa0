"""The unit of evaluation: one question about some media, with its target."""

from __future__ import annotations

import string
from typing import Annotated, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

OPTION_LETTERS = string.ascii_uppercase  # A-Z: Video-MMMU has questions with 11 options (A-K)
MAX_OPTIONS = len(OPTION_LETTERS)
"""The most options a question may have: one per letter A-Z (26). A row with more is an
invalid row, for ``bench validate`` and the loaders alike (``bench.answers.parse_options``)."""


class VideoRef(BaseModel):
    """A video file, optionally restricted to a [start, end] window in seconds."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["video"] = "video"
    path: str
    start: float | None = None
    end: float | None = None


class ImageRef(BaseModel):
    """A still image file."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    kind: Literal["image"] = "image"
    path: str


MediaRef = Annotated[VideoRef | ImageRef, Field(discriminator="kind")]


class Sample(BaseModel):
    """One benchmark item.

    ``options`` hold the option TEXTS without their letters; letters are assigned by
    position (A, B, ...) when prompts are rendered and answers scored. ``fields`` carry
    whatever the official breakdowns group by (duration, category, task, ...).
    """

    model_config = ConfigDict(extra="forbid")

    id: str
    task_type: str
    question: str
    target: Any = None
    options: list[str] = Field(default_factory=list)
    media: list[MediaRef] = Field(default_factory=list)
    benchmark: str = ""
    fields: dict[str, Any] = Field(default_factory=dict)

    @property
    def letters(self) -> list[str]:
        """Option letters in order (``["A", "B", ...]``)."""
        return list(OPTION_LETTERS[: len(self.options)])
