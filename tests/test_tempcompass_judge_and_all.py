"""TempCompass's default pipeline (the rules, then the authors' judge for the replies no
rule matches: ``tempcompass+judge``) on a scripted judge, and ``evalkit score --bench
TempCompass:all``: one run, one store per format, the pooled "Avg. All"."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evalkit.bench.aggregations.variants import combined_headlines
from evalkit.cli.main import main
from evalkit.cli.score import score_predictions
from evalkit.engines.base import Completion, Request, Timings
from evalkit.errors import ConfigError
from evalkit.records import SampleRecord
from evalkit.reports import load_run
from evalkit.reports.load import read_records
from evalkit.run.config import JudgeConfig
from evalkit.scoring import score
from evalkit.scoring.rules.tempcompass import JUDGE_SYSTEM, judge_rating
from tests.fixtures.bench import official

JUDGE = JudgeConfig(model="scripted-judge", engine="openai")
# the multi-choice fixture: "How tN?\nA. slow\nB. fast\nC. still", answer "B. fast"
MC_QUESTION = "How {}?\nA. slow\nB. fast\nC. still"


class ScriptedJudge:
    """A judge Engine that records every request; TempCompass prompts get "Correct", the
    generic judge prompt (captioning) a VERDICT by exact comparison."""

    model = "scripted-judge"

    def __init__(self) -> None:
        self.asked: list[tuple[str | None, str]] = []

    async def generate(self, request: Request) -> Completion:
        self.asked.append((request.system, request.text))
        ref = re.search(r"Reference answer: (.*)", request.text)
        got = re.search(r"Candidate answer: (.*)", request.text)
        if ref and got:
            text = f"VERDICT: {int(ref.group(1).strip() == got.group(1).strip())}"
        else:
            text = "Correct"
        return Completion(request_id=request.id, texts=[text], timings=Timings())

    async def close(self) -> None:
        return None


@pytest.fixture
def root(tmp_path: Path) -> Path:
    official.tempcompass(tmp_path / "data" / "TempCompass")
    return tmp_path / "data"


def _rows(root: Path, fmt: str) -> list[dict[str, Any]]:
    frame = pd.read_parquet(next((root / "TempCompass" / fmt).glob("*.parquet")))
    return frame.to_dict("records")


def _preds(tmp_path: Path, name: str, rows: list[dict[str, Any]], replies: list[Any]) -> Path:
    path = tmp_path / name
    lines = [
        {"video_id": r["video_id"], "dim": r["dim"], "question": r["question"], "prediction": t}
        for r, t in zip(rows, replies, strict=True)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def _score(tmp_path: Path, root: Path, bench: str, files: list[Path], **kw: Any) -> Any:
    return score_predictions(
        files,
        bench=bench,
        data_root=str(root),
        runs_dir=str(tmp_path / "runs"),
        run_id="r",
        **kw,
    )


def _records(tmp_path: Path, store: str) -> list[SampleRecord]:
    return read_records(tmp_path / "runs" / "r" / f"{store}.jsonl")


def test_judge_rule_asks_the_judge_only_for_the_replies_no_rule_matches(
    tmp_path: Path, root: Path
) -> None:
    rows = _rows(root, "multi-choice")
    preds = _preds(tmp_path, "mc.jsonl", rows, ["B", "A. slow", "It is moving fast</s>"])
    judge = ScriptedJudge()
    _score(
        tmp_path,
        root,
        "TempCompass",
        [preds],
        rule="official+judge",
        judge=JUDGE,
        judge_engine=judge,
    )
    expected = (
        "\nYou will receive a multi-choice question, the ground-truth answer and the prediction "
        "from a question answering (QA) model. Your task is to determine whether QA model "
        "prediction is correct, based on the question and ground-truth answer. If the "
        'prediction is correct, respond "Correct". If the prediction is incorrect, respond '
        '"Incorrect".\n\nMulti-Choice Question:\n' + MC_QUESTION.format("t3") + "\n"
        "Ground-Truth Answer: B. fast\nModel Prediction: It is moving fast"
    )
    assert judge.asked == [(JUDGE_SYSTEM, expected)]


def test_judge_rule_records_who_decided_each_sample(tmp_path: Path, root: Path) -> None:
    rows = _rows(root, "multi-choice")
    preds = _preds(tmp_path, "mc.jsonl", rows, ["B", "A. slow", "It is moving fast"])
    _score(
        tmp_path,
        root,
        "TempCompass",
        [preds],
        rule="official+judge",
        judge=JUDGE,
        judge_engine=ScriptedJudge(),
    )
    got = [
        (r.rule, r.score.value, r.score.metadata["decided_by"])
        for r in _records(tmp_path, "TempCompass")
    ]
    assert got == [
        ("tempcompass+judge", 1.0, "rule"),
        ("tempcompass+judge", 0.0, "rule"),
        ("tempcompass+judge", 1.0, "judge"),
    ]


def test_judge_rule_sends_yes_no_and_caption_matching_with_their_own_prompts(
    tmp_path: Path, root: Path
) -> None:
    yn = _preds(tmp_path, "yn.jsonl", _rows(root, "yes_no"), ["yes", "Perhaps", "no"])
    cm = _preds(tmp_path, "cm.jsonl", _rows(root, "caption_matching"), ["B", "the second", "A"])
    judge = ScriptedJudge()
    _score(
        tmp_path,
        root,
        "TempCompass:yes_no,TempCompass:caption_matching",
        [yn, cm],
        rule="official+judge",
        judge=JUDGE,
        judge_engine=judge,
    )
    heads = [text.split("\n\n", 1)[1] for _, text in judge.asked]
    assert heads == [
        "Yes/No Question:\nIs t2 fast?\nGround-Truth Answer: yes\nModel Prediction: Perhaps",
        "Caption Matching Question:\nWhich caption matches t2?\nCaption A: slow\nCaption B: "
        "fast\nGround-Truth Answer: Caption B: fast\nModel Prediction: the second",
    ]


def test_judge_rule_without_a_judge_is_refused_before_any_run_is_made(
    tmp_path: Path, root: Path
) -> None:
    preds = _preds(tmp_path, "mc.jsonl", _rows(root, "multi-choice"), ["B", "A", "C"])
    with pytest.raises(ConfigError, match=r"--rule official\+judge .* give --judge-model"):
        _score(tmp_path, root, "TempCompass", [preds], rule="official+judge")
    assert not (tmp_path / "runs" / "r").exists()


def test_judge_rule_called_without_a_judge_leaves_an_undecided_reply_unscored() -> None:
    from tests._scoring_helpers import sample

    s = sample("multiple_choice", "B", ["slow", "fast", "still"])
    got = score(s, "It is moving fast", rule="tempcompass+judge")
    assert (got.value, got.metadata["decided_by"]) == (None, None)


@pytest.mark.parametrize(
    ("reply", "rating"),
    [("Correct.", 1.0), ("Incorrect.", 0.0), ("The prediction is Correct", 1.0), ("unsure", None)],
)
def test_judge_reply_is_rated_as_llm_output_to_rating_does(
    reply: str, rating: float | None
) -> None:
    assert judge_rating(reply) == rating


def _all_files(tmp_path: Path, root: Path) -> list[Path]:
    return [
        _preds(tmp_path, "mc.jsonl", _rows(root, "multi-choice"), ["B", "A", "B"]),  # 2/3
        _preds(tmp_path, "yn.jsonl", _rows(root, "yes_no"), ["yes", "no", "no"]),  # 1/3
        _preds(tmp_path, "cm.jsonl", _rows(root, "caption_matching"), ["B", "B", "B"]),  # 3/3
        _preds(tmp_path, "cap.jsonl", _rows(root, "captioning"), ["t1 fast", "x", "y"]),  # 1/3
    ]


@pytest.fixture
def scored_all(tmp_path: Path, root: Path) -> Path:
    """The four formats' predictions scored as ``--bench TempCompass:all`` into one run."""
    _score(
        tmp_path,
        root,
        "TempCompass:all",
        _all_files(tmp_path, root),
        judge=JUDGE,
        judge_engine=ScriptedJudge(),
    )
    return tmp_path / "runs" / "r"


def test_tempcompass_all_scores_the_four_formats_into_one_run_with_the_pooled_avg_all(
    scored_all: Path,
) -> None:
    run = load_run(scored_all, bootstrap=0)
    overall = {n: b.overall for n, b in run.benchmarks.items()}
    assert overall == pytest.approx(
        {
            "TempCompass": 100 * 2 / 3,
            "TempCompass:yes_no": 100 * 1 / 3,
            "TempCompass:caption_matching": 100.0,
            "TempCompass:captioning": 100 * 1 / 3,
        }
    )
    avg_all = combined_headlines(run.benchmarks.values())["TempCompass:avg_all"]
    assert avg_all.overall == pytest.approx(100 * (2 + 1 + 3 + 1) / 12)  # pooled, by hand


def test_report_of_tempcompass_all_shows_the_avg_all(scored_all: Path, tmp_path: Path) -> None:
    out = tmp_path / "rep"
    assert main(["report", str(scored_all), "--out", str(out), "--format", "md"]) == 0
    md = (out / "report.md").read_text()
    assert "| TempCompass:avg_all |" in md
    assert "| TempCompass:yes_no |" in md and "TempCompass:yes_no:yes_no" not in md


def test_scoring_another_variant_into_a_run_is_refused_and_never_appended(
    tmp_path: Path, root: Path
) -> None:
    mc, yn = _all_files(tmp_path, root)[:2]
    _score(tmp_path, root, "TempCompass", [mc])
    before = (tmp_path / "runs" / "r" / "TempCompass.jsonl").read_text()
    with pytest.raises(ConfigError, match="another configuration"):
        _score(tmp_path, root, "TempCompass:yes_no", [yn])
    assert (tmp_path / "runs" / "r" / "TempCompass.jsonl").read_text() == before


REPLIES = {"t1": "B", "t2": "A. slow", "t3": "It is moving fast"}


class ReplyEngine:
    """The model under test: one fixed reply per TempCompass video (``REPLIES``)."""

    async def generate(self, request: Request) -> Completion:
        vid = re.search(r"How (t\d)\?", request.text)
        text = REPLIES[vid.group(1)] if vid else ""
        return Completion(request_id=request.id, texts=[text], timings=Timings())

    async def close(self) -> None:
        return None


def test_run_with_the_judge_rule_judges_only_the_undecided_reply_in_the_pipeline(
    tmp_path: Path, root: Path
) -> None:
    from evalkit.run.config import RunConfig
    from evalkit.run.execute import execute

    cfg = RunConfig(
        model="reply-engine",
        bench=["TempCompass"],
        data_root=str(root),
        cache_root=str(tmp_path / "cache"),
        cache_workers=1,
        runs_dir=str(tmp_path / "runs"),
        run_id="r",
        judge=JUDGE,
        rule="official+judge",
    )
    judge = ScriptedJudge()
    execute(cfg, engine=ReplyEngine(), judge_engine=judge)
    got = [
        (r.score.value, r.score.metadata["decided_by"]) for r in _records(tmp_path, "TempCompass")
    ]
    assert (sorted(got, key=str), len(judge.asked)) == (
        [(0.0, "rule"), (1.0, "judge"), (1.0, "rule")],
        1,
    )


def test_run_with_the_judge_rule_and_no_judge_is_one_line_exit_2(
    tmp_path: Path, root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    argv = ["run", "--bench", "TempCompass", "--data-root", str(root), "--model", str(tmp_path)]
    assert main([*argv, "--rule", "official+judge", "--runs-dir", str(tmp_path / "runs")]) == 2
    err = [line for line in capsys.readouterr().err.splitlines() if line.strip()]
    assert len(err) == 1 and "error: --rule official+judge sends" in err[0]
    assert not (tmp_path / "runs").exists()
