"""vLLM rollouts return the log-probs of what they sampled (processed_logprobs, logprobs=0)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import torch

from evalkit.engines.base import Request, SamplingParams
from tests._engine_env import TINY_VLLM_OPTIONS, apply_engine_env

pytestmark = pytest.mark.heavy  # starts a vLLM engine on CPU (~15-60 s)

OPTIONS = TINY_VLLM_OPTIONS


@pytest.fixture(scope="module")
def env() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        apply_engine_env(mp)
        yield


@pytest.mark.timeout(600)
def test_vllm_rollout_logprobs_match_the_trainers_at_temperature(env: None, tmp_path: Path):
    from evalkit.tiny_checkpoint import build_tiny_model
    from evalkit.trainer.actor import ActorPolicy
    from evalkit.trainer.algorithms.rollout_correction import mismatch_metrics
    from evalkit.trainer.batch import Group, collate, response_logprobs
    from evalkit.trainer.rollout import (
        EngineLoop,
        cut_at_visual_tokens,
        make_rollout_engine,
        sample_responses,
        visual_token_ids,
    )

    model = build_tiny_model(tmp_path / "tiny", "qwen2_5_vl", seed=0)
    actor = ActorPolicy.from_pretrained(model)
    loop = EngineLoop()
    vllm = make_rollout_engine("vllm", str(model), actor, OPTIONS, loop)
    try:
        req = Request(id="p", text="Describe the red ball.")
        # temperature != 1 and no top-p: vLLM's default raw_logprobs (before temperature)
        # would differ from the trainer's logits / T; processed_logprobs must not
        params = SamplingParams(max_tokens=8, temperature=0.7, logprobs=True)
        (group,) = sample_responses(vllm, [req], [2], params, 0, loop)
    finally:
        loop.run(vllm.close())
        loop.close()
    assert all(r.logprobs is not None and len(r.logprobs) == len(r.token_ids) for r in group)
    tok = actor.processor.tokenizer  # as the recipe: a sampled placeholder ends the response
    banned = set(visual_token_ids(tok, actor.family))
    group = [cut_at_visual_tokens(r, banned, tok) for r in group]
    enc = actor.encode(req)
    batch = collate([Group(0, enc.prompt_ids, group)], 0)
    actor.set_rows([enc] * len(group))
    with torch.no_grad():
        old = response_logprobs(actor, batch, 0.7)
    assert batch.rollout_logp is not None
    got = mismatch_metrics(old, batch.rollout_logp, batch.response_mask)
    assert got["rollout_corr/abs_logp_diff"] < 1e-3, got
