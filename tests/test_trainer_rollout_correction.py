"""Rollout correction: engine-vs-trainer mismatch metrics and truncated importance sampling."""

from __future__ import annotations

import itertools
import math
from dataclasses import replace

import pytest
import torch
from torch import Tensor, nn

from evalkit.trainer.algorithms.losses import LossOptions
from evalkit.trainer.algorithms.rollout_correction import (
    is_weights,
    mismatch_metrics,
    rollout_correction,
)
from evalkit.trainer.batch import TrainBatch, response_logprobs
from evalkit.trainer.config import RolloutCorrectionConfig, load_config
from evalkit.trainer.step import StepInputs, StepSettings, accumulate_loss
from tests._tiny_recipe import one_step
from tests._toy_rl import ToyRun

pytestmark = pytest.mark.usefixtures("one_torch_thread")

LN2, LN3 = math.log(2.0), math.log(3.0)
# two rows, the first with one padding token; pi_old / pi_rollout = [[2, .5, -], [2, 3, 1]]
OLD = torch.tensor([[0.5, 0.3, 1.0], [0.2, 0.9, 0.6]]).log()
ROLLOUT = torch.tensor([[0.25, 0.6, 0.7], [0.1, 0.3, 0.6]]).log()
MASK = torch.tensor([[1, 1, 0], [1, 1, 1]])


# -- golden values on hand-computed tensors ------------------------------------------------


def test_token_weights_are_ratios_capped_and_zero_on_padding() -> None:
    got = is_weights(OLD, ROLLOUT, MASK, "token", cap=2.5)
    assert torch.allclose(got, torch.tensor([[2.0, 0.5, 0.0], [2.0, 2.5, 1.0]]))
    uncapped = is_weights(OLD, ROLLOUT, MASK, "token", cap=100.0)
    assert torch.allclose(uncapped, torch.tensor([[2.0, 0.5, 0.0], [2.0, 3.0, 1.0]]))


def test_sequence_weight_is_the_capped_product_over_the_sequence() -> None:
    # row 0: 2 * 0.5 = 1 (the padding token's ratio 1/0.7 is not part of it); row 1: 2*3*1
    uncapped = is_weights(OLD, ROLLOUT, MASK, "sequence", cap=100.0)
    assert torch.allclose(uncapped, torch.tensor([[1.0, 1.0, 0.0], [6.0, 6.0, 6.0]]))
    capped = is_weights(OLD, ROLLOUT, MASK, "sequence", cap=2.5)
    assert torch.allclose(capped, torch.tensor([[1.0, 1.0, 0.0], [2.5, 2.5, 2.5]]))


def test_weights_are_detached() -> None:
    old = OLD.clone().requires_grad_(True)
    assert not is_weights(old, ROLLOUT, MASK, "token", cap=2.0).requires_grad


def test_mismatch_metrics_golden_values() -> None:
    got = mismatch_metrics(OLD, ROLLOUT, MASK)
    # masked log-ratios old - rollout: ln2, -ln2, ln2, ln3, 0
    assert got["rollout_corr/abs_logp_diff"] == pytest.approx((3 * LN2 + LN3) / 5)
    # k3 = r - 1 - ln r: (1 - ln2) + (ln2 - .5) + (1 - ln2) + (2 - ln3) + 0
    assert got["rollout_corr/k3_kl"] == pytest.approx((3.5 - LN2 - LN3) / 5)
    assert got["rollout_corr/kl"] == pytest.approx(-(LN2 + LN3) / 5)
    assert got["rollout_corr/tokens"] == 5.0


def test_correction_leaves_unmeasured_tokens_at_weight_one_and_counts_clipping() -> None:
    corr = rollout_correction(OLD, ROLLOUT, MASK, "token", cap=2.5)
    assert corr.weights is not None
    assert torch.allclose(corr.weights, torch.tensor([[2.0, 0.5, 1.0], [2.0, 2.5, 1.0]]))
    assert corr.metrics["rollout_corr/is_mean"] == pytest.approx((2 + 0.5 + 2 + 2.5 + 1) / 5)
    assert corr.metrics["rollout_corr/is_clipfrac"] == pytest.approx(1 / 5)
    none = rollout_correction(OLD, ROLLOUT, MASK, "none")
    assert none.weights is None and "rollout_corr/k3_kl" in none.metrics


def test_correction_without_engine_logprobs() -> None:
    assert rollout_correction(OLD, None, MASK, "none").metrics == {}
    with pytest.raises(ValueError, match="rollout engine's log-probs"):
        rollout_correction(OLD, None, MASK, "sequence")


def test_config_section_loads_and_checks() -> None:
    cfg = load_config(None, ["algorithm.rollout_correction.mode=sequence"])
    assert cfg.algorithm.rollout_correction == RolloutCorrectionConfig(mode="sequence", cap=2.0)
    from evalkit.errors import ConfigError

    with pytest.raises(ConfigError):
        load_config(None, ["algorithm.rollout_correction.mode=seq"])
    with pytest.raises(ConfigError):
        load_config(None, ["algorithm.rollout_correction.cap=0"])


# -- the weights reach the policy loss, not the KL term -----------------------------------


class TablePolicy(nn.Module):
    """Next-token logits from a table indexed by the current token (vocab 0..V-1, BOS = V)."""

    def __init__(self, vocab: int, seed: int) -> None:
        super().__init__()
        gen = torch.Generator().manual_seed(seed)
        self.theta = nn.Parameter(torch.randn(vocab + 1, vocab, generator=gen))

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Logits (B, L, V)."""
        return self.theta[input_ids]


def _batch(responses: Tensor, bos: int) -> TrainBatch:
    n = responses.shape[0]
    ids = torch.cat([torch.full((n, 1), bos), responses], 1)
    ones = torch.ones_like(ids)
    return TrainBatch(
        ids, ones, responses, ones[:, 1:], torch.arange(n), torch.zeros(n, dtype=torch.bool)
    )


def test_weights_multiply_the_policy_term_only() -> None:
    policy = TablePolicy(4, seed=0)
    batch = _batch(torch.tensor([[0, 1, 2], [3, 3, 1]]), bos=4)
    with torch.no_grad():
        old = response_logprobs(policy, batch)
    adv = torch.tensor([[1.0] * 3, [-0.5] * 3])
    ref = old - 0.3  # a nonzero KL term

    def loss(kl: str, weights: Tensor | None) -> float:
        settings = StepSettings(kl_estimator=kl, kl_coef=0.1, micro_batch_size=1)
        inputs = StepInputs(batch, old, adv, ref, weights)
        return accumulate_loss(policy, inputs, settings, backward=False).loss

    twos = torch.full_like(old, 2.0)
    assert loss("off", twos) == pytest.approx(2 * loss("off", None))
    pg = loss("off", None)
    assert loss("k1", twos) - loss("k1", None) == pytest.approx(pg)


# -- Monte-Carlo: corrected estimates match the on-policy gradient -------------------------

V, BOS = 4, 4


def _advantage(y: Tensor) -> Tensor:
    """A fixed sequence-level score of each response (no baseline: any function works)."""
    first_last = (y[:, 0] == y[:, -1]).float()
    return first_last + 0.5 * (y[:, 0] == 1).float() - 0.4


def _exact_gradient(policy: TablePolicy, length: int) -> Tensor:
    """grad of E_{y~p}[token-mean loss] = -(1/L) sum_y p(y) A(y) sum_t grad log p(y_t|y_t-1),
    by enumerating all V^L responses."""
    ys = torch.tensor(list(itertools.product(range(V), repeat=length)))
    batch = _batch(ys, BOS)
    policy.zero_grad()
    logp = response_logprobs(policy, batch)
    prob = logp.detach().sum(-1).exp()
    (-(prob * _advantage(ys) * logp.sum(-1)).sum() / length).backward()
    grad = policy.theta.grad
    assert grad is not None
    return grad.clone()


def _sample_q(policy: TablePolicy, shift: Tensor, n: int, length: int, seed: int):
    """Responses from q = softmax(theta + shift) and their exact log q per token."""
    gen = torch.Generator().manual_seed(seed)
    logq_table = torch.log_softmax(policy.theta.detach() + shift, -1)
    ctx = torch.full((n,), BOS)
    toks, logq = [], []
    for _ in range(length):
        tok = torch.multinomial(logq_table[ctx].exp(), 1, generator=gen).squeeze(1)
        toks.append(tok)
        logq.append(logq_table[ctx].gather(1, tok[:, None]).squeeze(1))
        ctx = tok
    return torch.stack(toks, 1), torch.stack(logq, 1)


def _chunk_gradients(policy, ys, logq, mode: str, chunks: int) -> Tensor:
    """The step's gradient estimate on each of ``chunks`` equal slices (batch means)."""
    settings = StepSettings(loss_options=LossOptions(0.2, 0.2), micro_batch_size=len(ys))
    out = []
    for part_y, part_q in zip(ys.chunk(chunks), logq.chunk(chunks), strict=True):
        batch = _batch(part_y, BOS)
        with torch.no_grad():
            old = response_logprobs(policy, batch)
        mask = batch.response_mask
        weights = rollout_correction(old, part_q, mask, mode, cap=1e6).weights
        adv = _advantage(part_y)[:, None].expand_as(old)
        policy.zero_grad()
        accumulate_loss(policy, StepInputs(batch, old, adv, None, weights), settings)
        out.append(policy.theta.grad.clone())
    return torch.stack(out)


@pytest.mark.parametrize(("mode", "length"), [("token", 1), ("sequence", 3)])
def test_tis_gradient_matches_the_on_policy_gradient_in_expectation(mode: str, length: int):
    # Token-level weights are exact when each response is one token; for longer responses
    # only the sequence-level product is (the later tokens are still drawn from q).
    policy = TablePolicy(V, seed=1)
    shift = 0.8 * torch.randn(V + 1, V, generator=torch.Generator().manual_seed(2))
    exact = _exact_gradient(policy, length)
    ys, logq = _sample_q(policy, shift, n=40_000, length=length, seed=3)
    chunks = 40

    def z_scores(m: str) -> Tensor:
        g = _chunk_gradients(policy, ys, logq, m, chunks)
        # standard error of the mean from the spread of the chunk means
        se = g.std(0) / math.sqrt(chunks)
        return (g.mean(0) - exact).abs() / se.clamp(min=1e-8)

    corrected, uncorrected = z_scores(mode), z_scores("none")
    # 20 components: |z| > 4.5 anywhere has probability ~1e-4 for an unbiased estimate
    assert float(corrected.max()) < 4.5, corrected
    assert float(uncorrected.max()) > 10.0, uncorrected


# -- on the toy task: the sampler's own log-probs, the metrics of a step -------------------


def test_toy_sampler_logprobs_equal_the_trainers_when_unperturbed() -> None:
    run = ToyRun(StepSettings(micro_batch_size=4), seed=0, updates_per_batch=1)
    run.step()
    assert run.rollout_metrics["rollout_corr/abs_logp_diff"] < 1e-5
    assert run.rollout_metrics["rollout_corr/tokens"] > 0


def test_toy_step_with_a_perturbed_sampler_measures_and_corrects() -> None:
    def run(mode: str) -> ToyRun:
        toy = ToyRun(
            StepSettings(micro_batch_size=4),
            seed=0,
            updates_per_batch=1,
            rollout_shift=1.0,
            correction=RolloutCorrectionConfig(mode=mode, cap=2.0),
        )
        toy.step()
        return toy

    plain, corrected = run("none"), run("token")
    assert plain.rollout_metrics["rollout_corr/abs_logp_diff"] > 0.1
    assert plain.rollout_metrics["rollout_corr/k3_kl"] > 0.0
    assert "rollout_corr/is_mean" not in plain.rollout_metrics
    assert 0 < corrected.rollout_metrics["rollout_corr/is_clipfrac"] < 1
    # same samples, reweighted loss: the updated weights differ
    assert not torch.equal(plain.policy.out.weight, corrected.policy.out.weight)


# -- the HF rollout engine's log-probs; a recipe step's metrics line -----------------------


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory):
    import os

    from evalkit.tiny_checkpoint import build_tiny_model

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "m", "qwen2_5_vl", seed=0)


@pytest.mark.timeout(300)
def test_hf_engine_logprobs_are_those_of_the_processed_distribution(tiny) -> None:
    from transformers.generation.logits_process import TopKLogitsWarper, TopPLogitsWarper

    from evalkit.engines.base import Request, SamplingParams
    from evalkit.trainer.actor import ActorPolicy
    from evalkit.trainer.batch import Group, collate
    from evalkit.trainer.rollout import EngineLoop, SharedHFEngine, sample_responses
    from evalkit.trainer.rollout import visual_token_ids as banned

    actor = ActorPolicy.from_pretrained(tiny)
    engine, loop = SharedHFEngine(actor.model, actor.processor, actor.family), EngineLoop()
    req = Request(id="q", text="Say something")
    params = SamplingParams(max_tokens=6, temperature=0.7, top_p=0.9, top_k=20, logprobs=True)
    (resp,) = sample_responses(engine, [req], [3], params, 11, loop)
    (plain,) = sample_responses(engine, [req], [3], replace(params, logprobs=False), 11, loop)
    assert [r.token_ids for r in resp] == [r.token_ids for r in plain]  # sampling unaffected
    assert all(r.logprobs is not None and len(r.logprobs) == len(r.token_ids) for r in resp)
    enc = actor.encode(req)
    batch = collate([Group(0, enc.prompt_ids, resp)], 0)
    actor.set_rows([enc] * 3)
    with torch.no_grad():  # the distribution sampled from, rebuilt from the full forward
        logits = actor.logits_for(batch)[:, batch.prompt_len - 1 : -1].float()
    logits[..., banned(actor.processor.tokenizer, actor.family)] = -math.inf
    flat = (logits / 0.7).flatten(0, 1)
    flat = TopPLogitsWarper(0.9)(None, TopKLogitsWarper(20)(None, flat))
    q = flat.log_softmax(-1).view_as(logits).gather(-1, batch.response_ids[..., None])[..., 0]
    assert batch.rollout_logp is not None
    diff = (q - batch.rollout_logp) * batch.response_mask
    assert float(diff.abs().max()) < 1e-4
    loop.close()


@pytest.mark.timeout(600)
def test_recipe_step_writes_the_mismatch_to_its_metrics_line(tiny, tmp_path) -> None:
    """... and the count of responses whose scorer raised (reward/scorer_failed)."""

    from evalkit.scoring import reward

    calls = itertools.count()

    def first_fails(sample, prediction, **kw):  # the first response's scorer "raised"
        got = reward(sample, prediction, **kw)
        if next(calls) == 0:
            got |= {"accuracy": 0.0, "format": 0.0, "overall": 0.0, "scorer_failed": 1.0}
        return got

    extra = ("algorithm.rollout_correction.mode=sequence", "algorithm.rollout_correction.cap=3.0")
    _, line = one_step(tiny, tmp_path, *extra, rows=2, response_tokens=6, reward_fn=first_fails)
    assert line["reward/scorer_failed"] == 1.0
    keys = ("abs_logp_diff", "k3_kl", "kl", "tokens", "is_mean", "is_clipfrac")
    assert {f"rollout_corr/{k}" for k in keys} <= set(line)
    assert line["rollout_corr/tokens"] > 0 and line["rollout_corr/k3_kl"] >= 0.0
    assert 0.0 < line["rollout_corr/is_mean"] <= 3.0


def test_vllm_output_logprobs_are_read_per_sampled_token() -> None:
    from types import SimpleNamespace as NS

    from evalkit.engines.base import Request, SamplingParams, Timings
    from evalkit.engines.vllm_engine import completion_from_output

    def lp(x: float) -> NS:  # vLLM's Logprob: .logprob (rank, decoded_token unused)
        return NS(logprob=x)

    # logprobs=0 gives, per position, the sampled token's entry (more entries: top-k asked)
    outs = [
        NS(text="a", token_ids=[5, 7], logprobs=[{5: lp(-0.5)}, {9: lp(-0.1), 7: lp(-2.0)}]),
        NS(text="b", token_ids=[3], logprobs=[{3: lp(-1.5)}]),
    ]
    final = NS(outputs=outs, prompt_token_ids=[1, 2])
    asked = Request(id="r", text="?", sampling=SamplingParams(n=2, logprobs=True))
    got = completion_from_output(asked, final, Timings())
    assert got.logprobs == [[-0.5, -2.0], [-1.5]]
    plain = Request(id="r", text="?", sampling=SamplingParams(n=2))
    assert completion_from_output(plain, final, Timings()).logprobs is None


@pytest.mark.timeout(600)
def test_rejection_sampling_takes_rejected_tokens_out_of_the_update(tiny, tmp_path) -> None:
    """verl's rollout_rs: the keep mask replaces the response mask before advantages/loss."""
    recipe, line = one_step(
        tiny,
        tmp_path,
        # the engine is the actor: k1 = -log-ratio ~ 0 lies outside [ln 2, ln 3] everywhere
        "algorithm.rollout_correction.rollout_rs=token_k1",
        "algorithm.rollout_correction.rollout_rs_threshold=2.0_3.0",
    )
    assert line["rollout_corr/tokens"] > 0
    assert line["rollout_corr/rollout_rs_masked_fraction"] == 1.0
    assert line["response_length"] > 0  # as sampled
    update = recipe.last_update
    assert update["response_mask"].sum() == 0 and update["advantages"].abs().sum() == 0
