"""The report of a fixture run, byte for byte: a refactor must not change what users read.

The run is written by the real runner and pipeline (a scripted engine answers by a hash of
the request id, one request fails) over three benchmarks in their official layouts:
Video-MME (multiple choice; a failed and an unscored sample), VSI-Bench (numeric and
multiple choice, merged macro mean), VCR-Bench (judged samples left unscored: no judge).
The terminal, Markdown and HTML reports are compared with tests/snapshots/report/ after
masking what differs between two runs of the same records: wall-clock figures (the
utilisation table), the creation time, package versions, and the embedded PNG bytes.

A deliberate change of the report: rerun with EVALKIT_UPDATE_SNAPSHOTS=1 and name the
change in the commit.
"""

from __future__ import annotations

import os
import re
import zlib
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from evalkit.engines.base import Completion, Request, Timings
from evalkit.reports import build_report, write_report
from evalkit.run.config import RunConfig
from evalkit.run.execute import execute
from evalkit.scoring import rules
from tests.fixtures.bench import official, official_reasoning_streaming

SNAPSHOTS = Path(__file__).parent / "snapshots" / "report"
UPDATE = os.environ.get("EVALKIT_UPDATE_SNAPSHOTS") == "1"
REPLIES = ["A", "B", "The answer is C.", "3.5", "I cannot tell", "[2.0, 5.0]"]
BENCHES = {"Video-MME": official.videomme, "VSI-Bench": official_reasoning_streaming.vsibench}
BENCHES["VCR-Bench"] = official_reasoning_streaming.vcrbench


class HashReplies:
    """Replies picked by the crc32 of the request id; every 13th id fails in the engine."""

    model = "scripted"

    async def generate(self, request: Request) -> Completion:
        h = zlib.crc32(request.id.encode())
        if h % 13 == 0:
            raise RuntimeError(f"scripted engine failure on {request.id}")
        text = REPLIES[h % len(REPLIES)]
        return Completion(request.id, [text], 10, 2, timings=Timings())

    async def close(self) -> None:
        return None


@pytest.fixture(scope="module")
def shipped_rules_only() -> Iterator[None]:
    """Rules other test modules registered (process-wide) would add rows to the
    sensitivity tables: the snapshot is of what the shipped rules give."""
    saved = [r for _, r in rules.RULES.items() if r.source.startswith("tests/")]
    for r in saved:
        rules.unregister(r.name, r.task_type)
    yield
    for r in saved:
        rules.add_rule(r)


@pytest.fixture(scope="module")
def reports(tmp_path_factory: pytest.TempPathFactory, shipped_rules_only: None) -> dict[str, str]:
    root = tmp_path_factory.mktemp("snapshot")
    for name, make in BENCHES.items():
        make(root / "data" / name)
    cfg = RunConfig(
        model="scripted",
        engine="openai",
        bench=list(BENCHES),
        data_root=str(root / "data"),
        cache_root=str(root / "cache"),
        cache_workers=1,
        runs_dir=str(root / "runs"),
        run_id="fixture",
    )
    result = execute(cfg, engine=HashReplies())
    report = build_report([result.path])
    console = Console(record=True, width=160, color_system=None, force_terminal=False)
    files = write_report(report, root / "report", ["table", "md", "html"], console)
    return {
        "report.txt": console.export_text(),
        "report.md": files["md"].read_text(),
        "report.html": files["html"].read_text(),
    }


_VOLATILE = [
    # the utilisation table: wall-clock figures of this run (cells after "samples")
    (re.compile(r"^(\| [^|]+ \| \d+ \|)(?: [^|]+ \|){9}$", re.M), r"\1 <timing> |"),
    # in the terminal the figures also set the column widths: the whole table goes
    (re.compile(r"^Pipeline and engine utilisation.*?(?=^  engine busy =)", re.M | re.S), ""),
    (re.compile(r"(<tr><td>[^<]+</td><td>\d+</td>)(?:<td>[^<]*</td>){9}(</tr>)"), r"\1<timing>\2"),
    (re.compile(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d[+-]\d{4}"), "<created>"),
    (re.compile(r"(versions(?:</?td>|\W)+)[^|<│\n]*"), r"\1<versions>"),
    (re.compile(r"base64,[A-Za-z0-9+/=]+"), "base64,<png>"),
]


# the terminal's column widths follow the longest cell, e.g. the versions line (which lists
# the packages the process has imported, so it depends on what ran before): widths go
_WIDTHS = [(re.compile(r"([─━═])\1+"), r"\1"), (re.compile(r" {2,}"), " ")]


def _masked(text: str, widths: bool = False) -> str:
    for pattern, repl in _VOLATILE + (_WIDTHS if widths else []):
        text = pattern.sub(repl, text)
    return text


@pytest.mark.parametrize("name", ["report.txt", "report.md", "report.html"])
def test_the_fixture_runs_report_is_unchanged(reports: dict[str, str], name: str) -> None:
    got = _masked(reports[name], widths=name.endswith(".txt"))
    path = SNAPSHOTS / name
    if UPDATE or not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(got)
        if not UPDATE:
            pytest.fail(f"{path} did not exist: written; check it and commit it")
    assert got == path.read_text(), f"{name} differs from {path} (see the module docstring)"


def test_the_mask_leaves_the_scores_in(reports: dict[str, str]) -> None:
    """The masking hides timings only: scores, counts and notes stay compared."""
    md = _masked(reports["report.md"])
    assert "| Video-MME | 0.00 ± 0.00 | mean | 6 | 4 | 1 | 1 |" in md
    assert "<timing>" in md and "<created>" in md and "<versions>" in md
    assert md.count("<timing>") == 3  # one per benchmark row of the utilisation table
    assert "Pipeline and engine utilisation" not in _masked(reports["report.txt"])
    assert "Video-MME" in _masked(reports["report.txt"])
