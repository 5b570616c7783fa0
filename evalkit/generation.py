"""The generation settings a benchmark runs with (sampling, not video decoding): its
pinned ``generation`` settings and the token budget of its prompt (plain ``max_tokens``;
thinking ``max_tokens_thinking``, also for an official prompt that reasons first), unless
the run caps tokens itself."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from evalkit.engines.base import SamplingParams

if TYPE_CHECKING:
    from evalkit.bench.spec import GenerationDefaults


def sampling_for(
    gen: GenerationDefaults, thinking: bool, max_tokens: int | None = None
) -> SamplingParams:
    """SamplingParams of the pinned settings (greedy = temperature 0) and the budget."""
    cap = max_tokens or (gen.max_tokens_thinking if thinking else gen.max_tokens)
    if gen.greedy:
        return SamplingParams(max_tokens=cap, temperature=0.0)
    return SamplingParams(
        max_tokens=cap,
        temperature=float(gen.temperature or 0.0),
        top_p=1.0 if gen.top_p is None else gen.top_p,
        top_k=-1 if gen.top_k is None else gen.top_k,
    )


def describe(sampling: SamplingParams) -> dict[str, Any]:
    """The decoding settings that change a result (recorded in the run's fingerprint)."""
    return {
        "max_tokens": sampling.max_tokens,
        "temperature": sampling.temperature,
        "top_p": sampling.top_p,
        "top_k": sampling.top_k,
    }
