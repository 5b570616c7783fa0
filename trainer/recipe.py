"""The GRPO-family recipe on one machine: setup / run / cleanup (torchtune style).

One step: prompts from the data -> rollouts through an evalkit Engine (n per prompt, or n-1
plus the offline slot with mix-policy) -> rewards from evalkit's scorers -> DAPO dynamic
sampling (optional) -> advantages -> micro-batched policy step -> metrics -> checkpoint.
Everything algorithmic lives in the modules it calls; this class only wires them.
"""

from __future__ import annotations

import copy
import dataclasses
import logging
import time
from pathlib import Path
from typing import Any

import torch

from evalkit.engines.base import SamplingParams
from evalkit.engines.cpu_memory import reserves_cpu_memory
from evalkit.engines.family import trainable_family
from evalkit.errors import DataError

from .actor import ActorPolicy, maybe_fsdp
from .algorithms import AdvantageInputs, AdvantageOptions, compute_advantages, token_kl
from .algorithms.dynamic_sampling import collect_groups, metric_values
from .algorithms.kl_control import KL_CONTROLLERS, batch_kl
from .algorithms.rollout_correction import Correction, rollout_correction
from .batch import Group, TrainBatch, collate, online_texts
from .checkpoint import latest_checkpoint, load_checkpoint, save_checkpoint
from .config import TrainerConfig
from .data import TrainItem
from .eval_hook import EvalHook
from .frames import PromptLoader, frame_source
from .greedy import greedy_responses
from .inputs import prepare_inputs
from .loggers import check_loggers, make_sinks
from .lr_schedule import current_lr
from .metrics import MetricsLog, update_record
from .mix_policy import build_group, merge_offline_rewards, online_count
from .model_parts import enable_gradient_checkpointing
from .recipe_setup import build_training, load_train_data, load_validator
from .reward_loader import RewardFn, load_reward_function
from .rewards import compute_rewards
from .rollout import (
    EngineLoop,
    cut_at_visual_tokens,
    make_rollout_engine,
    release_weight_sync,
    sample_responses,
    sleep_engine,
    sync_weights,
    visual_token_ids,
)
from .step import StepInputs, StepSettings, compute_logprobs, ppo_update, summarize_updates
from .timing import PhaseTimer
from .vllm_memory import cpu_options, preflight

log = logging.getLogger(__name__)


class GRPORecipe:
    """Owns the actor, data, rollout engine, optimizer, metrics and eval hook of one run."""

    ref_on_driver = True
    """Whether this process holds the reference policy (False: the workers hold it)."""

    def __init__(self, cfg: TrainerConfig, reward_fn: RewardFn | None = None) -> None:
        self.cfg = cfg
        if reward_fn is None and cfg.rewards.function:  # before any model loads: fail fast
            reward_fn = load_reward_function(cfg.rewards.function)
        self.reward_fn = reward_fn
        self.start_step = 0
        self.history: list[dict[str, Any]] = []
        self.last_texts: dict[str, list[str]] = {}
        """Online response texts of the last step, per sample id (for inspection)."""
        self.last_update: dict[str, torch.Tensor | None] = {}
        """Rewards, ReMax baselines, advantages and response mask of the last update."""
        self.timer = PhaseTimer()
        self.scorer_failed = 0
        """Responses of the current step whose scorer raised (rewarded 0, counted)."""
        ctrl = cfg.algorithm.kl.kl_ctrl
        self.kl_ctrl = KL_CONTROLLERS.get(ctrl.type)(
            cfg.algorithm.kl.coef, ctrl.target_kl, ctrl.horizon
        )
        """The in-reward KL coefficient (verl's kl_ctrl; saved in checkpoints)."""

    @property
    def out_dir(self) -> Path:
        """Where metrics and evaluation runs go."""
        return Path(self.cfg.output_dir or Path(self.cfg.checkpoint.dir).parent)

    def setup(self, resume: bool = True) -> None:
        """Load model, data, optimizer, rollout engine; continue from the latest checkpoint."""
        from evalkit.cache import FrameCache

        cfg = self.cfg
        self.loggers = check_loggers(cfg)  # a listed logger's missing package: an error now
        prepare_inputs(cfg)  # built on demand, or refused before anything loads
        trainable_family(cfg.model)  # a family the trainer does not train: one line, now
        if self._engine_here() and reserves_cpu_memory(cfg.rollout.engine):
            preflight(cpu_options(cfg.rollout.engine_options))  # before any model loads
        torch.manual_seed(cfg.seed)
        self.actor = ActorPolicy.from_pretrained(cfg.model)
        self.actor.share_vision_per_group = cfg.actor.share_vision_per_group
        self.actor.padding_free = cfg.actor.padding_free  # the ref copy below inherits these
        self.actor.logprob_chunk_tokens = cfg.actor.logprob_chunk_tokens
        self.ref: ActorPolicy | None = None
        if cfg.algorithm.kl.estimator != "off" and self.ref_on_driver:
            self.ref = copy.deepcopy(self.actor).eval().requires_grad_(False)
        if cfg.actor.gradient_checkpointing:  # after the copy: the reference never trains
            enable_gradient_checkpointing(self.actor.model)
        maybe_fsdp(self.actor.model)
        cache = FrameCache(cfg.data.cache_root)
        self.data, self.filtered_overlong = load_train_data(cfg, self.actor, cache)
        self.validator = load_validator(cfg, self.actor, cache)
        self.builder = self.data.request_builder(SamplingParams())
        # batches carry cache paths; rollout and the actor load the frames through this
        self.loader = PromptLoader(self.builder, frame_source(cfg.data.frame_source))
        self.actor.loader = self.loader
        if self.ref is not None:
            self.ref.loader = self.loader
        self.optimizer, self.scheduler = build_training(cfg, self.actor)
        self.settings = StepSettings.from_config(cfg)
        self.loop = EngineLoop()
        self.engine = self._make_engine()
        latest = latest_checkpoint(cfg.checkpoint.dir) if resume else None
        if latest is not None:
            resumed = load_checkpoint(latest, self.actor, self.optimizer, scheduler=self.scheduler)
            self.data.load_state_dict(resumed.data_state)
            self.kl_ctrl.value = float(resumed.extra.get("kl_coef", self.kl_ctrl.value))
            self.start_step = resumed.step
            log.info("resumed from %s (step %d)", latest, resumed.step)
        tensorboard = "tensorboard" in self.loggers
        sinks = make_sinks(cfg, self.out_dir)
        self.metrics = MetricsLog(self.out_dir, cfg.schedule.steps, tensorboard, sinks)
        self.eval_hook = EvalHook(cfg, self.out_dir, self.metrics.write)

    def run(self) -> list[dict[str, Any]]:
        """Train from ``start_step`` to ``schedule.steps``; returns the per-step metrics."""
        cfg = self.cfg
        every = cfg.checkpoint.every
        before = self._validate(self.start_step)
        if before:  # validation before training: its own record, at the start step
            self.history.append({"step": self.start_step, **before})
            self.metrics.write(self.start_step, before, progress=False)
        first = {"data/filtered_overlong": float(self.filtered_overlong)}
        for step in range(self.start_step + 1, cfg.schedule.steps + 1):
            values = first | self.train_step(step) | self._validate(step)
            first = {}
            self.history.append({"step": step, **values})
            self.metrics.write(step, values)
            if (every and step % every == 0) or step == cfg.schedule.steps:
                self._save_checkpoint(step)
            self.eval_hook.maybe_run(step, self.actor.model, self.actor.processor)
        return self.history

    def _save_checkpoint(self, step: int) -> Path:
        """The checkpoint of ``step`` (the distributed recipe adds the workers' shards)."""
        cfg = self.cfg
        return save_checkpoint(
            cfg.checkpoint.dir,
            step,
            self.actor,
            self.optimizer,
            self.data.state_dict(),
            extra={"model": cfg.model, "kl_coef": self.kl_ctrl.value},
            keep_last=cfg.checkpoint.keep_last,
            scheduler=self.scheduler,
        )

    def cleanup(self) -> None:
        """Wait for the last evaluation; close the engine and the metrics."""
        self.eval_hook.close()
        release_weight_sync(self.engine)
        self.loop.run(self.engine.close())
        self.loop.close()
        self.metrics.close()

    def _validate(self, step: int) -> dict[str, float]:
        """``val/...`` metrics when validation is due at ``step`` (see trainer.validation)."""
        if self.validator is None or not self.validator.due(step, self.start_step):
            return {}
        self.actor.model.eval()
        self._sync()
        cfg = self.cfg
        sampling = SamplingParams(
            max_tokens=cfg.rollout.max_response_tokens,
            temperature=cfg.trainer.val_temperature,
            top_p=cfg.trainer.val_top_p,
        )
        seed = cfg.seed * 1_000_003 + step * 1009 + 7  # not a training rollout's seed
        values = self.validator.run(
            self.engine, self.loop, self.actor, self._rewards, sampling, seed
        )
        self._sleep()
        return values | {"val/step": float(step)}

    # -- one step -------------------------------------------------------------------------

    def train_step(self, step: int) -> dict[str, Any]:
        """Rollout, rewards, advantages, update; returns the step's metrics."""
        t0 = time.perf_counter()
        cfg = self.cfg
        bs, ds = cfg.schedule.batch_size, cfg.algorithm.dynamic_sampling
        self.scorer_failed = 0
        metrics: dict[str, Any] = {}
        tries = iter(range(10**6))
        if ds.enable:
            result = collect_groups(
                lambda: self._groups(self.data.next_batch(bs), step, next(tries)),
                lambda g: metric_values(g.meta["rewards"], ds.metric).tolist(),
                bs,
                ds.max_tries,
                ds.keep_singletons,
                ds.on_shortfall,
                ds.keep_rule,
            )
            groups = result.groups
            metrics |= result.metrics()
            if not groups:
                if cfg.optimizer.lr_step_per == "train_step":
                    self._step_schedule()  # the lr stays a function of the step number
                return metrics | {"skipped_no_signal": 1.0, "time_s": time.perf_counter() - t0}
        else:
            groups = self._groups(self.data.next_batch(bs), step, 0)
        metrics |= self._update(groups)
        metrics |= self.timer.take()
        metrics["reward/scorer_failed"] = float(self.scorer_failed)  # responses rewarded 0
        metrics["time_s"] = time.perf_counter() - t0
        return metrics

    def _groups(self, items: list[TrainItem], step: int, attempt: int) -> list[Group]:
        """One generation batch: rollouts, rewards and (mix-policy) offline slots per prompt."""
        cfg = self.cfg
        prompts = [it.prompt() for it in items]  # cache paths: rollout loads the frames
        self.timer.start("rollout")
        requests = [self.loader.request(p) for p in prompts]
        encoded = [self.actor.encode(r) for r in requests]
        for enc in encoded:
            if len(enc.prompt_ids) > cfg.data.max_prompt_tokens:
                raise DataError(
                    f"sample {enc.sample_id}: prompt of {len(enc.prompt_ids)} tokens (visual "
                    f"included) exceeds data.max_prompt_tokens={cfg.data.max_prompt_tokens}"
                )
        counts = [online_count(cfg.rollout.n, cfg.mix_policy, it.offline_output) for it in items]
        sampling = SamplingParams(
            max_tokens=cfg.rollout.max_response_tokens,
            temperature=cfg.rollout.temperature,
            top_p=cfg.rollout.top_p,
            logprobs=True,  # the engine's own, for the rollout correction
        )
        self.actor.model.eval()
        self._sync()
        seed = (cfg.seed * 1_000_003 + step * 1009 + attempt * 101) * 64
        online = self._sample(prompts, requests, counts, sampling, seed)
        remax = cfg.algorithm.advantage == "remax"
        baselines = self._greedy_baselines(items, requests) if remax else []
        tok = self.actor.processor.tokenizer
        banned = set(visual_token_ids(tok, self.actor.family))
        online = [[cut_at_visual_tokens(r, banned, tok) for r in group] for group in online]
        self._sleep()  # GPU memory to training
        self.timer.stop("rollout")
        del requests  # the frames stay with the rollout; groups carry prompts[i]
        groups = []
        for gi, (it, enc, resp) in enumerate(zip(items, encoded, online, strict=True)):
            rewards = self._rewards(it, [r.text for r in resp], [len(r.token_ids) for r in resp])
            group = build_group(
                attempt * len(items) + gi,
                enc.prompt_ids,
                resp,
                n=cfg.rollout.n,
                cfg=cfg.mix_policy,
                offline_text=it.offline_output,
                online_accuracies=rewards["accuracy"].tolist(),
                tokenizer=self.actor.processor.tokenizer,
                max_response_tokens=cfg.rollout.max_response_tokens,
                sample=it.sample,
            )
            if group.meta.get("offline_inserted"):
                off = group.responses[-1]  # scored on its own (truncated) text
                extra = self._rewards(it, [off.text], [len(off.token_ids)])
                rewards = merge_offline_rewards(group, rewards, extra)
            group.meta |= {"rewards": rewards, "prompt": prompts[gi]}
            if remax:
                group.meta["baseline"] = baselines[gi]
            groups.append(group)
        return groups

    def _engine_here(self) -> bool:
        """Whether this process builds the rollout engine (not the distributed workers)."""
        return True

    def _make_engine(self) -> Any:
        """The rollout engine (the distributed recipe may host it in its workers instead)."""
        ro = self.cfg.rollout
        options = dict(ro.engine_options)
        if reserves_cpu_memory(ro.engine):
            options = cpu_options(options)  # vLLM's 0.9 is of the CPU memory node there
        return make_rollout_engine(
            ro.engine, self.cfg.model, self.actor, options, self.loop, ro.sleep_level
        )

    def _sample(
        self,
        prompts: list[Any],
        requests: list[Any],
        counts: list[int],
        sampling: SamplingParams,
        seed: int,
    ) -> list[list[Any]]:
        """``counts[i]`` responses to each prompt (``requests``: the prompts, rendered)."""
        return sample_responses(self.engine, requests, counts, sampling, seed, self.loop)

    def _sleep(self) -> None:
        """Put the rollout engine to sleep while the actor trains (where it can)."""
        sleep_engine(self.engine, self.loop, self.cfg.rollout.sleep_level)

    def _sync(self) -> None:
        """Wake the rollout engine and give it the actor's current weights."""
        ro = self.cfg.rollout
        sync_weights(self.engine, self.actor, self.loop, ro.sync_bucket_mb, ro.sync_transport)

    def _greedy_baselines(self, items: list[TrainItem], requests: list[Any]) -> list[float]:
        """ReMax: the overall reward of one greedy response per prompt (verl's baseline)."""
        max_tokens = self.cfg.rollout.max_response_tokens
        greedy = greedy_responses(self.engine, requests, self.actor, max_tokens, self.loop)
        return [
            float(self._rewards(it, [r.text], [len(r.token_ids)])["overall"][0])
            for it, r in zip(items, greedy, strict=True)
        ]

    def _rewards(self, item: TrainItem, texts: list[str], lengths: list[int]) -> dict[str, Any]:
        with self.timer("reward"):
            return self._score(item, texts, lengths)

    def _score(self, item: TrainItem, texts: list[str], lengths: list[int]) -> dict[str, Any]:
        rb = compute_rewards(
            [item.sample] * len(texts),
            texts,
            lengths,
            self.cfg.rewards,
            self.cfg.overlong_max_length,
            self.reward_fn,
        )
        self.scorer_failed += len(rb.scorer_failed)  # per_key leaves them out (GDPO)
        return rb.per_key

    def _update(self, groups: list[Group]) -> dict[str, Any]:
        cfg, algo = self.cfg, self.cfg.algorithm
        tok = self.actor.processor.tokenizer
        pad = tok.pad_token_id if tok.pad_token_id is not None else tok.eos_token_id
        batch = collate(groups, int(pad), cfg.rollout.max_response_tokens)
        rows = [g.meta["prompt"] for g in groups for _ in g.responses]
        self.actor.set_rows(rows)
        rewards = {
            k: torch.cat([g.meta["rewards"][k] for g in groups]) for k in groups[0].meta["rewards"]
        }
        with self.timer("old_logprob"):
            old_logp = self._logprobs(batch, rows)
        ref_logp, kl, kl_metrics = self._reference(batch, rows, old_logp)
        corr = self._correction(batch, old_logp)
        sampled = batch  # response lengths are reported as sampled
        if corr.keep is not None:  # rejection sampling: rejected tokens leave the update
            batch = dataclasses.replace(batch, response_mask=batch.response_mask * corr.keep)
        baseline = None
        if "baseline" in groups[0].meta:  # ReMax: each row's prompt's greedy reward
            baseline = torch.tensor([g.meta["baseline"] for g in groups for _ in g.responses])
        options = AdvantageOptions.from_config(algo)
        if kl is not None:  # the controller's coefficient of this step
            beta = kl_metrics["actor/reward_kl_penalty_coeff"]
            options = dataclasses.replace(options, kl_coef=beta)
        adv = compute_advantages(
            algo.advantage,
            AdvantageInputs(rewards, batch.group_ids, batch.response_mask, baseline, kl),
            options,
        )
        self.last_update = {
            "overall": rewards["overall"],
            "baseline": baseline,
            "advantages": adv,
            "response_mask": batch.response_mask,
        }
        # old log-probs above come from the rollout's weights, once; every update reuses them
        lr, per_update = current_lr(self.optimizer), cfg.optimizer.lr_step_per == "optimizer_step"
        inputs = StepInputs(batch, old_logp, adv, ref_logp, corr.weights)
        sched = self.scheduler if per_update else None
        with self.timer("update"):
            results = self._policy_update(inputs, rows, sched)
        if not per_update:  # verl: once per training step, after the actor update
            self._step_schedule()
        self.last_texts = online_texts(groups)
        summary = dict(summarize_updates(results)) | corr.metrics | kl_metrics
        return update_record(summary, rewards, sampled, len(groups), lr)

    def _reference(
        self, batch: TrainBatch, rows: list[Any], old_logp: torch.Tensor
    ) -> tuple[torch.Tensor | None, torch.Tensor | None, dict[str, float]]:
        """Reference log-probs (KL on), and with the KL in the reward its per-token values
        and the controller's step, as verl's apply_kl_penalty: before rejection sampling."""
        algo = self.cfg.algorithm
        if algo.kl.estimator == "off":
            return None, None, {}
        with self.timer("ref_logprob"):
            ref_logp = self._ref_logprobs(batch, rows)
        if not algo.kl.in_reward:
            return ref_logp, None, {}
        kl = token_kl(algo.kl.estimator, old_logp, ref_logp) * batch.response_mask
        return ref_logp, kl, self._kl_penalty_step(kl, batch.response_mask)

    def _kl_penalty_step(self, kl: torch.Tensor, mask: torch.Tensor) -> dict[str, float]:
        """The coefficient this step's rewards use, then the controller's update (verl)."""
        beta, current = self.kl_ctrl.value, batch_kl(kl, mask)
        self.kl_ctrl.update(current, n_steps=int(mask.shape[0]))
        return {"actor/reward_kl_penalty": current, "actor/reward_kl_penalty_coeff": beta}

    def _logprobs(self, batch: TrainBatch, rows: list[Any]) -> torch.Tensor:
        """Old log-probs of ``batch`` (the distributed recipe asks its workers instead)."""
        mbs, temp = self.settings.micro_batch_size, self.settings.temperature
        return compute_logprobs(self.actor, batch, mbs, temp, self.settings.max_token_len)

    def _ref_logprobs(self, batch: TrainBatch, rows: list[Any]) -> torch.Tensor:
        """Reference log-probs of ``batch`` (the distributed recipe asks its workers)."""
        if self.ref is None:
            raise RuntimeError("KL is on but no reference policy was built")
        self.ref.set_rows(rows)
        mbs, temp = self.settings.micro_batch_size, self.settings.temperature
        return compute_logprobs(self.ref, batch, mbs, temp, self.settings.max_token_len)

    def _step_schedule(self) -> None:
        """Advance the learning-rate schedule once per training step (or skipped step)."""
        self.scheduler.step()

    def _policy_update(self, inputs: StepInputs, rows: list[Any], sched: Any) -> list[Any]:
        """The actor update (the distributed recipe runs it on its workers)."""
        return ppo_update(self.actor, self.optimizer, inputs, self.settings, sched)

    def _correction(self, batch: TrainBatch, old_logp: torch.Tensor) -> Correction:
        """Engine-vs-trainer mismatch on the online tokens, and TIS weights when asked."""
        rc = self.cfg.algorithm.rollout_correction
        online = batch.response_mask * (~batch.is_offline)[:, None]
        return rollout_correction(
            old_logp,
            batch.rollout_logp,
            online,
            rc.mode,
            rc.cap,
            rc.rollout_is_batch_normalize,
            rc.rollout_rs,
            rc.rollout_rs_threshold,
        )
