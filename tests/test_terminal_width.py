"""``bench show``, ``bench list`` and ``report`` fit the terminal: every line within the width
(``COLUMNS`` here, as output to a pipe reads it; 100 without it), no word split in two.

"No word split" is checked against what was laid out: every word of the content (values,
headers, titles, notes) must appear whole on some line of the output.
"""

from __future__ import annotations

from collections.abc import Iterable
from pathlib import Path

import pytest
from rich.cells import cell_len

from evalkit.bench.registry import registry
from evalkit.cli.bench import _NARROW, _columns, _described
from evalkit.cli.main import main
from evalkit.reports import build_report
from evalkit.textwidth import wrap
from tests._videomme_replies import write_videomme_run

WIDTHS = [80, 100]
INDENT = 14  # the widest indent a wrapped line gets (bench show's label column)


def _check(out: str, width: int, texts: Iterable[str]) -> None:
    lines = out.splitlines()
    wide = [f"{cell_len(x)}: {x}" for x in lines if cell_len(x) > width]
    assert not wide, f"{len(wide)} line(s) wider than {width}:\n" + "\n".join(wide[:5])
    words = {w for t in texts for w in t.split() if cell_len(w) <= width - INDENT}
    split = sorted(w for w in words if not any(w in x for x in lines))
    assert not split, f"words split across lines at {width} columns: {split[:10]}"


def _run(capsys: pytest.CaptureFixture[str], *argv: str) -> str:
    capsys.readouterr()
    assert main(list(argv)) == 0
    return capsys.readouterr().out


@pytest.mark.parametrize("width", WIDTHS)
def test_bench_show_fits_every_spec(
    width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    for base in registry().specs():
        for name in [base.name, *(f"{base.name}:{v}" for v in base.variants)]:
            spec = registry().get(name)
            texts = [x for pair in _described(spec) for x in pair]
            _check(_run(capsys, "bench", "show", name), width, texts)


@pytest.mark.parametrize("width", WIDTHS)
@pytest.mark.parametrize("wide", [False, True])
def test_bench_list_fits(
    width: int, wide: bool, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    out = _run(capsys, "bench", "list", *(["--wide"] if wide else []))
    rows = [_columns(spec) for spec in registry().specs()]
    shown = list(rows[0]) if wide else list(_NARROW)
    _check(out, width, [*shown, *(row[h] for row in rows for h in shown)])
    assert "interleaved_subtitles" in out  # the word of issue 35, whole


@pytest.fixture(scope="module")
def videomme_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return write_videomme_run(tmp_path_factory.mktemp("width") / "run")


@pytest.mark.parametrize("width", WIDTHS)
def test_report_fits(
    width: int,
    videomme_run: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.setenv("COLUMNS", str(width))
    out = _run(capsys, "report", str(videomme_run), "--format", "table", "--bootstrap", "10")
    sections = build_report([videomme_run], bootstrap=10).sections
    texts = [
        t
        for s in sections
        if s.rows  # a section without rows is not printed
        for t in [s.title, *s.headers, *s.notes, *(c for row in s.rows for c in row)]
    ]
    _check(out, width, texts)
    assert "replies whose verdict differs between rules" in out
    assert "lmms_eval_minerva rule" in out  # the examples' many rule columns stay legible


def test_piped_output_without_columns_is_100_wide(
    videomme_run: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.delenv("COLUMNS", raising=False)
    for argv in (["bench", "show", "Video-MME"], ["report", str(videomme_run), "--format",
                 "table", "--bootstrap", "10"]):  # fmt: skip
        out = _run(capsys, *argv)
        assert max(cell_len(x) for x in out.splitlines()) <= 100


def test_only_a_word_longer_than_a_line_is_cut() -> None:
    path = "/data/" + "x" * 40
    lines = wrap(f"a short one then {path} and more", 30, "> ")
    assert lines[0] == "> a short one then"
    assert all(cell_len(x) <= 30 for x in lines)
    assert "".join(x.removeprefix("  ") for x in lines[1:]).startswith(path)


@pytest.mark.parametrize("width", WIDTHS)
def test_bench_fetch_list_fits(
    width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalkit.hub.catalog import row

    monkeypatch.setenv("COLUMNS", str(width))
    out = _run(capsys, "bench", "fetch", "--list")
    rows = [row(spec) for spec in registry().specs()]
    _check(out, width, [t for r in rows for t in (r.name, r.how, r.source, r.media, r.size)])
    assert "Video-MME" in out and "101 GB" in out


@pytest.mark.parametrize("width", WIDTHS)
def test_the_sweep_summary_fits(
    width: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """What ``evalkit sweep`` prints at its end (it was laid out at 200 columns)."""
    from evalkit.reports.sweep import load_sweep, render_terminal, sections
    from tests.test_reports_sweep import make_sweep

    monkeypatch.setenv("COLUMNS", str(width))
    root = make_sweep(tmp_path / "sweep")
    out = render_terminal(root, bootstrap=10)
    texts = [
        t
        for s in sections(load_sweep(root, bootstrap=10))
        if s.rows
        for t in [s.title, *s.headers, *s.notes, *(c for row in s.rows for c in row)]
    ]
    _check(out, width, texts)
    assert "Video-MME: score by setting" in out


@pytest.mark.parametrize("width", WIDTHS)
def test_repro_fits(
    width: int,
    videomme_run: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """``repro``'s verdict table (a rich table laid out at 200 columns when piped, and
    split words in a narrow terminal)."""
    monkeypatch.setenv("COLUMNS", str(width))
    capsys.readouterr()
    main(["repro", str(videomme_run), "--model-name", "Qwen2.5-VL-7B-Instruct"])
    out = capsys.readouterr().out
    headers = ["benchmark", "reference", "verdict", "settings differing from reference"]
    _check(out, width, headers)
    assert "Video-MME" in out and "reproduction check" in out


@pytest.mark.parametrize("width", WIDTHS)
def test_models_fits(
    width: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """``evalkit models`` (fixed columns up to 200 characters wide) and ``models NAME``."""
    from evalkit.cli.models import _row
    from evalkit.engines.family import FAMILIES

    monkeypatch.setenv("COLUMNS", str(width))
    rows = [_row(FAMILIES.get(n)) for n in FAMILIES.names()]
    _check(_run(capsys, "models"), width, [r["family"] for r in rows])
    for row in rows:
        texts = [str(v) for k, v in row.items() if k in ("prompt", "source", "tested")]
        _check(_run(capsys, "models", row["family"]), width, texts)


def test_a_reader_that_stops_early_gets_no_traceback(tmp_path: Path) -> None:
    """``evalkit models glm4v | head -1``: the pipe closes before the output is written
    (printed by ``print``; what rich prints ends quietly by rich's own rule, exit 1)."""
    import os
    import subprocess
    import sys

    read, write = os.pipe()
    os.close(read)  # the reader is gone: the first write fails with EPIPE
    try:
        done = subprocess.run(
            [sys.executable, "-m", "evalkit", "models", "glm4v"],
            stdout=write,
            stderr=subprocess.PIPE,
            text=True,
            timeout=120,
        )
    finally:
        os.close(write)
    assert done.returncode == 0 and "Traceback" not in done.stderr, done.stderr[-2000:]
