"""``evalkit score``: predictions made elsewhere become an ordinary run directory that
``evalkit report`` and ``evalkit repro`` read, with the extraction-sensitivity table.

The fixture is Video-MME's official layout (targets 001-1 A, 001-2 B, 002-1 C, 002-2 D,
003-1 A, 003-2 B). The predictions are bare letters, read alike by every rule: 001-1,
002-1 and 003-1 right, 001-2 wrong, 002-2 absent and 003-2 null (both recorded failed,
counted wrong): the official pooled mean is 3/6 = 50.0.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.cli.main import main
from evalkit.reports import load_run
from evalkit.reports.load import read_records
from tests._sensitivity_rules import LAST_LETTER
from tests.fixtures.bench import official
from tests.fixtures.bench.adhoc import ROW

# the test-only rule LAST_LETTER is registered per test (tests/_sensitivity_rules.py)
pytestmark = pytest.mark.usefixtures("last_letter_rule")

PREDICTIONS: list[dict[str, Any]] = [
    {"id": "001-1", "prediction": "A"},
    {"id": "001-2", "prediction": "C"},
    {"id": "002-1", "prediction": "C"},
    {"id": "003-1", "prediction": "A"},
    {"id": "003-2", "prediction": None},
]


def _write(path: Path, rows: list[Any]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def data_root(tmp_path: Path) -> Path:
    official.videomme(tmp_path / "data" / "Video-MME")
    shutil.rmtree(tmp_path / "data" / "Video-MME" / "data")  # annotations only: no videos
    return tmp_path / "data"


def _score(
    tmp_path: Path, data_root: Path, preds: Path, *extra: str, bench: str = "Video-MME"
) -> int:
    argv = ["score", "--bench", bench, "--data-root", str(data_root)]
    argv += ["--predictions", str(preds), "--runs-dir", str(tmp_path / "runs"), *extra]
    return main([*argv, "--run-id", "ext", "--model", "Qwen2.5-VL-7B-Instruct"])


def test_scored_predictions_form_a_run_that_reports_the_official_number(
    tmp_path: Path, data_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    preds = _write(tmp_path / "preds.jsonl", PREDICTIONS)
    assert _score(tmp_path, data_root, preds) == 0
    out = capsys.readouterr().out
    assert "4 sample(s) scored" in out and "2 sample(s) have no prediction" in out
    run = tmp_path / "runs" / "ext"
    b = load_run(run, bootstrap=10).benchmarks["Video-MME"]
    assert b.overall == pytest.approx(50.0)
    assert b.counts.failed_by_stage == {"predictions": 2}
    assert b.result.breakdowns["duration"] == {"short": 50.0, "medium": 50.0, "long": 50.0}
    config = json.loads((run / "config.json").read_text())
    rc = config["result_config"]
    assert rc["engine"] == "external" and rc["model"] == "Qwen2.5-VL-7B-Instruct"
    assert rc["predictions"]["file"] == "preds.jsonl"
    assert rc["benchmarks"]["Video-MME"]["frames"] is None  # unknown, not the pinned ones


def test_records_are_the_pipelines_with_the_headline_rule_and_the_others(
    tmp_path: Path, data_root: Path
) -> None:
    assert _score(tmp_path, data_root, _write(tmp_path / "p.jsonl", PREDICTIONS)) == 0
    recs = {r.id: r for r in read_records(tmp_path / "runs" / "ext" / "Video-MME.jsonl")}
    headline = get_benchmark("Video-MME").headline_rule("multiple_choice")
    ok = recs["001-1"]
    assert ok.status == "ok" and ok.rule == headline and ok.score and ok.score.value == 1.0
    assert ok.dump()["rules"][LAST_LETTER] == {"value": 1.0, "answer": "A"}
    assert ok.fields["duration"] == "short" and ok.tokens is None
    assert recs["002-2"].status == "failed" and recs["002-2"].stage == "predictions"
    assert "no prediction" in recs["002-2"].error
    assert "prediction is null" in recs["003-2"].error


def test_report_and_repro_read_the_scored_run(
    tmp_path: Path,
    data_root: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    assert _score(tmp_path, data_root, _write(tmp_path / "p.jsonl", PREDICTIONS)) == 0
    run = tmp_path / "runs" / "ext"
    out = tmp_path / "rep"
    argv = ["report", str(run), "--out", str(out), "--format", "md,json", "--bootstrap", "20"]
    assert main(argv) == 0
    md = (out / "report.md").read_text()
    assert "#### Video-MME: extraction sensitivity" in md
    assert f"| {LAST_LETTER} |  | 50.00 | 0.00 | 0 | 0 / 0 | 4 | 0 |" in md
    doc = json.loads((out / "report.json").read_text())["runs"][0]["benchmarks"]["Video-MME"]
    assert doc["overall"] == pytest.approx(50.0) and doc["counts"]["failed"] == 2
    capsys.readouterr()
    monkeypatch.setenv("COLUMNS", "200")  # the settings cell on one line (widths: elsewhere)
    assert main(["repro", str(run)]) == 1  # 50.0 against the published 65.1
    repro = capsys.readouterr().out
    assert "miss" in repro and "frames and max_tokens unknown" in repro


def test_unknown_ids_are_an_error_that_lists_them_and_shows_real_ids(
    tmp_path: Path, data_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [*PREDICTIONS, *({"id": f"x{i}", "prediction": "A"} for i in range(7))]
    assert _score(tmp_path, data_root, _write(tmp_path / "p.jsonl", rows)) == 2
    err = capsys.readouterr().err
    assert "7 of 12 rows name no sample of Video-MME: 'x0', 'x1'" in err
    assert "and 5 more" in err and "'001-1'" in err
    assert not (tmp_path / "runs" / "ext").exists()  # nothing written


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ("{oops", "p.jsonl:2: not valid JSON"),
        ('["001-2", "B"]', "p.jsonl:2: a line must be a JSON object, got list"),
        ('{"id": "001-2"}', "p.jsonl:2: field 'prediction' is missing"),
        ('{"id": "001-2", "prediction": {"B": 1}}', "p.jsonl:2: the reply must be text"),
    ],
)
def test_a_bad_line_names_the_file_and_line(
    tmp_path: Path, data_root: Path, capsys: pytest.CaptureFixture[str], line: str, message: str
) -> None:
    preds = tmp_path / "p.jsonl"
    preds.write_text(json.dumps(PREDICTIONS[0]) + "\n" + line + "\n")
    assert _score(tmp_path, data_root, preds) == 2
    assert message in capsys.readouterr().err


def test_scoring_again_resumes_the_run_and_a_changed_file_needs_force(
    tmp_path: Path, data_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    preds = _write(tmp_path / "p.jsonl", PREDICTIONS)
    assert _score(tmp_path, data_root, preds) == 0
    _write(preds, [*PREDICTIONS, {"id": "002-2", "prediction": "D"}])
    assert _score(tmp_path, data_root, preds) == 2
    assert "another configuration" in capsys.readouterr().err
    assert _score(tmp_path, data_root, preds, "--force") == 0
    assert "4 sample(s) were already scored in this run" in capsys.readouterr().out
    b = load_run(tmp_path / "runs" / "ext", bootstrap=10).benchmarks["Video-MME"]
    # 002-2 is scored now (right); 003-2 is still null, so still failed
    assert b.overall == pytest.approx(100 * 4 / 6) and b.counts.failed == 1


def test_an_ad_hoc_unified_file_is_scored_with_data(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = _write(tmp_path / "mine.jsonl", [{**ROW, "problem_id": i} for i in (1, 2)])
    preds = _write(tmp_path / "p.jsonl", [{"id": "Mine/1", "prediction": "B"}])
    argv = ["score", "--data", str(data), "--predictions", str(preds)]
    assert main([*argv, "--runs-dir", str(tmp_path / "runs"), "--run-id", "adhoc"]) == 0
    b = load_run(tmp_path / "runs" / "adhoc", bootstrap=10).benchmarks["mine"]
    assert (b.overall, b.counts.failed) == (pytest.approx(50.0), 1)
    assert not b.official


def test_bench_and_data_together_or_neither_is_an_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    preds = _write(tmp_path / "p.jsonl", PREDICTIONS)
    assert main(["score", "--predictions", str(preds)]) == 2
    assert "exactly one of --bench NAME or --data FILE" in capsys.readouterr().err


def test_a_scorer_that_raises_is_recorded_as_scorer_failed_not_0(
    tmp_path: Path, data_root: Path, capsys: pytest.CaptureFixture[str], monkeypatch: Any
) -> None:
    import evalkit.run.components
    from evalkit.scoring import Score, Verdicts

    real = evalkit.run.components.make_scorer

    def with_a_bug(*args: Any, **kwargs: Any) -> Any:
        inner = real(*args, **kwargs)

        class WithABug:
            def awaits(self, sample: Any) -> bool:
                return False

            def __call__(self, sample: Any, completion: Any) -> Any:
                if sample.id != "001-2":
                    return inner(sample, completion)
                try:
                    raise RuntimeError("rule bug")
                except RuntimeError as exc:  # what the router returns for a raising rule
                    return Verdicts(Score.scorer_failed(exc))

        return WithABug()

    monkeypatch.setattr(evalkit.run.components, "make_scorer", with_a_bug)
    assert _score(tmp_path, data_root, _write(tmp_path / "p.jsonl", PREDICTIONS)) == 0
    assert "scorer failed on 1 sample(s) ('001-2')" in capsys.readouterr().out
    run = tmp_path / "runs" / "ext"
    rec = {r.id: r for r in read_records(run / "Video-MME.jsonl")}["001-2"]
    assert (rec.status, rec.stage, rec.error) == (
        "failed",
        "score",
        "RuntimeError: rule bug",
    )
    assert rec.prediction == "C" and "RuntimeError: rule bug" in rec.traceback
    b = load_run(run, bootstrap=10).benchmarks["Video-MME"]
    assert b.counts.scorer_failed == {"001-2": "RuntimeError: rule bug"}
    assert b.overall == pytest.approx(60.0)  # 3 right of 5: 001-2 left out, not a 0


@pytest.mark.parametrize(
    ("given", "recorded"),
    [([], "official"), (["--variant", "official"], "official"), (["--variant", "plain"], "plain")],
)
def test_the_variant_recorded_is_the_specs_pin_or_the_one_chosen_and_the_prompt_is_not_used(
    tmp_path: Path, data_root: Path, given: list[str], recorded: str
) -> None:
    assert _score(tmp_path, data_root, _write(tmp_path / "p.jsonl", PREDICTIONS), *given) == 0
    config = json.loads((tmp_path / "runs" / "ext" / "config.json").read_text())
    entry = config["result_config"]["benchmarks"]["Video-MME"]
    assert entry["variant"] == recorded  # Video-MME pins official
    assert entry["prompt"] == "not used: predictions made elsewhere"
    assert entry["temperature"] is None and entry["max_tokens"] is None  # unknown, not pinned
    assert config["benchmark_samples"] == {"Video-MME": 6}


def test_the_report_says_the_prompt_was_not_used(
    tmp_path: Path, data_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _score(tmp_path, data_root, _write(tmp_path / "p.jsonl", PREDICTIONS)) == 0
    out = tmp_path / "rep"
    run = str(tmp_path / "runs" / "ext")
    assert main(["report", run, "--out", str(out), "--format", "md", "--bootstrap", "0"]) == 0
    md = (out / "report.md").read_text()
    assert "variant official, prompt not used: predictions made elsewhere" in md


VARIANT = "Video-MME:with_subtitles"


def _score_variant(tmp_path: Path, data_root: Path) -> Path:
    """The predictions scored as Video-MME's subtitles variant; the run directory."""
    assert (
        _score(tmp_path, data_root, _write(tmp_path / "p.jsonl", PREDICTIONS), bench=VARIANT) == 0
    )
    return tmp_path / "runs" / "ext"


def test_a_variant_has_one_name_in_its_file_the_report_and_the_messages(
    tmp_path: Path, data_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    name = VARIANT
    run = _score_variant(tmp_path, data_root)
    assert f"{name}: 4 sample(s) scored" in capsys.readouterr().out
    assert sorted(p.name for p in run.glob("*.jsonl")) == [f"{name}.jsonl"]
    out = tmp_path / "rep"
    assert (
        main(["report", str(run), "--out", str(out), "--format", "json", "--bootstrap", "0"]) == 0
    )
    assert list(json.loads((out / "report.json").read_text())["runs"][0]["benchmarks"]) == [name]
    capsys.readouterr()
    assert main(["bench", "validate", name, "--root", str(data_root), "--no-media"]) == 0
    assert capsys.readouterr().out.startswith(f"{name}: 6 samples loaded")


def test_a_run_written_before_keeps_its_store_name_and_resumes_into_it(
    tmp_path: Path, data_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = _score_variant(tmp_path, data_root)
    (run / f"{VARIANT}.jsonl").rename(run / "Video-MME_with_subtitles.jsonl")  # as written before
    assert list(load_run(run, bootstrap=0).benchmarks) == [VARIANT]
    capsys.readouterr()
    _score_variant(tmp_path, data_root)  # resumed into the old file
    assert "4 sample(s) were already scored" in capsys.readouterr().out
    assert sorted(p.name for p in run.glob("*.jsonl")) == ["Video-MME_with_subtitles.jsonl"]
