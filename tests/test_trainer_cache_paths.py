"""Batches carry frame-cache paths + VideoMeta; rollout and the actor map the frames themselves."""

from __future__ import annotations

import io
import os
import pickle
from dataclasses import replace
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch

from evalkit.cache import FrameCache
from evalkit.engines.base import SamplingParams
from evalkit.errors import CacheError
from evalkit.trainer.actor import ActorPolicy
from evalkit.trainer.batch import Group, Response, collate
from evalkit.trainer.config import DataConfig, load_config
from evalkit.trainer.data import TrainData, load_items
from evalkit.trainer.frames import CacheFrames, DecodeFrames, PromptLoader, frame_source
from evalkit.trainer.recipe import GRPORecipe
from evalkit.trainer.step import compute_logprobs

os.environ.setdefault("HF_HUB_OFFLINE", "1")
PER_ITEM_BYTES = 4096  # "tens of bytes" of path, the VideoMeta and the Sample
ARRAY_LIMIT = 1024  # elements; small reward/advantage tensors are fine, pixels are not


class NoFramesPickler(pickle.Pickler):
    """A pickler that refuses frame-like payloads: any uint8 array or tensor, any big one."""

    def reducer_override(self, obj: Any) -> Any:
        if isinstance(obj, np.ndarray) and (obj.dtype == np.uint8 or obj.size > ARRAY_LIMIT):
            raise TypeError(f"frame-like array {obj.dtype} {obj.shape} pickled")
        if isinstance(obj, torch.Tensor) and (
            obj.dtype == torch.uint8 or obj.numel() > ARRAY_LIMIT
        ):
            raise TypeError(f"frame-like tensor {obj.dtype} {tuple(obj.shape)} pickled")
        return NotImplemented


def strict_pickle(obj: object) -> bytes:
    """``obj`` pickled, or TypeError naming the frame-like array found in it."""
    buf = io.BytesIO()
    NoFramesPickler(buf).dump(obj)
    return buf.getvalue()


def test_the_pickler_does_catch_frames() -> None:
    frames = np.zeros((4, 56, 84, 3), dtype=np.uint8)
    with pytest.raises(TypeError, match="uint8"):
        strict_pickle({"videos": [frames]})
    with pytest.raises(TypeError, match="tensor"):
        strict_pickle([torch.zeros(4, 1176)])  # processed pixel_values (float)
    assert strict_pickle(torch.zeros(8))  # a reward vector is fine


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    from evalkit.synthvideo import generate, write_unified
    from evalkit.tiny_checkpoint import build_tiny_model

    root = tmp_path_factory.mktemp("cache_paths")
    model = build_tiny_model(root / "tiny", "qwen2_5_vl", seed=0)
    ann = generate(root / "sv", 1, split="train", seed=0, families=["moving_shape", "yes_no"])
    data = write_unified(ann)
    cfg = DataConfig(
        train_path=str(data), video_max_pixels=12544, video_max_frames=4, shuffle=False
    )
    actor = ActorPolicy.from_pretrained(model)
    train = TrainData(load_items(data), cfg, FrameCache(root / "cache"), 0, actor.family.factor)
    train.build_cache()
    builder = train.request_builder(SamplingParams())
    actor.loader = PromptLoader(builder, CacheFrames())
    return {"root": root, "model": model, "data": data, "train": train, "actor": actor}


def test_prompts_handed_to_rollout_hold_paths_and_meta_not_frames(world: dict[str, Any]) -> None:
    train: TrainData = world["train"]
    prompts = [it.prompt() for it in train.items]
    blob = strict_pickle(prompts)
    assert len(blob) < PER_ITEM_BYTES * len(prompts)
    for item, prompt in zip(train.items, prompts, strict=True):
        (video,) = prompt.videos
        assert video.entry == item.cache_paths[0]
        assert Path(video.entry).is_file()
        assert len(video.meta.indices) == 4


def test_rollout_request_equals_the_array_carrying_one(world: dict[str, Any]) -> None:
    train: TrainData = world["train"]
    loader: PromptLoader = world["actor"].loader
    builder = train.request_builder(SamplingParams())
    for item in train.items:
        old = builder(item.sample)  # the previous path: frames read by the driver
        new = loader.request(pickle.loads(pickle.dumps(item.prompt())))
        assert (new.id, new.text, new.system, new.assistant_prefix) == (
            old.id,
            old.text,
            old.system,
            old.assistant_prefix,
        )
        assert [v.meta for v in new.videos] == [v.meta for v in old.videos]
        assert all(
            np.array_equal(a.array, b.array) for a, b in zip(new.videos, old.videos, strict=True)
        )


def _batch(prompt_ids: list[list[int]]) -> Any:
    """Two responses per prompt, rows in group order (as the recipe collates them)."""
    groups = [
        Group(i, ids, [Response([5, 6, 7]), Response([8, 9])]) for i, ids in enumerate(prompt_ids)
    ]
    return collate(groups, pad_id=0)


def test_actor_logprobs_from_paths_equal_the_array_path(world: dict[str, Any]) -> None:
    train: TrainData = world["train"]
    actor: ActorPolicy = world["actor"]
    builder = train.request_builder(SamplingParams())
    encoded = [actor.encode(builder(it.sample)) for it in train.items]
    batch = _batch([e.prompt_ids for e in encoded])
    actor.set_rows([e for e in encoded for _ in range(2)])
    before = compute_logprobs(actor, batch, micro_batch_size=3)
    prompts = [pickle.loads(pickle.dumps(it.prompt())) for it in train.items]
    rows = [p for p in prompts for _ in range(2)]
    strict_pickle(rows)
    actor.set_rows(rows)
    after = compute_logprobs(actor, batch, micro_batch_size=3)
    assert torch.equal(before, after)


def test_decode_source_gives_the_cached_frames(world: dict[str, Any]) -> None:
    video = world["train"].items[0].videos[0]
    cached, decoded = CacheFrames().load(video), DecodeFrames().load(video)
    assert decoded.meta.indices == cached.meta.indices
    assert np.array_equal(decoded.array, cached.array)
    assert type(frame_source("decode")) is DecodeFrames


def test_cache_source_refuses_an_entry_rebuilt_or_gone(world: dict[str, Any]) -> None:
    video = world["train"].items[0].videos[0]
    other = replace(video, meta=replace(video.meta, indices=[0, 1, 2, 3]))
    with pytest.raises(CacheError, match="other frames than when the batch was made"):
        CacheFrames().load(other)
    gone = replace(video, entry=str(Path(video.entry).with_name("0" * 64 + ".safetensors")))
    with pytest.raises(CacheError, match=r"is gone .*rebuild the cache"):
        CacheFrames().load(gone)


@pytest.mark.timeout(300)
def test_recipe_step_hands_the_actor_paths_and_times_each_phase(
    world: dict[str, Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    root = world["root"]
    cfg = load_config(
        None,
        [
            f"model={world['model']}",
            f"data.train_path={world['data']}",
            f"data.cache_root={root / 'cache'}",
            "data.video_max_pixels=12544",
            "data.video_max_frames=4",
            "rollout.n=2",
            "rollout.max_response_tokens=6",
            "schedule.batch_size=2",
            "algorithm.kl.estimator=k3",
            "algorithm.kl.coef=0.01",
            f"checkpoint.dir={root / 'run' / 'ckpt'}",
        ],
    )
    recipe = GRPORecipe(cfg)
    recipe.setup(resume=False)
    seen: list[int] = []
    update = recipe._update

    def spy(groups: list[Group]) -> dict[str, Any]:
        seen.append(len(strict_pickle(groups)))  # what the actor receives, frames refused
        return update(groups)

    monkeypatch.setattr(recipe, "_update", spy)
    try:
        metrics = recipe.train_step(1)
    finally:
        recipe.cleanup()
    assert seen and seen[0] < PER_ITEM_BYTES * 2
    phases = ("rollout", "reward", "old_logprob", "ref_logprob", "update")
    assert all(metrics[f"timing_s/{p}"] > 0 for p in phases)
