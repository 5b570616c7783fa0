"""The extraction-sensitivity section: the official number under each rule, flips, examples.

The run is written by the real pipeline with the run's scorer (``make_scorer``) under a
spec whose headline rule is the test-only last-letter rule; the hand-traced verdicts:

    id  reply                                  last-letter (headline)   evalkit
    s1  "C"                                    1 (C)                    1 (C)
    s2  "B or C"                               1 (C)                    0 (two letters)
    s3  "The answer is C. Option A is wrong"   0 (A)                    1 (C, "answer is")
    s4  "Answer: A. Actually, C"               1 (C)                    0 (A, "Answer:")
    s5  "B"                                    0 (B)                    0 (B)
    s6  engine failure                         0 (failed)               0 (failed)

Video-MME's official aggregate is the pooled mean: 3/6 = 50.0 under the headline rule,
2/6 = 33.33 under evalkit's; 3 flips (s3 up, s2 and s4 down) of 5 compared samples.
"""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image
from rich.console import Console

from evalkit.bench.registry import get_benchmark
from evalkit.bench.spec import ScoringSpec
from evalkit.engines.base import Request
from evalkit.pipeline import Pipeline, PipelineConfig
from evalkit.reports import build_report, load_run, write_report
from evalkit.run.components import make_scorer
from evalkit.sample import Sample
from evalkit.testing.runs import Rec, open_run, write_run
from tests._browser import dump_dom, screenshot
from tests._sensitivity_rules import LAST_LETTER
from tests.scripted_engine import ScriptedEngine

# the test-only rule LAST_LETTER is registered per test (tests/_sensitivity_rules.py)
pytestmark = pytest.mark.usefixtures("last_letter_rule")

REPLIES = {
    "s1": "C",
    "s2": "B or C",
    "s3": "The answer is C. Option A is wrong",
    "s4": "Answer: A. Actually, C",
    "s5": "B",
    "s6": "C",
}


def _samples() -> list[Sample]:
    return [
        Sample(
            id=sid,
            task_type="multiple_choice",
            question=f"question {sid}",
            options=["w", "x", "y", "z"],
            target="C",
            benchmark="Video-MME",
            fields={"duration": "short", "domain": "Knowledge", "task": "Counting"},
        )
        for sid in REPLIES
    ]


def _prepare(sample: Sample) -> Request:
    return Request(id=sample.id, text=sample.question, metadata={"answer": REPLIES[sample.id]})


@pytest.fixture
def rule_run(tmp_path: Path) -> Path:
    run, fp, _ = open_run(tmp_path / "run", "/ckpt/model", ["Video-MME"])
    spec = get_benchmark("Video-MME").model_copy(
        update={"scoring": ScoringSpec(official={"multiple_choice": LAST_LETTER})}
    )
    engine = ScriptedEngine(prefill_s=0.0, decode_s=0.0, fail_ids={"s6"})
    cfg = PipelineConfig(max_retries=0)
    with run.store("Video-MME") as store:
        pipe = Pipeline(engine, _prepare, make_scorer(spec), store, cfg, fp)
        asyncio.run(pipe.run(_samples()))
    return run.path


def test_each_rule_gets_the_official_number_and_its_flips(rule_run: Path) -> None:
    b = load_run(rule_run, bootstrap=10).benchmarks["Video-MME"]
    sens = b.sensitivity
    assert sens is not None and sens.headline_rules == {"multiple_choice": LAST_LETTER}
    head, rows = sens.rows[0], {r.rule: r for r in sens.rows[1:]}
    assert head.headline and head.rule == LAST_LETTER and head.overall == pytest.approx(50.0)
    assert head.overall == b.overall and head.source == "tests/_sensitivity_rules.py"
    ek = rows["evalkit"]
    assert ek.overall == pytest.approx(100 * 2 / 6) and ek.delta == pytest.approx(-50 / 3)
    assert (ek.changed, ek.up, ek.down, ek.compared, ek.errors) == (3, 1, 2, 5, 0)
    assert ek.source == "evalkit"


def test_leaving_failed_samples_out_changes_every_rules_number_alike(rule_run: Path) -> None:
    sens = load_run(rule_run, failed="exclude", bootstrap=10).benchmarks["Video-MME"].sensitivity
    assert sens is not None
    by = {r.rule: r.overall for r in sens.rows}
    assert by[LAST_LETTER] == pytest.approx(60.0) and by["evalkit"] == pytest.approx(40.0)


def test_examples_show_each_flipping_reply_with_its_verdict_under_each_rule(
    rule_run: Path,
) -> None:
    sens = load_run(rule_run, bootstrap=10).benchmarks["Video-MME"].sensitivity
    assert sens is not None
    got = {e.id: e for e in sens.examples}
    assert {"s2", "s3", "s4"} <= set(got) and "s6" not in got  # a failed sample has no reply
    assert got["s2"].reply == "B or C"
    assert got["s2"].verdicts["headline"] == "1 (C)"
    assert got["s2"].verdicts["evalkit"] == "0 (no answer)"
    assert got["s3"].verdicts["headline"] == "0 (A)" and got["s3"].verdicts["evalkit"] == "1 (C)"


def test_every_output_names_the_headline_rule_and_shows_the_table(
    rule_run: Path, tmp_path: Path
) -> None:
    report = build_report([rule_run], bootstrap=10)
    console = Console(record=True, width=250)
    files = write_report(report, tmp_path / "out", ["table", "md", "html", "json"], console)
    term = console.export_text()
    assert "Video-MME: extraction sensitivity" in term
    assert f"Video-MME: headline extraction rule {LAST_LETTER}" in term
    md = files["md"].read_text()
    assert f"| {LAST_LETTER} | headline | 50.00 |  |  |  | 5 |  |" in md
    assert "| evalkit |  | 33.33 | -16.67 | 3 | 1 / 2 | 5 | 0 | evalkit |" in md
    # s2 is shown why the rules differ, among the examples, and with its prompt
    why, s2, asked = [line for line in md.splitlines() if line.startswith("| s2 |")]
    assert why == "| s2 | B or C | 1 (C) | 0 (no answer) |"
    assert asked == "| s2 | question s2 |"  # the prompts of the examples, a table of their own
    assert s2.startswith("| s2 | B or C | 1 (C) |") and "| 0 (no answer) |" in s2
    html = files["html"].read_text()
    assert "<td class='headline'>headline</td>" in html
    assert f"headline rule: {LAST_LETTER}" in html
    doc = (files["json"]).read_text()
    assert '"changed": 3' in doc and f'"rule": "{LAST_LETTER}"' in doc


def test_records_without_rules_get_no_section(tmp_path: Path) -> None:
    run = write_run(tmp_path / "old", "/ckpt/m", {"Video-MME": [Rec("1"), Rec("2", 0.0)]})
    report = build_report([run], bootstrap=10)
    assert report.runs[0].benchmarks["Video-MME"].sensitivity is None
    assert not any("extraction sensitivity" in s.title for s in report.sections)


def test_a_benchmark_with_only_its_headline_rule_says_so(tmp_path: Path) -> None:
    recs = [Rec("1", rule="evalkit"), Rec("2", 0.0, rule="evalkit")]
    run = write_run(tmp_path / "one", "/ckpt/m", {"Video-MME": recs})
    (section,) = [s for s in build_report([run], bootstrap=10).sections if "sensitivity" in s.title]
    assert [r[:3] for r in section.rows] == [["evalkit", "headline", "50.00"]]
    assert any("no other extraction rule" in n for n in section.notes)


@pytest.mark.heavy
def test_the_sensitivity_table_renders_in_headless_chromium(rule_run: Path, tmp_path: Path) -> None:
    page = write_report(build_report([rule_run], bootstrap=10), tmp_path / "out", ["html"])["html"]
    dom = dump_dom(page)
    assert re.search(r"<h4>Video-MME: extraction sensitivity</h4>\s*<table>", dom)
    assert "<td>0 (no answer)</td>" in dom  # the examples table made it into the DOM
    shot = tmp_path / "shot.png"
    screenshot(page, shot, 1300, 3000)
    with Image.open(shot) as im:
        rgb = np.asarray(im.convert("RGB"), dtype=int)
    # the headline cell's background (#e8f0fe) is used nowhere else on the page
    headline_pixels = (np.abs(rgb - [232, 240, 254]).sum(axis=-1) < 6).sum()
    assert headline_pixels > 300
