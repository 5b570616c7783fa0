"""A tiny policy and task for tests: the whole update loop without a real model.

:class:`ToyPolicy` is a 2-layer MLP over a toy vocabulary that predicts the next token from
the current one. The task: the prompt is ``[BOS, a]`` with ``a`` one of K question tokens; a
response is correct when its first token is a's answer token ``a + K`` and well-formed when
it ends with EOS (answer tokens are disjoint from question tokens, so one current-token
policy can satisfy both). :class:`ToyRun` wires rollout -> rewards -> GRPO advantages ->
:func:`evalkit.trainer.step.ppo_update`, with a shuffled data order, so checkpoint/resume
can be tested for exact continuation. A trainer test helper: it lives with the tests, since
evalkit (evalkit.testing included) never imports the trainer.
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from typing import Any

import numpy as np
import torch
from torch import Tensor, nn

from evalkit.trainer.algorithms.advantages import AdvantageInputs, compute_advantages
from evalkit.trainer.algorithms.rollout_correction import rollout_correction
from evalkit.trainer.batch import Response, TrainBatch, collate, response_logprobs
from evalkit.trainer.config import MixPolicyConfig, OptimizerConfig, RolloutCorrectionConfig
from evalkit.trainer.lr_schedule import build_scheduler
from evalkit.trainer.mix_policy import build_group, online_count
from evalkit.trainer.step import StepInputs, StepResult, StepSettings, ppo_update

PAD, EOS, BOS = 0, 1, 2


class ToyPolicy(nn.Module):
    """Embedding -> Linear -> tanh -> Linear: next-token logits from the current token."""

    def __init__(self, vocab: int = 12, hidden: int = 32) -> None:
        super().__init__()
        self.embed = nn.Embedding(vocab, hidden)
        self.hidden = nn.Linear(hidden, hidden)
        self.out = nn.Linear(hidden, vocab)

    def forward(self, input_ids: Tensor, attention_mask: Tensor | None = None) -> Tensor:
        """Logits (B, L, V); ``attention_mask`` is accepted for interface parity and unused."""
        return self.out(torch.tanh(self.hidden(self.embed(input_ids))))


@torch.no_grad()
def sample_responses(
    policy: ToyPolicy, prompt_ids: list[int], n: int, max_tokens: int, temperature: float = 1.0
) -> list[list[int]]:
    """``n`` responses sampled with torch's global generator, each stopped at EOS."""
    return sample_with_logprobs(policy, prompt_ids, n, max_tokens, temperature)[0]


@torch.no_grad()
def sample_with_logprobs(
    policy: ToyPolicy,
    prompt_ids: list[int],
    n: int,
    max_tokens: int,
    temperature: float = 1.0,
    shift: Tensor | None = None,
) -> tuple[list[list[int]], list[list[float]]]:
    """:func:`sample_responses` plus the sampler's log-prob of each token. A ``shift`` (V,)
    added to the logits makes the sampler a perturbed policy q, as a rollout engine whose
    numerics differ from the trainer's; the log-probs are then q's."""
    last = torch.full((n,), prompt_ids[-1], dtype=torch.long)
    out: list[list[int]] = [[] for _ in range(n)]
    lps: list[list[float]] = [[] for _ in range(n)]
    done = torch.zeros(n, dtype=torch.bool)
    for _ in range(max_tokens):
        logits = policy(last[:, None])[:, -1]
        logits = logits if shift is None else logits + shift
        probs = torch.softmax(logits / temperature, dim=-1)
        tok = torch.multinomial(probs, 1).squeeze(1)
        chosen = torch.log_softmax(logits / temperature, dim=-1).gather(1, tok[:, None])
        for i in range(n):
            if not done[i]:
                out[i].append(int(tok[i]))
                lps[i].append(float(chosen[i]))
        done |= tok == EOS
        last = tok
        if bool(done.all()):
            break
    return out, lps


@torch.no_grad()
def greedy_response(policy: ToyPolicy, prompt_ids: list[int], max_tokens: int) -> list[int]:
    """The argmax response (ReMax's baseline rollout); draws no random numbers."""
    last, out = prompt_ids[-1], []
    for _ in range(max_tokens):
        last = int(policy(torch.tensor([[last]]))[0, -1].argmax())
        out.append(last)
        if last == EOS:
            break
    return out


def toy_reward(prompt_ids: list[int], response: list[int], k: int) -> dict[str, float]:
    """accuracy = first token is the answer (question token + k); format = ends with EOS."""
    acc = float(bool(response) and response[0] == prompt_ids[-1] + k)
    fmt = float(bool(response) and response[-1] == EOS)
    return {"accuracy": acc, "format": fmt, "overall": 0.9 * acc + 0.1 * fmt}


class ToyTokenizer:
    """Text of space-separated token ids to ids (enough for offline trajectories)."""

    eos_token_id = EOS

    def encode(self, text: str, add_special_tokens: bool = False) -> list[int]:
        """``"7 8"`` -> ``[7, 8]``."""
        return [int(w) for w in text.split()]

    def decode(self, token_ids: list[int], skip_special_tokens: bool = False) -> str:
        """``[7, 8]`` -> ``"7 8"`` (EOS dropped with ``skip_special_tokens``)."""
        kept = [t for t in token_ids if not (skip_special_tokens and t in (PAD, EOS, BOS))]
        return " ".join(map(str, kept))


@dataclass
class ToyRun:
    """A few-line RL loop on the toy task; state = model, optimizer, RNGs, data position."""

    settings: StepSettings
    seed: int = 0
    k: int = 5
    """Number of questions (and answers); the vocabulary has 3 + 2k tokens."""
    n: int = 4
    prompts_per_step: int = 2
    max_tokens: int = 4
    updates_per_batch: int = 2
    """PPO epochs over each rollout batch (replaces ``settings.ppo_epochs``); mini-batches
    come from ``settings.ppo_mini_batch_size``."""
    lr: float = 0.02
    mix: MixPolicyConfig = field(default_factory=MixPolicyConfig)
    """Mix-policy: the offline trajectory is the answer token followed by EOS."""
    rollout_shift: float = 0.0
    """Scale of a fixed random logit shift of the sampler (0: samples from the policy)."""
    correction: RolloutCorrectionConfig = field(default_factory=RolloutCorrectionConfig)
    """Rollout correction of the update (mismatch metrics in :attr:`rollout_metrics`)."""
    advantage: str = "grpo"
    """grpo, or remax (baseline: the reward of one greedy response per prompt)."""
    lr_schedule: OptimizerConfig | None = None
    """A learning-rate schedule over ``schedule_steps`` training steps (None: constant)."""
    schedule_steps: int = 10

    def __post_init__(self) -> None:
        torch.manual_seed(self.seed)
        np.random.seed(self.seed)
        self.policy = ToyPolicy(BOS + 1 + 2 * self.k)
        self.optimizer = torch.optim.AdamW(self.policy.parameters(), lr=self.lr)
        self.items = list(range(BOS + 1, BOS + 1 + self.k))
        self.epoch, self.position = 0, 0
        self.order = self._order()
        gen = torch.Generator().manual_seed(self.seed + 1)  # leaves the global RNG as it was
        vocab = BOS + 1 + 2 * self.k
        self.shift = self.rollout_shift * torch.randn(vocab, generator=gen)
        self.rollout_metrics: dict[str, float] = {}
        """Engine-vs-trainer mismatch of the last :meth:`step`."""
        self.scheduler = None
        if self.lr_schedule is not None:
            self.scheduler = build_scheduler(self.optimizer, self.lr_schedule, self.schedule_steps)
        self.baselines: Tensor | None = None
        """ReMax: the greedy response's reward, per row of the last rollout batch."""
        self.last: tuple[TrainBatch, Tensor, Tensor] | None = None
        """(batch, overall rewards, advantages) of the last step."""

    def _order(self) -> list[int]:
        return [int(i) for i in np.random.permutation(len(self.items))]

    def data_state(self) -> dict[str, Any]:
        """Where the data stream is (JSON-able)."""
        return {"epoch": self.epoch, "position": self.position, "order": self.order}

    def load_data_state(self, state: dict[str, Any]) -> None:
        """Continue the data stream from ``state``."""
        self.epoch, self.position, self.order = state["epoch"], state["position"], state["order"]

    def _next_prompts(self) -> list[list[int]]:
        prompts = []
        for _ in range(self.prompts_per_step):
            if self.position == len(self.order):
                self.epoch, self.position, self.order = self.epoch + 1, 0, self._order()
            prompts.append([BOS, self.items[self.order[self.position]]])
            self.position += 1
        return prompts

    def rollout(self) -> tuple[TrainBatch, Tensor]:
        """Sample a batch of groups (mix-policy groups when enabled) and their overall rewards."""
        groups, rewards, baselines = [], [], []
        for gid, prompt in enumerate(self._next_prompts()):
            offline = str(prompt[-1] + self.k)  # the reference answer, as text
            count = online_count(self.n, self.mix, offline)
            shift = self.shift if self.rollout_shift else None
            online, lps = sample_with_logprobs(
                self.policy, prompt, count, self.max_tokens, shift=shift
            )
            group = build_group(
                gid,
                prompt,
                [Response(r, logprobs=lp) for r, lp in zip(online, lps, strict=True)],
                n=self.n,
                cfg=self.mix,
                offline_text=offline,
                online_accuracies=[toy_reward(prompt, r, self.k)["accuracy"] for r in online],
                tokenizer=ToyTokenizer(),
                max_response_tokens=self.max_tokens,
            )
            groups.append(group)
            rewards += [toy_reward(prompt, r.token_ids, self.k)["overall"] for r in group.responses]
            if self.advantage == "remax":
                greedy = greedy_response(self.policy, prompt, self.max_tokens)
                baselines += [toy_reward(prompt, greedy, self.k)["overall"]] * len(group.responses)
        self.baselines = torch.tensor(baselines) if baselines else None
        return collate(groups, PAD), torch.tensor(rewards)

    def step(self) -> list[StepResult]:
        """Rollout, old log-probs once, advantages, :func:`ppo_update`'s steps, lr schedule."""
        batch, rewards = self.rollout()
        with torch.no_grad():
            old_logp = response_logprobs(self.policy, batch, self.settings.temperature)
        adv = compute_advantages(
            self.advantage,
            AdvantageInputs(rewards, batch.group_ids, batch.response_mask, self.baselines),
        )
        online = batch.response_mask * (~batch.is_offline)[:, None]
        rc = self.correction
        corr = rollout_correction(old_logp, batch.rollout_logp, online, rc.mode, rc.cap)
        self.rollout_metrics = corr.metrics
        inputs = StepInputs(batch, old_logp, adv, old_logp.clone(), corr.weights)
        self.last = (batch, rewards, adv)
        settings = replace(self.settings, ppo_epochs=self.updates_per_batch)
        results = ppo_update(self.policy, self.optimizer, inputs, settings)
        if self.scheduler is not None:
            self.scheduler.step()
        return results
