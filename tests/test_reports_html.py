"""The written report: Markdown, HTML with valid embedded PNG plots, JSON, the CLI."""

from __future__ import annotations

import base64
import io
import json
import re
import shutil
import subprocess
import sys
from html.parser import HTMLParser
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from evalkit.cli.main import main
from evalkit.reports import build_report, load_run, write_report
from evalkit.testing.runs import Rec, write_run
from tests._browser import chromium, dump_dom, page_layout, screenshot

PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"


def _recs(n_right: int, n: int = 20, t0: float = 1000.0) -> list[Rec]:
    out = []
    for i in range(n):
        s = t0 + 0.1 * i
        timings = {
            "io_start": s,
            "io_end": s + 0.05,
            "submitted": s + 0.07,
            "first_token": s + 0.2,
            "finished": s + 0.6,
            "scored": s + 0.61,
        }
        dur = ("short", "medium", "long")[i % 3]
        out.append(Rec(str(i), float(i < n_right), {"duration": dur}, timings=timings))
    out.append(Rec("f", fields={"duration": "short"}, failed_stage="io", timings={"io_start": t0}))
    return out


@pytest.fixture
def two_runs(tmp_path: Path) -> tuple[Path, Path]:
    model = "/ckpt/Qwen2.5-VL-7B-Instruct"
    a = write_run(tmp_path / "runs" / "a", model, {"Video-MME": _recs(12)})
    b = write_run(tmp_path / "runs" / "b", model, {"Video-MME": _recs(12)}, frames={"fps": 1.0})
    return a, b


class _Links(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.img: list[str] = []
        self.href: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        a = dict(attrs)
        if tag == "img" and a.get("src"):
            self.img.append(str(a["src"]))
        if tag == "a" and a.get("href"):
            self.href.append(str(a["href"]))


def _assert_png(data: bytes) -> None:
    assert data.startswith(PNG_SIGNATURE)
    Image.open(io.BytesIO(data)).verify()
    with Image.open(io.BytesIO(data)) as im:
        im.load()
        assert im.width > 100 and im.height > 100


def test_html_references_only_existing_valid_pngs(two_runs: tuple[Path, Path], tmp_path: Path):
    out = tmp_path / "out"
    files = write_report(build_report(list(two_runs), bootstrap=50), out, ["html"])
    links = _Links()
    links.feed(files["html"].read_text())
    # one scores plot per run, the timeline of each run, the A-vs-B plot
    assert len(links.img) == 5
    for src in links.img:
        prefix = "data:image/png;base64,"
        if src.startswith(prefix):
            _assert_png(base64.b64decode(src[len(prefix) :]))
        else:
            _assert_png((out / src).read_bytes())
    pngs = [h for h in links.href if h.endswith(".png")]
    assert len(pngs) == 5
    for href in pngs:
        _assert_png((out / href).read_bytes())


def test_markdown_links_existing_pngs_and_json_holds_the_numbers(
    two_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    files = write_report(build_report([two_runs[0]], bootstrap=50), out, ["md", "json"])
    md = files["md"].read_text()
    targets = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", md)
    assert targets and all((out / t).is_file() for t in targets)
    for t in targets:
        _assert_png((out / t).read_bytes())
    assert "| Video-MME | 57.14 ± 11.07 | mean | 21 | 20 | 1 | 0 |" in md
    doc = json.loads(files["json"].read_text())
    bench = doc["runs"][0]["benchmarks"]["Video-MME"]
    ref = load_run(two_runs[0]).benchmarks["Video-MME"]
    assert bench["overall"] == pytest.approx(ref.overall)
    assert bench["counts"] == {
        "total": 21,
        "scored": 20,
        "failed": 1,
        "unscored": 0,
        "failed_by_stage": {"io": 1},
        "scorer_failed": {},
    }
    assert bench["references"][0]["verdict"] == "miss"  # 57.14 vs 65.1
    u = bench["utilisation"]
    assert u["samples"] == 21 and 0 < u["busy_fraction"] <= 1 and u["max_in_flight"] >= 1


def test_cli_report_compares_two_identical_runs_as_not_significant(
    two_runs: tuple[Path, Path], tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    out = tmp_path / "cmp"
    argv = ["report", *map(str, two_runs), "--out", str(out), "--format", "table,json"]
    assert main([*argv, "--bootstrap", "100"]) == 0
    stdout = capsys.readouterr().out
    assert "not significant" in stdout
    assert "benchmarks.Video-MME.frames.fps: 2.0 -> 1.0" in stdout
    comp = json.loads((out / "report.json").read_text())["comparisons"][0]["benchmarks"][0]
    assert comp["delta"] == 0.0 and comp["verdict"] == "not significant"


def test_unknown_format_is_an_error(two_runs: tuple[Path, Path]) -> None:
    assert main(["report", str(two_runs[0]), "--format", "pdf"]) == 2


def test_importing_reports_does_not_import_matplotlib() -> None:
    code = "import evalkit.reports, evalkit.cli.report, sys; print('matplotlib' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "False"


@pytest.mark.heavy
def test_page_renders_with_its_plots_in_headless_chromium(
    two_runs: tuple[Path, Path], tmp_path: Path
) -> None:
    out = tmp_path / "out"
    page = write_report(build_report(list(two_runs), bootstrap=50), out, ["html"])["html"]
    # A copy of the page reports, once loaded, the decoded width of every image.
    probe = out / "probe.html"
    script = (
        "<script>window.addEventListener('load',()=>document.body.setAttribute('data-imgs',"
        "[...document.images].map(i=>i.complete?i.naturalWidth:-1).join(',')))</script>"
    )
    probe.write_text(page.read_text().replace("</body>", script + "</body>"))
    widths = re.search(r'data-imgs="([^"]*)"', dump_dom(probe))
    assert widths, "the page did not finish loading"
    assert [int(w) > 0 for w in widths.group(1).split(",")] == [True] * 5
    shot = tmp_path / "shot.png"
    screenshot(page, shot, 1300, 5000)
    with Image.open(shot) as im:
        rgb = np.asarray(im.convert("RGB"), dtype=int)
    # the score bars' colour (#4c72b0) appears only inside the plots
    bar_pixels = (np.abs(rgb - [76, 114, 176]).sum(axis=-1) < 30).sum()
    assert bar_pixels > 2000


def test_without_chromium_a_browser_test_fails_under_ci_and_skips_elsewhere(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(shutil, "which", lambda name: None)
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="CI=true but no chromium"):
        chromium()
    monkeypatch.delenv("CI")
    with pytest.raises(pytest.skip.Exception, match="not installed"):
        chromium()


def _wide_run(tmp_path: Path) -> Path:
    """Replies with no space to break at, four other rules, a long checkpoint path."""
    reply = "<think>" + "reasoning_without_any_space_" * 12 + "</think><answer>B</answer>"
    others = ("evalkit", "lmms_eval_videomme", "easyvideor1_mcq_strict", "vlmevalkit_can_infer")
    recs = [
        Rec(
            f"{i}_sample_with_a_rather_long_identifier_0123456789abcdef",
            float(i % 2),
            {"duration": "short", "domain": "d", "task": "t"},
            rule="videomme",
            rules={name: float((i + k) % 3 == 0) for k, name in enumerate(others)},
            prediction=reply,
        )
        for i in range(20)
    ]
    model = "/ckpt/a/long/path/to/checkpoint_folder_named_finetuned_step_000500/Qwen2.5-VL-7B"
    return write_run(tmp_path / "runs" / "wide", model, {"Video-MME": recs})


@pytest.mark.heavy
def test_every_table_fits_a_1280px_page_in_headless_chromium(tmp_path: Path) -> None:
    page = write_report(
        build_report([_wide_run(tmp_path)], bootstrap=20), tmp_path / "out", ["html"]
    )
    w = page_layout(page["html"], tmp_path / "wide.png")
    assert w["table_right"] <= w["page"] and w["scroll"] <= w["page"], w
    assert "replies whose verdict differs" in page["html"].read_text()


def test_a_cell_with_a_long_unspaced_word_may_break_it_and_others_not(tmp_path: Path) -> None:
    html = write_report(build_report([_wide_run(tmp_path)], bootstrap=20), tmp_path / "o", ["html"])
    text = html["html"].read_text()
    assert "<td class='long'>0_sample_with_a_rather_long_identifier" in text
    assert "<td>50.00 ± " in text  # a number stays whole
    assert "td.long{overflow-wrap:anywhere" in text


@pytest.mark.parametrize(
    "values, reason",
    [
        ([0.0] * 5, "no bars: every score is 0.00"),
        ([None] * 4, "no bars: nothing was scored (4 unscored: judged, no --judge-model)"),
    ],
)
def test_an_empty_scores_chart_says_why_in_its_caption(
    tmp_path: Path, values: list[float | None], reason: str
) -> None:
    recs = [Rec(str(i), v, {"duration": "short"}) for i, v in enumerate(values)]
    run = write_run(tmp_path / "runs" / "r", "/ckpt/m", {"Video-MME": recs})
    page = write_report(build_report([run], bootstrap=20), tmp_path / "out", ["html", "md"])
    assert f"r: official scores vs reference — {reason}" in page["html"].read_text()
    assert reason in page["md"].read_text()


def test_a_chart_with_a_bar_says_nothing_of_emptiness(two_runs: tuple[Path, Path], tmp_path: Path):
    page = write_report(build_report(list(two_runs), bootstrap=20), tmp_path / "out", ["html"])
    assert "no bars" not in page["html"].read_text()


@pytest.mark.heavy
def test_an_empty_chart_shows_its_reason_in_headless_chromium(tmp_path: Path) -> None:
    recs = [Rec(str(i), 0.0, {"duration": "short"}) for i in range(5)]
    run = write_run(tmp_path / "runs" / "zero", "/ckpt/m", {"Video-MME": recs})
    page = write_report(build_report([run], bootstrap=20), tmp_path / "out", ["html"])["html"]
    shot = tmp_path / "zero.png"
    page_layout(page, shot)
    with Image.open(shot) as im:
        rgb = np.asarray(im.convert("RGB"), dtype=int)
    # the reason's box (#fff3cd) is drawn inside the plot only when the chart is empty
    assert (np.abs(rgb - [255, 243, 205]).sum(axis=-1) < 12).sum() > 2000
