"""Writing a SynthVideo split: H.264 videos plus one JSONL annotation file.

Layout under ``out_dir`` (what ``benchmarks/synthvideo.yaml`` reads)::

    synthvideo_<split>.jsonl     one row per question (id, family, task_type, question,
                                 options, answer, video, fps, duration, width, height, ...)
    videos/<id>.mp4              one clip per question

Every sample draws from its own random stream, keyed by (seed, split, family, index):
the same seed gives byte-identical annotations and identical frames; train and test
never share a stream; asking for more samples leaves the first ones unchanged.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from fractions import Fraction
from pathlib import Path
from typing import Any

import numpy as np

from evalkit.atomic import commit, write_text_atomic
from evalkit.synthvideo.families import FAMILIES
from evalkit.synthvideo.scene import Canvas

SPLITS = ("train", "test")
VERSION = 1  # bump when a change alters what a seed generates
VIDEO_DIR = "videos"


def annotation_name(split: str) -> str:
    """File name of a split's annotation file."""
    return f"synthvideo_{split}.jsonl"


def sample_id(family: str, split: str, index: int) -> str:
    """Stable id: family, split and index (``moving_shape-test-0003``)."""
    return f"{family}-{split}-{index:04d}"


def sample_rng(seed: int, split: str, family: str, index: int) -> random.Random:
    """The random stream of one sample (string seeds are hashed with SHA-512: stable)."""
    return random.Random(f"synthvideo/v{VERSION}/{seed}/{split}/{family}/{index}")


def write_video(path: str | os.PathLike[str], frames: np.ndarray, fps: float) -> Path:
    """Encode T x H x W x 3 uint8 frames as H.264 (yuv420p, CRF 18) at ``fps``; atomic."""
    import av

    path = Path(path)
    tmp = path.with_name(f".{path.stem}.part{path.suffix}")
    rate = Fraction(fps).limit_denominator(1001)
    with av.open(str(tmp), mode="w", format="mp4") as container:
        # CRF 18 keeps flat colours and sharp edges close to the drawn values. One encoder
        # thread keeps the bytes independent of the machine's core count.
        options = {"crf": "18", "preset": "fast", "threads": "1"}
        stream = container.add_stream("h264", rate=rate, options=options)
        stream.width, stream.height = frames.shape[2], frames.shape[1]
        stream.pix_fmt = "yuv420p"
        stream.codec_context.time_base = 1 / rate
        for i, img in enumerate(frames):
            frame = av.VideoFrame.from_ndarray(np.ascontiguousarray(img), format="rgb24")
            frame.pts = i
            frame.time_base = 1 / rate
            container.mux(stream.encode(frame))
        container.mux(stream.encode(None))
    commit(tmp, path)
    return path


def make_row(
    family: str, split: str, index: int, seed: int, canvas: Canvas
) -> tuple[dict[str, Any], np.ndarray]:
    """One annotation row and its frames (nothing written)."""
    fam = FAMILIES.get(family)
    item = fam.make(sample_rng(seed, split, family, index), canvas)
    sid = sample_id(family, split, index)
    n = int(item.frames.shape[0])
    row: dict[str, Any] = {
        "id": sid,
        "family": family,
        "kind": item.kind,
        "split": split,
        "task_type": fam.task_type,
        "question": item.question,
        "options": item.options,
        "answer": item.answer,
        "video": f"{VIDEO_DIR}/{sid}.mp4",
        "fps": canvas.fps,
        "num_frames": n,
        "duration": round(n / canvas.fps, 3),
        "width": canvas.width,
        "height": canvas.height,
        "params": item.params,
        "seed": seed,
        "index": index,
        "version": VERSION,
    }
    return row, item.frames


def _check(split: str, n_per_family: int, width: int, height: int, fps: float) -> None:
    if split not in SPLITS:
        raise ValueError(f"split must be one of {', '.join(SPLITS)}, got {split!r}")
    if n_per_family < 1:
        raise ValueError(f"n_per_family must be >= 1, got {n_per_family}")
    if width % 2 or height % 2 or min(width, height) < 84:
        raise ValueError(f"width and height must be even and >= 84 px, got {width}x{height}")
    if not 1 <= fps <= 60:
        raise ValueError(f"fps must be within 1..60, got {fps}")


def generate(
    out_dir: str | os.PathLike[str],
    n_per_family: int,
    split: str = "test",
    seed: int = 0,
    *,
    width: int = 224,
    height: int = 168,
    fps: float = 4.0,
    families: Sequence[str] | None = None,
) -> Path:
    """Write ``n_per_family`` questions of every family (or of ``families``) for ``split``.

    Returns the annotation file. ``width`` x ``height`` default to multiples of 28, so
    Qwen2/2.5-VL take the frames as they are (no resize). Clips last 4-8 s at ``fps``.
    Existing videos of the same ids are overwritten; the annotation file is written last,
    atomically, so a reader never sees rows whose videos are missing.
    """
    _check(split, n_per_family, width, height, fps)
    names = list(families) if families is not None else list(FAMILIES)
    for name in names:
        FAMILIES.get(name)  # unknown names fail before anything is written
    out = Path(out_dir)
    (out / VIDEO_DIR).mkdir(parents=True, exist_ok=True)
    canvas = Canvas(width, height, fps)
    rows = []
    for name in names:
        for index in range(n_per_family):
            row, frames = make_row(name, split, index, seed, canvas)
            write_video(out / row["video"], frames, fps)
            rows.append(row)
    ann = out / annotation_name(split)
    write_text_atomic(ann, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return ann


def to_unified(row: dict[str, Any]) -> dict[str, Any]:
    """One row in the EasyVideoR1 unified schema (what the trainer's data loader reads)."""
    answer = row["answer"]
    if not isinstance(answer, str):
        answer = json.dumps(answer) if isinstance(answer, list | dict) else str(answer)
    return {
        "problem_id": row["id"],
        "problem": row["question"],
        "problem_type": row["task_type"],
        "options": [f"{'ABCDEF'[i]}. {o}" for i, o in enumerate(row["options"])],
        "solution": f"<answer>{answer}</answer>",
        "path": row["video"],
        "data_type": "video",
        "data_source": "SynthVideo",
        "family": row["family"],
        "kind": row["kind"],
        "duration": row["duration"],
        "width": row["width"],
        "height": row["height"],
    }


def write_unified(annotation: str | os.PathLike[str]) -> Path:
    """``synthvideo_<split>.unified.jsonl`` beside ``annotation``: the same questions in the
    unified schema, video paths relative to that folder (``evalkit.bench.unified``)."""
    src = Path(annotation)
    dst = src.with_name(src.name.replace(".jsonl", ".unified.jsonl"))
    rows = [to_unified(r) for r in read_rows(src)]
    write_text_atomic(dst, "".join(json.dumps(r, sort_keys=True) + "\n" for r in rows))
    return dst


def read_rows(annotation: str | os.PathLike[str]) -> list[dict[str, Any]]:
    """The rows of an annotation file, in order (DataError names a broken line)."""
    # lazily: the one row reader lives in evalkit.bench, which synthvideo need not load
    from evalkit.bench.files import read_rows as file_rows

    return [row for _, row in file_rows(Path(annotation))]
