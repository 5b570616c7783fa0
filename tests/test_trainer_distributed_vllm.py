"""Colocated vLLM rollouts in the distributed recipe: the engine lives in rank 0's worker.

What is shown, on a local Ray instance with 2 FSDP2 workers on gloo and the tiny
Qwen2.5-VL model: after one update, the weights gathered by both ranks and sent by rank 0
into its engine (shared-memory buckets, no file) make the engine's greedy tokens for a
cached-video prompt equal HF generate's on the gathered weights; and a 2-step recipe run
with the colocated engine trains and writes metrics and a checkpoint. Each test starts
Ray, two workers and a vLLM CPU engine (~1-2 min on 2 cores): heavy.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import torch

from evalkit.engines.base import SamplingParams
from tests._engine_env import TINY_VLLM_OPTIONS, apply_engine_env, make_frames

pytestmark = pytest.mark.heavy


@pytest.fixture(scope="module")
def scratch(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The workers' TMPDIR: a file-based sync would write its buckets here."""
    return tmp_path_factory.mktemp("tmpdir")


@pytest.fixture(scope="module")
def ray_local(scratch: Path) -> Iterator[Any]:
    ray = pytest.importorskip("ray")
    pytest.importorskip("vllm")
    with pytest.MonkeyPatch.context() as mp:
        apply_engine_env(mp)  # inherited by the workers and their engine processes
        mp.setenv("RAY_AUTH_MODE", "disabled")
        mp.setenv("TMPDIR", str(scratch))
        # Ray's own session files stay under the session's short RAY_TMPDIR (it wins over
        # TMPDIR; unix socket paths must stay short)
        ray.init(address="local", num_cpus=2, include_dashboard=False, log_to_driver=False)
        try:
            yield ray
        finally:
            ray.shutdown()


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """The tiny model and a 2-row SynthVideo training file (video prompts)."""
    from evalkit.synthvideo import generate, write_unified
    from evalkit.tiny_checkpoint import build_tiny_model

    root = tmp_path_factory.mktemp("colocate")
    model = build_tiny_model(root / "tiny", "qwen2_5_vl", seed=0)
    ann = generate(root / "sv", 1, split="train", seed=0, families=["moving_shape", "yes_no"])
    data = write_unified(ann)
    return model, data


def _config(model: Path, data: Path, root: Path, *extra: str) -> Any:
    from evalkit.trainer.config import load_config

    options = "{" + ", ".join(f"{k}: {str(v).lower()}" for k, v in TINY_VLLM_OPTIONS.items()) + "}"
    return load_config(
        "trainer/configs/grpo_synthvideo_ray2_vllm.yaml",
        [
            f"model={model}",
            f"data.train_path={data}",
            f"data.cache_root={root / 'cache'}",
            f"rollout.engine_options={options}",
            "rollout.n=2",
            "rollout.max_response_tokens=8",
            f"checkpoint.dir={root / 'ckpt'}",
            *extra,
        ],
    )


@torch.no_grad()
def _hf_greedy(actor: Any, request: Any, max_new: int) -> list[int]:
    """HF generate on the actor's module (no token suppressed, as vLLM suppresses none)."""
    from evalkit.trainer.visual_inputs import processor_inputs

    inputs = processor_inputs(actor.processor, actor.family, request)
    out = actor.model.generate(**inputs, max_new_tokens=max_new, do_sample=False)
    return [int(t) for t in out[0, inputs["input_ids"].shape[1] :]]


def _update_inputs(actor: Any, prompt: Any, loader: Any) -> Any:
    """Two responses to the video prompt, one pushed up and one down, strongly."""
    from evalkit.trainer.batch import Group, Response, collate
    from evalkit.trainer.step import StepInputs

    enc = actor.encode(loader.request(prompt))
    batch = collate([Group(0, enc.prompt_ids, [Response([42] * 6), Response([77] * 6)])], 0)
    mask = batch.response_mask.float()
    adv = torch.tensor([4.0, -4.0])[:, None] * mask
    return StepInputs(batch, -3.0 * mask, adv)


def _files(root: Path) -> set[str]:
    return {str(p) for p in root.rglob("*")}


@pytest.mark.timeout(900)
@pytest.mark.parametrize("ranks", ["first", "all"])
def test_colocated_engine_matches_the_updated_actor_without_files(
    ranks: str, ray_local: Any, synth: tuple[Path, Path], scratch: Path, tmp_path: Path
) -> None:
    """``first``: rank 0's engine answers both prompts; ``all``: one prompt per rank's engine."""
    from evalkit.cache import FrameCache
    from evalkit.trainer.actor import ActorPolicy
    from evalkit.trainer.config import OptimizerConfig
    from evalkit.trainer.distributed.colocate import ColocatedRollout
    from evalkit.trainer.distributed.group import GroupSpec, WorkerGroup
    from evalkit.trainer.distributed.rollout_worker import rollout_spec
    from evalkit.trainer.distributed.worker import WorkerSpec
    from evalkit.trainer.frames import PromptLoader
    from evalkit.trainer.recipe_setup import load_train_data
    from evalkit.trainer.step import StepSettings

    model, data_path = synth
    extra = ("rollout.sync_bucket_mb=0.25", f"distributed.rollout_ranks={ranks}")
    cfg = _config(model, data_path, tmp_path, *extra)
    reference = ActorPolicy.from_pretrained(str(model))
    data, _ = load_train_data(cfg, reference, FrameCache(cfg.data.cache_root))
    prompts = [it.prompt() for it in data.items]
    assert len(prompts) == 2 and all(p.videos for p in prompts)
    clip = make_frames(4, 56, 84, seed=3)

    class Clip:  # defined here: pickled by value into the workers
        """The single-process sync test's clip for any handle: HF and vLLM agree on its
        M-RoPE positions (the cached SynthVideo clip's non-uniform frame indices make
        their greedy tokens differ already before any sync; see the lead's report)."""

        def load(self, video: Any) -> Any:
            return clip

    loader = PromptLoader(data.request_builder(SamplingParams()), Clip())
    requests = [loader.request(p) for p in prompts]
    spec = rollout_spec(cfg)
    worker = WorkerSpec(
        model_dir=str(model),
        optimizer=OptimizerConfig(lr=0.05, weight_decay=0.0, grad_clip=None),
        world_size=2,
        loader=loader,
        rollout=spec,
    )
    group = WorkerGroup(GroupSpec(world_size=2, call_timeout_s=400), worker).start()
    try:
        rollout = ColocatedRollout(group, spec.hosts)
        greedy = SamplingParams(max_tokens=10, temperature=0.0)

        def engine_greedy() -> list[list[int]]:
            groups = rollout.sample(prompts, [1, 1], greedy, 0)
            return [list(response.token_ids) for (response,) in groups]

        def hf_greedy() -> list[list[int]]:
            return [_hf_greedy(reference, r, 10) for r in requests]

        before = engine_greedy()
        assert before == hf_greedy()  # the same start, both engines
        settings = StepSettings(micro_batch_size=2, grad_clip=None, loss_agg_mode="token-mean")
        p = prompts[0]
        group.update(_update_inputs(reference, p, loader), [p, p], settings)
        reference.load_state_dict(group.full_state())  # the gathered, updated weights
        updated = hf_greedy()
        assert updated[0] != before[0]  # the update changed the policy's answer
        assert engine_greedy() == before  # not synced yet: the engines keep the old weights
        seen = _files(scratch)
        stats = rollout.sync()
        assert _files(scratch) == seen  # no file (a "file" transport writes buckets here)
        for rank, st in enumerate(stats):
            if rank not in spec.hosts:
                assert st is None  # gathered (a collective) but hosts no engine
                continue
            assert st is not None and st.buckets > 1
            assert st.tensors == len(reference.model.state_dict())  # untied: every tensor
        assert [s is not None for s in stats] == [True, ranks == "all"]
        assert engine_greedy() == updated
    finally:
        group.shutdown()


@pytest.mark.timeout(900)
def test_recipe_runs_two_steps_with_the_colocated_engine(
    ray_local: Any, synth: tuple[Path, Path], tmp_path: Path
) -> None:
    import math

    from evalkit.trainer.distributed.colocate import WorkerRolloutEngine
    from evalkit.trainer.distributed.recipe import DistributedGRPORecipe

    model, data_path = synth
    cfg = _config(model, data_path, tmp_path, "schedule.steps=2", "checkpoint.every=2")
    recipe = DistributedGRPORecipe(cfg)
    recipe.setup(resume=False)
    try:
        assert isinstance(recipe.engine, WorkerRolloutEngine)  # no engine in the driver
        history = recipe.run()
        assert recipe.group is not None
        final = recipe.group.full_state()
    finally:
        recipe.cleanup()
    assert [h["step"] for h in history] == [1, 2]
    assert all(math.isfinite(h["loss"]) and h["groups"] == 2 for h in history)
    assert all(h["response_length"] > 0 for h in history)
    lines = (tmp_path / "metrics.jsonl").read_text().splitlines()
    assert len([x for x in lines if '"step"' in x]) >= 2
    ckpt = tmp_path / "ckpt" / "step_00000002"
    saved = torch.load(ckpt / "model.pt", weights_only=True)
    # the driver's copy is refreshed from the workers for its checkpoint files
    assert all(torch.equal(saved[k], final[k]) for k in final)
    assert (ckpt / "sharded" / ".metadata").is_file()
