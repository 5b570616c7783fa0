"""A headline more than a point from evalkit's robust rule's number is explained.

Issue 35's case, written by the real pipeline (tests/_videomme_replies.py): 5 of 30
Video-MME replies carry no letter; the official rule leaves them out of the count (72.0),
evalkit's counts them wrong (60.0). The report must say how many replies each rule left
out or read differently, with two of them, in the terminal, Markdown, HTML and JSON.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console

from evalkit.reports import build_report, load_run, write_report
from evalkit.testing.runs import Rec, write_run
from tests._videomme_replies import NO_LETTER, write_videomme_run

SENTENCE = (
    "headline 72.00 under rule videomme, 60.00 under the robust rule evalkit (12.00 points "
    "apart): videomme leaves out of the count 5 replies that evalkit counts (5 as 0); evalkit "
    "leaves out 0 that videomme counts; 0 replies counted by both are read differently"
)


@pytest.fixture(scope="module")
def run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_videomme_run(tmp_path_factory.mktemp("gap") / "run")


def test_the_replies_the_official_rule_leaves_out_are_counted_and_shown(run: Path) -> None:
    sens = load_run(run, bootstrap=10).benchmarks["Video-MME"].sensitivity
    assert sens is not None and sens.gap is not None
    gap = sens.gap
    assert (gap.headline, gap.robust) == ("videomme", "evalkit")
    assert (gap.headline_score, gap.robust_score) == (pytest.approx(72.0), pytest.approx(60.0))
    assert (gap.left_out_by_headline, gap.robust_zero) == (5, 5)
    assert (gap.left_out_by_robust, gap.read_differently) == (0, 0)
    assert gap.sentence() == SENTENCE
    assert [e.reply for e in gap.examples] == NO_LETTER[:2]
    assert [(e.verdicts["headline"], e.verdicts["evalkit"]) for e in gap.examples] == [
        ("unscored (no answer)", "0 (no answer)")
    ] * 2


def test_every_format_says_why_the_rules_differ(run: Path, tmp_path: Path) -> None:
    console = Console(record=True, width=250, color_system=None)
    formats = ["table", "md", "html", "json"]
    files = write_report(build_report([run], bootstrap=10), tmp_path / "out", formats, console)
    term = " ".join(console.export_text().split())  # the notes are wrapped to the width
    assert f"Video-MME: {SENTENCE} (examples under its extraction sensitivity)" in term
    assert "Video-MME: why rules videomme and evalkit differ" in term
    md = files["md"].read_text()
    assert "#### Video-MME: why rules videomme and evalkit differ" in md
    assert f"| vm-25 | {NO_LETTER[0]} | unscored (no answer) | 0 (no answer) |" in md
    assert f"| vm-26 | {NO_LETTER[1]} | unscored (no answer) | 0 (no answer) |" in md
    assert SENTENCE in files["html"].read_text()
    doc = json.loads(files["json"].read_text())
    gap = doc["runs"][0]["benchmarks"]["Video-MME"]["sensitivity"]["gap"]
    assert gap["left_out_by_headline"] == 5 and gap["text"] == SENTENCE


def _recs(differ: int, *, leave_out: bool = False) -> list[Rec]:
    """100 replies right under both rules but ``differ`` of them, which evalkit scores 0
    (or, ``leave_out``, which the headline rule leaves out of the count)."""
    out = []
    for i in range(100):
        head: float | None = None if leave_out and i < differ else 1.0
        robust = 0.0 if i < differ else 1.0
        out.append(Rec(f"s{i:03d}", head, rule="videomme", rules={"evalkit": robust}))
    return out


def test_rules_a_point_apart_or_less_need_no_explanation(tmp_path: Path) -> None:
    path = write_run(tmp_path / "one", "/ckpt/m", {"Video-MME": _recs(1)})
    report = build_report([path], bootstrap=10)
    sens = report.runs[0].benchmarks["Video-MME"].sensitivity
    assert sens is not None and sens.rows[1].delta == pytest.approx(-1.0) and sens.gap is None
    assert not any("why rules" in s.title for s in report.sections)


def test_replies_both_rules_count_but_read_differently_are_counted(tmp_path: Path) -> None:
    path = write_run(tmp_path / "two", "/ckpt/m", {"Video-MME": _recs(2)})
    sens = load_run(path, bootstrap=10).benchmarks["Video-MME"].sensitivity
    assert sens is not None and sens.gap is not None
    gap = sens.gap
    assert (gap.read_differently, gap.robust_higher, gap.left_out_by_headline) == (2, 0, 0)
    assert [e.id for e in gap.examples] == ["s000", "s001"]
