"""Trainer data: unified rows with offline trajectories, separate media budgets, resumable order."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.cache import FrameCache
from evalkit.errors import DataError
from evalkit.sample import VideoRef
from evalkit.trainer.config import DataConfig
from evalkit.trainer.data import TrainData, frame_spec, image_spec, load_items


def _row(i: int, **extra: object) -> dict:
    row = {
        "problem_id": f"q{i}",
        "problem": f"Is thing {i} red?",
        "problem_type": "boolean",
        "solution": "<answer>Yes</answer>",
        "data_type": "text",
        "data_source": "toy",
    }
    row.update(extra)
    return row


def _write(path: Path, rows: list[dict]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def test_rows_become_samples_with_offline_output(tmp_path: Path) -> None:
    rows = [_row(0, offline_output="<think>x</think><answer>Yes</answer>"), _row(1)]
    items = load_items(_write(tmp_path / "d.jsonl", rows))
    assert [it.sample.id for it in items] == ["toy/q0", "toy/q1"]
    assert items[0].offline_output == "<think>x</think><answer>Yes</answer>"
    assert items[1].offline_output is None
    assert items[0].sample.target == "Yes" and items[0].data_type == "text"


def test_bad_data_type_names_row_and_field(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", [_row(0), _row(1, data_type="audio")])
    with pytest.raises(DataError, match=r"line 2, field 'data_type'.*audio"):
        load_items(path)


def test_video_row_without_path_is_an_error(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", [_row(0, data_type="video")])
    with pytest.raises(DataError, match=r"line 1, field 'path'"):
        load_items(path)


def test_image_and_video_budgets_are_separate() -> None:
    cfg = DataConfig(image_max_pixels=50176, video_max_pixels=12544, video_max_frames=6, fps=1.0)
    fs, im = frame_spec(cfg, 28), image_spec(cfg, 28)
    assert (fs.max_pixels, fs.max_frames, fs.fps, fs.factor) == (12544, 6, 1.0, 28)
    assert fs.min_pixels <= fs.max_pixels
    assert im.max_pixels == 50176 and im.factor == 28


def test_items_carry_cache_paths_not_frames(tmp_path: Path) -> None:
    (tmp_path / "v.mp4").write_bytes(b"not decoded here")
    path = _write(tmp_path / "d.jsonl", [_row(0, data_type="video", path="v.mp4")])
    cache = FrameCache(tmp_path / "cache")
    data = TrainData(load_items(path), DataConfig(video_max_pixels=12544), cache)
    ref = VideoRef(path=str(tmp_path / "v.mp4"))
    assert data.items[0].cache_paths == [str(cache.path_for(ref, data.frame_spec))]


def test_order_is_seeded_and_resumes_from_state(tmp_path: Path) -> None:
    path = _write(tmp_path / "d.jsonl", [_row(i) for i in range(7)])
    cache = FrameCache(tmp_path / "cache")

    def fresh(seed: int = 3) -> TrainData:
        return TrainData(load_items(path), DataConfig(), cache, seed=seed)

    a = fresh()
    first = [it.index for it in a.next_batch(5)]
    state = a.state_dict()
    rest = [it.index for it in a.next_batch(6)]  # crosses into epoch 1
    b = fresh()
    b.load_state_dict(state)
    assert [it.index for it in b.next_batch(6)] == rest
    assert [it.index for it in fresh().next_batch(5)] == first
    assert sorted(first + rest[:2]) == list(range(7))  # epoch 0 is a permutation
    assert a.order(0) != fresh(seed=4).order(0) or a.order(1) != fresh(seed=4).order(1)


def test_resume_on_other_data_is_refused(tmp_path: Path) -> None:
    cache = FrameCache(tmp_path / "cache")
    a = TrainData(load_items(_write(tmp_path / "a.jsonl", [_row(0)])), DataConfig(), cache)
    b = TrainData(load_items(_write(tmp_path / "b.jsonl", [_row(0), _row(1)])), DataConfig(), cache)
    with pytest.raises(DataError, match="1 training items"):
        b.load_state_dict(a.state_dict())
