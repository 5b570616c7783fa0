"""`evalkit run` on a judged benchmark: unscored without a judge, graded with one."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalkit.engines.base import Completion, Request, Timings
from evalkit.run.config import JudgeConfig, RunConfig
from evalkit.run.execute import execute
from evalkit.rundir import RunDir
from tests.fixtures.bench import official_reasoning_streaming
from tests.test_bench_judged import VCR_REPLIES, ExactJudge


class ReplyEngine:
    """The model under test: answers each sample with a fixed reply."""

    async def generate(self, request: Request) -> Completion:
        return Completion(request_id=request.id, texts=[VCR_REPLIES[request.id]], timings=Timings())

    async def close(self) -> None:
        return None


def run(
    tmp_path: Path, judge: JudgeConfig | None, run_id: str, judge_engine: Any = None
) -> list[dict]:
    """``evalkit run`` of VCR-Bench's fixture; the judge engine defaults to ExactJudge."""
    official_reasoning_streaming.vcrbench(tmp_path / "VCR-Bench")
    cfg = RunConfig(
        model="reply-engine",
        bench=["VCR-Bench"],
        data_root=str(tmp_path),
        cache_root=str(tmp_path / "cache"),
        cache_workers=1,
        runs_dir=str(tmp_path / "runs"),
        run_id=run_id,
        judge=judge,
    )
    if judge is not None and judge_engine is None:
        judge_engine = ExactJudge()
    result = execute(cfg, engine=ReplyEngine(), judge_engine=judge_engine)
    with RunDir(result.path).store("VCR-Bench") as store:
        return store.records()


def test_without_a_judge_judged_samples_are_recorded_unscored(tmp_path: Path) -> None:
    records = run(tmp_path, None, "nojudge")
    judged = [r for r in records if r.task_type == "llm_judge"]
    assert judged and all(r.status == "ok" and r.score.value is None for r in judged)


def test_with_a_judge_every_sample_is_graded_and_the_judge_is_in_the_fingerprint(
    tmp_path: Path,
) -> None:
    records = run(tmp_path, JudgeConfig(model="exact-judge", engine="openai"), "judged")
    judged = [r for r in records if r.task_type == "llm_judge"]
    assert judged and all(r.score.value in (0.0, 1.0) for r in judged)
    assert all(r.score.metadata["judge_model"] == "exact-judge" for r in judged)
    config = json.loads((tmp_path / "runs" / "judged" / "config.json").read_text())
    assert config["result_config"]["judge"]["model"] == "exact-judge"
