"""OVO-Bench through the real `evalkit run` path (runner, frame cache, IO stage, pipeline,
store) with an engine that records what it is shown: no request carries a frame from
after its question time, and the run's records aggregate to the official number."""

from __future__ import annotations

import math
from pathlib import Path

from evalkit.bench.aggregations import aggregate
from evalkit.bench.loader import load
from evalkit.bench.registry import get_benchmark
from evalkit.engines.base import Completion, Request, Timings
from evalkit.reports.load import scored_from_records
from evalkit.run.config import RunConfig
from evalkit.run.execute import execute
from evalkit.rundir import RunDir
from evalkit.sample import VideoRef
from evalkit.testing.index_video import read_indices
from tests.fixtures.bench import official_reasoning_streaming


class RecordingEngine:
    """Answers every question with its target's first option letter and records the
    source frame numbers read back from the pixels of each request."""

    def __init__(self) -> None:
        self.seen: dict[str, list[int]] = {}
        self.prompts: dict[str, str] = {}

    async def generate(self, request: Request) -> Completion:
        (video,) = request.videos
        self.seen[request.id] = read_indices(video.array)
        self.prompts[request.id] = request.text
        return Completion(request_id=request.id, texts=["A"], timings=Timings())

    async def close(self) -> None:
        return None


def test_ovobench_run_shows_the_engine_only_the_past_and_aggregates(tmp_path: Path) -> None:
    root = official_reasoning_streaming.ovobench(tmp_path / "OVO-Bench")
    cfg = RunConfig(
        model="recording-engine",
        bench=["OVO-Bench"],
        data_root=str(tmp_path),
        cache_root=str(tmp_path / "cache"),
        cache_workers=1,
        runs_dir=str(tmp_path / "runs"),
        run_id="ovo",
    )
    engine = RecordingEngine()
    result = execute(cfg, engine=engine)
    samples = {s.id: s for s in load(get_benchmark("OVO-Bench"), root)}
    assert set(engine.seen) == set(samples)
    for sid, indices in engine.seen.items():
        ref = samples[sid].media[0]
        assert isinstance(ref, VideoRef) and ref.end is not None
        assert max(indices) <= math.floor(ref.end * official_reasoning_streaming.INDEX_FPS), sid
    # yes/no and count probes are prompted with their own official templates
    assert "Answer only with “Yes” or “No”." in engine.prompts["7/0"]
    assert "Options:" in engine.prompts["1"]
    with RunDir(result.path).store("OVO-Bench") as store:
        records = store.records()
    scored, _ = scored_from_records(records)
    res = aggregate(get_benchmark("OVO-Bench"), scored)
    assert (res.n, res.n_scored) == (11, 11)
    # "A" is right for EPM 1 (gt 0) and OCR 5 (gt 0) only: EPM 50, ASI 0, STU 0, OCR 100;
    # the yes/no and count probes get no yes/no word or number: 0
    assert res.breakdowns["task"]["EPM"] == 50.0 and res.breakdowns["task"]["OCR"] == 100.0
    assert res.overall == (25.0 + 50.0 + 0.0) / 3
