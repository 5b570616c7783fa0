"""Official prompts that pre-fill the assistant's turn: from the spec through the plan and
the Request to the engine, and the reply scored the way each rule's code read it (official
rules: the continuation; evalkit's rule: prefix + continuation)."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

from evalkit.bench.registry import get_benchmark
from evalkit.bench.spec import OfficialPrompt
from evalkit.cache import FrameCache
from evalkit.engines.base import Completion, Request
from evalkit.prompts import PromptPlan
from evalkit.request_builder import RequestBuilder
from evalkit.run.components import make_scorer
from evalkit.run.config import RunConfig
from evalkit.run.execute import execute
from evalkit.run.plan import resolve_benchmarks
from evalkit.rundir import RunDir
from evalkit.sample import Sample
from evalkit.scoring import router, score
from evalkit.scoring.prefill import PREFIX_FIELD, assistant_turn, with_prefix
from evalkit.scoring.types import Score
from evalkit.video.types import FrameSpec
from tests.fixtures.bench import official
from tests.scripted_engine import ScriptedEngine

OPTIONS = ["a cat", "the dog", "a bird", "a fish"]
PINNED = {  # benchmark -> the prefix its official code writes (see the YAML comments)
    "MLVU": "Best Option: (",
    "MVBench": "Best option:(",
    "LiveSports-3K-QA": "Answer:",
}


def _mc(target: str = "B") -> Sample:
    return Sample(
        id="q1", task_type="multiple_choice", question="Which?", options=OPTIONS, target=target
    )


def _scored(bench: str, reply: str, target: str = "B", variant: str | None = None) -> Any:
    spec = get_benchmark(bench)
    scorer = make_scorer(spec, prompt=PromptPlan.for_spec(spec, variant))
    return scorer(_mc(target), Completion(request_id="q1", texts=[reply]))


@pytest.mark.parametrize(("bench", "prefix"), PINNED.items())
def test_specs_pin_the_prefix_their_official_code_writes(bench: str, prefix: str) -> None:
    official_prompts = get_benchmark(bench).prompt.official
    assert {p.assistant_prefix for p in official_prompts.values()} == {prefix}


def test_an_empty_prefix_is_refused() -> None:
    with pytest.raises(ValidationError, match="assistant_prefix"):
        OfficialPrompt(template="{{ question }}", source="x", assistant_prefix="")


def test_the_plan_prefills_only_under_the_official_variant() -> None:
    spec = get_benchmark("MLVU")
    assert PromptPlan.for_spec(spec).assistant_prefix("multiple_choice") == "Best Option: ("
    assert PromptPlan.for_spec(spec, "plain").assistant_prefix("multiple_choice") is None
    assert PromptPlan.for_spec(get_benchmark("Video-MME")).assistant_prefix("mc") is None


def test_the_request_builder_carries_the_prefix_of_the_official_prompt(tmp_path: Path) -> None:
    spec = get_benchmark("MVBench")
    build = RequestBuilder(
        cache=FrameCache(tmp_path), frame_spec=FrameSpec(), prompt=PromptPlan.for_spec(spec)
    )
    request = build(_mc())
    assert request.assistant_prefix == "Best option:("
    assert request.text.endswith("Only give the best option.")  # the prefix is not user text
    plain = RequestBuilder(cache=FrameCache(tmp_path), frame_spec=FrameSpec())
    assert plain(_mc()).assistant_prefix is None


@pytest.mark.parametrize(
    ("bench", "reply", "target", "answer", "value"),
    [
        # check_ans: the character before the first ")" of the continuation
        ("MLVU", "B) the dog", "B", "B", 1.0),
        ("MLVU", "B", "B", "B", 1.0),  # no ")": the continuation must BE the letter
        ("MLVU", "the dog", "B", "the dog", 0.0),
        # the notebook: "(" + the continuation's first line, first token
        ("MVBench", "B) the dog", "B", "(b)", 1.0),
        ("MVBench", "C) a bird\nB", "B", "(c)", 0.0),
        # LiveCC: the first non-space character after "Answer:"
        ("LiveSports-3K-QA", " C", "C", "C", 1.0),
        ("LiveSports-3K-QA", " (C)", "C", "(", 0.0),
    ],
)
def test_the_official_rule_reads_the_continuation(
    bench: str, reply: str, target: str, answer: str, value: float
) -> None:
    got = _scored(bench, reply, target)
    assert got.rule != "evalkit"
    assert (got.score.answer, got.score.value) == (answer, value)


def test_evalkit_rule_reads_prefix_plus_continuation(monkeypatch: pytest.MonkeyPatch) -> None:
    seen: list[str] = []

    def spy(prediction: str, target: Any, sample: Sample) -> Score:
        seen.append(prediction)
        return Score(0.0)

    monkeypatch.setattr(router.SCORERS, "get", lambda name: spy)
    sample = with_prefix(_mc(), "Best Option: (")
    score(sample, "B) the dog")
    score(sample, "B) the dog", rule="mlvu")  # an official rule is not the evalkit scorer
    assert seen == ["Best Option: (B) the dog"]


def test_evalkit_verdict_of_a_prefixed_reply_is_kept_beside_the_headline() -> None:
    got = _scored("MLVU", "B) the dog")
    assert (got.rule, got.others["evalkit"].answer, got.others["evalkit"].value) == (
        "mlvu",
        "B",
        1.0,
    )


def test_without_a_prefix_the_reply_is_read_as_written() -> None:
    # the plain variant sends no prefix, so "Answer: C" is the model's own text: LiveCC's
    # reading chooses "A"
    got = _scored("LiveSports-3K-QA", "Answer: C", "C", variant="plain")
    assert (got.score.answer, got.score.value) == ("A", 0.0)
    assert PREFIX_FIELD not in _mc().fields
    assert assistant_turn("B", _mc()) == "B"


@dataclass
class _Recording(ScriptedEngine):
    """The scripted engine, answering a fixed continuation and keeping what it was sent."""

    reply: str = "B) the answer"
    requests: list[Request] = field(default_factory=list)

    async def generate(self, request: Request) -> Completion:
        self.requests.append(request)
        request.metadata["answer"] = self.reply
        return await super().generate(request)


def test_a_run_prefills_every_request_and_records_the_continuation(tmp_path: Path) -> None:
    official.mlvu_dev(tmp_path / "MLVU")  # the loader reads <root>/MLVU/json
    cfg = RunConfig(
        model="scripted",
        bench=["MLVU"],
        data_root=str(tmp_path),
        cache_root=str(tmp_path / "cache"),
        cache_workers=1,
        runs_dir=str(tmp_path / "runs"),
        run_id="prefix",
        limit=3,
    )
    # frames cached here first, so the run spawns no decoding processes (test speed)
    (bench,) = resolve_benchmarks(cfg, None)
    for sample in bench.samples:
        FrameCache(cfg.cache_root).get(sample.media[0], bench.frame_spec)  # type: ignore[arg-type]
    engine = _Recording(prefill_s=0.0, decode_s=0.0)
    result = execute(cfg, engine=engine)
    assert all(r.metadata["cache_hit"] for r in engine.requests)
    assert len(engine.requests) == 3
    assert {r.assistant_prefix for r in engine.requests} == {"Best Option: ("}
    with RunDir(result.path).store("MLVU") as store:
        records = store.records()
    assert {r.prediction for r in records} == {"B) the answer"}
    # every fixture question's answer is its option B
    assert {(r.rule, r.score.answer, r.score.value) for r in records} == {("mlvu", "B", 1.0)}


def test_the_prompt_hash_covers_the_prefix_and_is_unchanged_without_one() -> None:
    from evalkit.pipeline import prompt_hash

    plain = Request(id="a", text="Which?", system="sys")
    prefixed = Request(id="a", text="Which?", system="sys", assistant_prefix="Answer:")
    # sha256(b"sys\0Which?")[:16]: what records written before prefixes carry
    assert prompt_hash(plain) == "67a7ec980902e023"
    assert prompt_hash(prefixed) != prompt_hash(plain)
