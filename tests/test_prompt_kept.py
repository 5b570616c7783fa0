"""The rendered prompt of each sample is kept in its record and shown in the report."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

from evalkit.engines.base import Completion, Request
from evalkit.pipeline import Pipeline, prompt_hash
from evalkit.records import SampleRecord
from evalkit.reports import build_report, write_report
from evalkit.sample import Sample
from evalkit.scoring.types import Score
from evalkit.store import Store
from evalkit.testing.runs import Rec, write_run
from tests.scripted_engine import ScriptedEngine

SYSTEM = "You are a careful video analyst."


def _prepare(sample: Sample) -> Request:
    prefix = "Best option: (" if sample.id == "s1" else None
    text = f"Question: {sample.question}\nA. red\nB. blue\nAnswer with the letter."
    return Request(id=sample.id, text=text, system=SYSTEM, assistant_prefix=prefix)


def _score(sample: Sample, completion: Completion) -> Score:
    return Score(float(completion.text == sample.target), completion.text)


def _run(tmp_path: Path, engine: ScriptedEngine) -> list[dict[str, object]]:
    samples = [
        Sample(id=f"s{i}", task_type="multiple_choice", question=f"what colour {i}?", target="A")
        for i in range(3)
    ]
    store = Store(tmp_path / "b.jsonl")
    asyncio.run(Pipeline(engine, _prepare, _score, store).run(samples))
    return [json.loads(line) for line in (tmp_path / "b.jsonl").read_text().splitlines()]


def test_each_record_keeps_the_prompt_its_hash_is_of(tmp_path: Path) -> None:
    records = {r["id"]: r for r in _run(tmp_path, ScriptedEngine(0.0, 0.0))}
    for sid, rec in records.items():
        asked = SampleRecord.model_validate(rec).prompt
        assert asked is not None and asked.system == SYSTEM
        assert (
            asked.text
            == f"Question: what colour {sid[1]}?\nA. red\nB. blue\nAnswer with the letter."
        )
        request = Request(sid, asked.text, system=asked.system)
        request.assistant_prefix = asked.assistant_prefix
        assert prompt_hash(request) == rec["prompt_hash"]
    assert records["s1"]["prompt"]["assistant_prefix"] == "Best option: ("
    assert "assistant_prefix" not in records["s0"]["prompt"]  # unset parts stay out


def test_a_sample_failed_in_the_engine_keeps_what_it_was_asked(tmp_path: Path) -> None:
    records = {r["id"]: r for r in _run(tmp_path, ScriptedEngine(0.0, 0.0, fail_ids={"s2"}))}
    assert records["s2"]["status"] == "failed" and records["s2"]["stage"] == "engine"
    assert records["s2"]["prompt"]["text"].startswith("Question: what colour 2?")


def test_the_reports_examples_show_the_prompt(tmp_path: Path) -> None:
    recs = [
        Rec(
            str(i),
            float(i % 2),
            {"duration": "short", "domain": "d", "task": "t"},
            rule="videomme",
            rules={"evalkit": float(i % 3 == 0)},
            prediction="The answer is B",
            prompt=f"Which way does car {i} turn?\nA. left\nB. right",
        )
        for i in range(6)
    ]
    run = write_run(tmp_path / "runs" / "r", "/ckpt/m", {"Video-MME": recs})
    files = write_report(build_report([run], bootstrap=20), tmp_path / "out", ["md", "html"])
    md = files["md"].read_text()
    assert "#### Video-MME: what the model was asked in these examples" in md
    assert "| 0 | Which way does car 0 turn? A. left B. right |" in md
    assert "<td>Which way does car 0 turn? A. left B. right</td>" in files["html"].read_text()
