"""What a silent or slow LLM judge costs a run, side by side with a run without a judge.

The real pipeline and the run's scorer, with scripted engines: the model answers at once,
the judge either never answers (``dead``) or answers after ``--delay`` seconds (``slow``).
Half the samples are judged, half are choice questions. Prints ONE JSON object:

- ``no_judge_s``: the run with no judge configured (judged samples are "not scored");
- ``dead_judge_s``: the same run with a judge that never answers; ``dead_extra_s`` is
  what the dead judge added, against ``breaker_bound_s`` = timeout x ceil(max_failures /
  concurrency) and ``per_sample_timeouts_s`` = n_judged x timeout (judging one sample
  after another, each waiting out its timeout); ``dead_judge_calls`` requests reached
  it, ``dead_unavailable`` samples were recorded "judge unavailable";
  ``last_unjudged_s``: when the last choice question was recorded (from the start);
- ``slow_judge_s`` and ``slow_in_delays``: a judge answering after ``--delay``, in units of
  that delay (serial judging would take ``n_judged``), with the peak ``slow_in_flight``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import tempfile
import time
from pathlib import Path
from typing import Any

from evalkit.engines.base import Completion, Request, Timings
from evalkit.pipeline import Pipeline, PipelineConfig
from evalkit.run.components import make_scorer
from evalkit.sample import Sample
from evalkit.scoring import LLMJudge
from evalkit.scoring.judge_guard import JudgeGuard
from evalkit.store import Store


class Model:
    """Answers at once: "A" to a choice question, "a cat" to an open one."""

    async def generate(self, request: Request) -> Completion:
        text = "a cat" if request.id.startswith("j") else "A"
        return Completion(request_id=request.id, texts=[text], timings=Timings())

    async def close(self) -> None:
        return None


class Judge:
    """Answers "VERDICT: 1" after ``delay_s`` (None: never); counts calls and peak load."""

    def __init__(self, delay_s: float | None) -> None:
        self.delay_s, self.calls, self.active, self.peak = delay_s, 0, 0, 0

    async def generate(self, request: Request) -> Completion:
        self.calls += 1
        self.active += 1
        self.peak = max(self.peak, self.active)
        try:
            await asyncio.sleep(3600 if self.delay_s is None else self.delay_s)
        finally:
            self.active -= 1
        return Completion(request_id=request.id, texts=["VERDICT: 1"], timings=Timings())

    async def close(self) -> None:
        return None


def samples(n: int) -> list[Sample]:
    """n judged then n choice questions (the judged first: the worst order for a sink)."""
    judged = [
        Sample(id=f"j{i:03d}", task_type="llm_judge", question=f"q{i}", target="a cat")
        for i in range(n)
    ]
    choice = [
        Sample(id=f"u{i:03d}", task_type="multiple_choice", question=f"c{i}", options=["x", "y"])
        for i in range(n)
    ]
    return judged + choice


def run(folder: Path, judge: Judge | None, guard: JudgeGuard, n: int) -> dict[str, Any]:
    """One run; seconds, and when (from the start) the last choice question was recorded."""

    async def main() -> float:
        llm = None
        if judge is not None:
            llm = LLMJudge(judge, model="perf", loop=asyncio.get_running_loop(), guard=guard)
        cfg = PipelineConfig(io_workers=2, max_in_flight=8, lookahead=8)
        with Store(folder / "b.jsonl") as store:
            pipe = Pipeline(Model(), prepare, make_scorer(None, llm), store, cfg)
            await pipe.run(samples(n))
        return time.time()

    start = time.time()
    end = asyncio.run(main())
    with Store(folder / "b.jsonl") as store:
        records = store.records()
    last = max(r.timings["scored"] or 0.0 for r in records if r.id.startswith("u"))
    down = sum(
        r.score is not None and r.score.metadata.get("judge_status") == "unavailable"
        for r in records
    )
    return {"s": end - start, "last_unjudged_s": last - start, "unavailable": down}


def prepare(sample: Sample) -> Request:
    return Request(id=sample.id, text=sample.question)


def main() -> None:
    """Measure the three runs side by side and print the JSON figures."""
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=40, help="judged samples (as many choice ones)")
    ap.add_argument("--timeout", type=float, default=0.5, help="judge timeout per attempt, s")
    ap.add_argument("--delay", type=float, default=0.2, help="the slow judge's delay, s")
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--max-failures", type=int, default=5)
    args = ap.parse_args()

    def guard() -> JudgeGuard:
        return JudgeGuard(args.timeout, 0, args.concurrency, args.max_failures, backoff_s=0.0)

    out: dict[str, Any] = {"n_judged": args.n, "timeout_s": args.timeout, "delay_s": args.delay}
    with tempfile.TemporaryDirectory() as tmp:
        base = run(Path(tmp) / "none", None, guard(), args.n)
        dead_judge = Judge(None)
        dead = run(Path(tmp) / "dead", dead_judge, guard(), args.n)
        slow_judge = Judge(args.delay)
        slow = run(Path(tmp) / "slow", slow_judge, guard(), args.n)
    out.update(
        no_judge_s=round(base["s"], 3),
        dead_judge_s=round(dead["s"], 3),
        dead_extra_s=round(dead["s"] - base["s"], 3),
        breaker_bound_s=args.timeout * -(-args.max_failures // args.concurrency),
        per_sample_timeouts_s=args.n * args.timeout,
        dead_judge_calls=dead_judge.calls,
        dead_unavailable=dead["unavailable"],
        last_unjudged_s=round(dead["last_unjudged_s"], 3),
        slow_judge_s=round(slow["s"], 3),
        slow_in_delays=round(slow["s"] / args.delay, 1),
        slow_in_flight=slow_judge.peak,
    )
    print(json.dumps(out))


if __name__ == "__main__":
    main()
