"""One typed run record: the pipeline writes it, the report validates every line by it."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.errors import Problem
from evalkit.records import SampleRecord, check_line, failed_record, ok_record
from evalkit.reports import load_run
from evalkit.sample import Sample
from evalkit.scoring.types import Score
from evalkit.scoring.verdicts import Verdicts
from evalkit.testing.runs import Rec, write_run

SAMPLE = Sample(
    id="7",
    task_type="multiple_choice",
    question="q",
    target="B",
    benchmark="Video-MME",
    fields={"duration": "short"},
)


def test_an_ok_record_has_exactly_the_fields_and_order_the_writer_always_wrote() -> None:
    verdicts = Verdicts(Score(1.0, "B", "matched"), "videomme", {"evalkit": Score(0.0, "C")})
    rec = ok_record(
        SAMPLE,
        verdicts,
        ["B", "C"],
        fingerprint="fp",
        timings={"io_start": 1.0, "first_token": None},
        prompt_hash="ab",
        tokens={"prompt": 10, "output": 2},
    )
    assert list(rec.dump().items()) == [
        ("id", "7"),
        ("status", "ok"),
        ("prediction", "B"),
        ("score", {"value": 1.0, "answer": "B", "explanation": "matched", "metadata": {}}),
        ("rule", "videomme"),
        ("rules", {"evalkit": {"value": 0.0, "answer": "C"}}),
        ("prompt_hash", "ab"),
        ("benchmark", "Video-MME"),
        ("task_type", "multiple_choice"),
        ("target", "B"),
        ("fields", {"duration": "short"}),
        ("tokens", {"prompt": 10, "output": 2}),
        ("timings", {"io_start": 1.0, "first_token": None}),
        ("fingerprint", "fp"),
        ("predictions", ["B", "C"]),
    ]


def test_a_failed_record_has_exactly_the_fields_the_writer_always_wrote() -> None:
    rec = failed_record(SAMPLE, "engine", "RuntimeError: x", fingerprint="fp", timings={})
    assert list(rec.dump()) == [
        "id",
        "status",
        "stage",
        "error",
        "prediction",
        "score",
        "benchmark",
        "task_type",
        "target",
        "fields",
        "timings",
        "fingerprint",
    ]
    assert (rec.score, rec.prediction) == (None, None)
    assert SampleRecord.model_validate(rec.dump()).dump() == rec.dump()


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"score": "high"}, "score"),
        ({"score": {"value": 100.0}}, "score.value"),
        ({"score": {"value": float("nan")}}, "score.value"),
        ({"status": "done"}, "status"),
        ({"id": 7}, "id"),
        ({"rules": {"evalkit": {"value": 2.0}}}, "rules.evalkit.value"),
    ],
)
def test_a_malformed_line_is_named_by_its_field(change: dict[str, object], field: str) -> None:
    line = json.dumps(
        {**ok_record(SAMPLE, Score(1.0), ["B"], fingerprint="f", timings={}).dump(), **change}
    )
    problem = check_line(line, "Video-MME.jsonl", 3)
    assert isinstance(problem, Problem) and (problem.row, problem.field) == ("line 3", field)


def test_a_line_without_an_id_or_not_json_is_named() -> None:
    rec = ok_record(SAMPLE, Score(1.0), ["B"], fingerprint="f", timings={}).dump()
    rec.pop("id")
    assert str(check_line(json.dumps(rec), "b.jsonl", 2)).startswith("b.jsonl, line 2, field 'id':")
    assert "not JSON" in str(check_line("{oops", "b.jsonl", 5))


# -- the report ---------------------------------------------------------------------------

GOOD = [
    Rec(str(i), float(i % 2), {"duration": "short", "domain": "K", "task": "T"}) for i in range(4)
]


def _line(rec_id: str, **change: object) -> str:
    sample = SAMPLE.model_copy(update={"id": rec_id})
    return json.dumps(
        {**ok_record(sample, Score(1.0), ["B"], fingerprint="?", timings={}).dump(), **change}
    )


@pytest.fixture
def run(tmp_path: Path) -> Path:
    return write_run(tmp_path / "r", "m", {"Video-MME": GOOD})


def _append(run: Path, line: str) -> None:
    with open(run / "Video-MME.jsonl", "a") as f:
        f.write(line + "\n")


def _fp(run: Path) -> str:
    return str(json.loads((run / "config.json").read_text())["fingerprint"])


@pytest.mark.parametrize(
    ("change", "field"),
    [
        ({"score": "high"}, "score"),
        (
            {"score": {"value": 100.0, "answer": "B", "explanation": "", "metadata": {}}},
            "score.value",
        ),
        ({"id": None}, "id"),
    ],
)
def test_a_malformed_record_is_left_out_and_named_never_a_crash_or_a_wild_score(
    run: Path, change: dict[str, object], field: str
) -> None:
    before = load_run(run, bootstrap=0).benchmarks["Video-MME"].overall
    _append(run, _line("9", fingerprint=_fp(run), **change))
    b = load_run(run, bootstrap=0).benchmarks["Video-MME"]
    assert b.overall == before == 50.0 and b.counts.total == 4 and b.counts.malformed == 1
    (note,) = [n for n in b.notes if "malformed" in n]
    assert (
        note.startswith("1 malformed record(s) left out")
        and f"Video-MME.jsonl, line 5, field {field!r}:" in note
    )


def test_a_record_of_a_configuration_the_run_never_recorded_is_left_out_and_flagged(
    run: Path,
) -> None:
    _append(run, _line("9", fingerprint="0123456789abcdef"))
    b = load_run(run, bootstrap=0).benchmarks["Video-MME"]
    assert b.overall == 50.0 and b.counts.total == 4 and b.counts.foreign == 1
    assert any("'0123456789abcdef' (1)" in n and "neither config.json" in n for n in b.notes)


def test_a_records_line_is_the_one_the_store_always_wrote() -> None:
    """The line format is the on-disk contract (old runs load, the report snapshot holds):
    declaration order, unset fields left out, non-ASCII kept, the replica stamp last."""
    sample = SAMPLE.model_copy(update={"id": "é1", "fields": {"domain": "Ünïcode"}})
    rec = failed_record(sample, "engine", "EngineError: x", fingerprint="fp", timings={"a": 1.5})
    assert rec.stamped("r1").line() == (
        '{"id": "é1", "status": "failed", "stage": "engine", "error": "EngineError: x", '
        '"prediction": null, "score": null, "benchmark": "Video-MME", '
        '"task_type": "multiple_choice", "target": "B", "fields": {"domain": "Ünïcode"}, '
        '"timings": {"a": 1.5}, "fingerprint": "fp", "replica": "r1"}\n'
    )
    assert check_line(rec.line(), "b.jsonl", 1) == rec
