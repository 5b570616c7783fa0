"""A Video-MME run of 30 replies, 5 of which carry no letter, written by the real pipeline.

Scored as ``evalkit run`` scores Video-MME (the spec's scorer: the official ``videomme``
rule as headline, every other multiple-choice rule beside it). Of the 25 replies with a
letter 18 are right, so the official rule, which leaves a reply without a letter out of
the count, gives 18/25 = 72.0 and evalkit's robust rule, which counts it wrong, 18/30 =
60.0: the gap the report must explain.
"""

from __future__ import annotations

import asyncio
from pathlib import Path

from evalkit.bench.registry import get_benchmark
from evalkit.engines.base import Request
from evalkit.pipeline import Pipeline, PipelineConfig
from evalkit.run.components import make_scorer
from evalkit.sample import Sample
from evalkit.testing.runs import open_run
from tests.scripted_engine import ScriptedEngine

NO_LETTER = [
    "i cannot tell from the clip",
    "not sure, the video never shows it",
    "there is no way to know",
    "the scene is too dark to see",
    "it is hard to say",
]
TARGETS = "ABCD"


def replies() -> dict[str, tuple[str, str]]:
    """Sample id -> (target letter, reply): 18 right, 7 wrong, 5 without a letter."""
    out: dict[str, tuple[str, str]] = {}
    for i in range(30):
        target = TARGETS[i % 4]
        if i < 18:
            reply = f"The answer is {target}." if i % 2 else target
        elif i < 25:
            reply = f"({TARGETS[(i + 1) % 4]}) because of what the person does at the start"
        else:
            reply = NO_LETTER[i - 25]
        out[f"vm-{i:02d}"] = (target, reply)
    return out


def write_videomme_run(path: Path) -> Path:
    """The run directory (see the module docstring)."""
    given = replies()
    samples = [
        Sample(
            id=sid,
            task_type="multiple_choice",
            question=f"What happens in the clip? ({sid})",
            options=["a person runs", "a car stops", "a dog barks", "it rains"],
            target=target,
            benchmark="Video-MME",
            fields={"duration": "short", "domain": "Knowledge", "task": "Action Reasoning"},
        )
        for sid, (target, _) in given.items()
    ]
    run, fp, _ = open_run(path, "/ckpt/model", ["Video-MME"], samples={"Video-MME": samples})

    def prepare(sample: Sample) -> Request:
        meta = {"answer": given[sample.id][1]}
        return Request(id=sample.id, text=sample.question, metadata=meta)

    engine = ScriptedEngine(prefill_s=0.0, decode_s=0.0)
    with run.store("Video-MME") as store:
        scorer = make_scorer(get_benchmark("Video-MME"))
        pipe = Pipeline(engine, prepare, scorer, store, PipelineConfig(max_retries=0), fp)
        asyncio.run(pipe.run(samples))
    return run.path
