"""A tiny ad-hoc data set and run configuration for run-directory tests (lock, resume)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalkit.engines.base import Completion, Request, Timings
from evalkit.run.config import RunConfig
from evalkit.rundir import RunDir
from tests.fixtures.bench.media import tiny_video

BENCH = "set"  # the ad-hoc benchmark's name: the data file's stem


class Counting:
    """Answers "A" to everything and counts its calls."""

    def __init__(self) -> None:
        self.calls = 0

    async def generate(self, request: Request) -> Completion:
        self.calls += 1
        return Completion(request_id=request.id, texts=["A"], timings=Timings())

    async def close(self) -> None:
        return None


def write_set(root: Path, n: int) -> Path:
    """``n`` multiple-choice rows on one tiny video, under ``root``; the data file."""
    tiny_video(root / "clip.mp4", n_frames=8)
    rows = [
        {
            "data_type": "video",
            "data_source": "MyOwnSet",
            "problem_type": "multiple choice",
            "path": "clip.mp4",
            "problem": f"question {i}?",
            "problem_id": i,
            "options": ["A. left", "B. right"],
            "solution": f"<answer>{'AB'[i % 2]}</answer>",
        }
        for i in range(n)
    ]
    data = root / f"{BENCH}.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data


def run_config(root: Path, **kw: Any) -> RunConfig:
    """A run of the data set under ``root`` into ``root/runs/r``."""
    base: dict[str, Any] = {
        "model": "letter-a",
        # a served model name (no checkpoint folder to check); tests bring their engine
        "engine": "openai",
        "data": str(root / f"{BENCH}.jsonl"),
        "cache_root": str(root / "cache"),
        "cache_workers": 1,
        "runs_dir": str(root / "runs"),
        "run_id": "r",
    }
    return RunConfig.model_validate({**base, **kw})


def cut_store(run: Path, keep: int) -> None:
    """Keep the first ``keep`` records (a run that crashed after writing them)."""
    store = RunDir(run).store_path(BENCH)
    lines = store.read_text().splitlines(keepends=True)
    store.write_text("".join(lines[:keep]))


def ids(run: Path) -> list[str]:
    """Every id recorded in the store, one per line, in file order."""
    lines = RunDir(run).store_path(BENCH).read_text().splitlines()
    return [json.loads(x)["id"] for x in lines]


def expected_ids(n: int) -> list[str]:
    """The sorted ids of the first ``n`` rows of :func:`write_set`."""
    return sorted(f"MyOwnSet/{i}" for i in range(n))
