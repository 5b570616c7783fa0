"""The Engine protocol: one request in, one completion out, asynchronously."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Protocol, runtime_checkable

import numpy as np

from evalkit.video.types import Frames


@dataclass(frozen=True)
class SamplingParams:
    """Generation settings; greedy by default (evaluation)."""

    max_tokens: int = 256
    temperature: float = 0.0
    top_p: float = 1.0
    top_k: int = -1
    n: int = 1
    seed: int | None = None
    stop: tuple[str, ...] = ()
    logprobs: bool = False
    """Return each sampled token's log-prob under the distribution it was drawn from (after
    temperature, top-k/p and suppressed tokens) in ``Completion.logprobs``."""


@dataclass
class Request:
    """A prompt (user text, with ``media`` referenced in order) ready for an engine.

    The engine applies the model's chat template and inserts the visual placeholders;
    frames arrive already sampled and resized and must not be touched again. With an
    ``assistant_prefix`` the model's turn starts with that text and the model continues
    it; the completion holds the continuation only.
    """

    id: str
    text: str
    videos: list[Frames] = field(default_factory=list)
    images: list[np.ndarray] = field(default_factory=list)
    system: str | None = None
    sampling: SamplingParams = field(default_factory=SamplingParams)
    metadata: dict[str, Any] = field(default_factory=dict)
    assistant_prefix: str | None = None
    """Start of the assistant's turn, pre-filled (an official prompt's, verbatim)."""


@dataclass
class Timings:
    """Wall-clock times (``time.time()``) of one request's life in the engine."""

    submitted: float = 0.0
    first_token: float | None = None
    finished: float | None = None


@dataclass
class Completion:
    """What an engine returns for a request (``texts`` has ``n`` entries)."""

    request_id: str
    texts: list[str]
    prompt_tokens: int = 0
    output_tokens: int = 0
    timings: Timings = field(default_factory=Timings)
    token_ids: list[list[int]] | None = None
    logprobs: list[list[float]] | None = None
    """Per completion, each token's log-prob as sampled (asked with SamplingParams.logprobs)."""

    @property
    def text(self) -> str:
        """The first (for greedy decoding, the only) completion."""
        return self.texts[0] if self.texts else ""


@runtime_checkable
class Engine(Protocol):
    """An inference backend (vLLM, HF transformers, an OpenAI-compatible server)."""

    async def generate(self, request: Request) -> Completion:
        """Generate for one request; many calls may be in flight at once."""
        ...

    async def close(self) -> None:
        """Release the backend (processes, GPU memory, HTTP sessions)."""
        ...


@runtime_checkable
class BatchEngine(Engine, Protocol):
    """An engine that also generates a whole batch in one call (the vanilla baseline's
    ``LLM.generate`` on batches: ``evalkit run --mode sync``)."""

    async def generate_batch(self, requests: list[Request]) -> list[Completion]:
        """Generate for every request of the batch, in order."""
        ...


@runtime_checkable
class ReloadsWeights(Protocol):
    """An engine that can take another checkpoint's weights without starting again."""

    async def load_weights(self, path: str) -> None:
        """Load the weights of checkpoint folder ``path`` (same architecture) in place; no
        reply after it is computed from the previous weights."""
        ...
