"""The sweep report: a sweep's settings compared per benchmark, from hand-computed numbers."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
from PIL import Image

from evalkit.cli.main import main
from evalkit.errors import DataError
from evalkit.reports.sweep import load_sweep, render_terminal, sections, write_sweep_report
from evalkit.testing.runs import Rec, write_run
from tests._browser import page_layout

MODEL = "/ckpt/Qwen2.5-VL-7B-Instruct"
AXES = {"frames.max_frames": [8, 768], "generation.max_tokens": [16, 128]}
# Video-MME pins max_frames 768 and max_tokens 128: s03 is the pinned setting.
RIGHT = {"s00": 2, "s01": 4, "s02": 6, "s03": 8}  # of samples 0..9, the first k are right


def _recs(setting: str) -> list[Rec]:
    fields0 = {"duration": "short", "domain": "d", "task": "t"}
    recs = []
    for i in range(10):
        value = float(i < RIGHT[setting])
        # the evalkit rule reads sample 0 as wrong under the pinned setting: one flip
        other = 0.0 if (setting == "s03" and i == 0) else value
        recs.append(Rec(str(i), value, fields0, rule="videomme", rules={"evalkit": other}))
    fields = {"duration": "long", "domain": "d", "task": "t"}
    if setting == "s00":  # unscored under s00 only: out of the paired samples
        recs.append(Rec("u", None, fields))
    else:
        recs.append(Rec("u", 1.0, fields))
    if setting == "s03":  # run under the pinned setting only: in its headline, not paired
        recs.append(Rec("x", 1.0, fields))
    return recs


def make_sweep(root: Path, *, skip: tuple[str, ...] = ()) -> Path:
    """A 2x2 sweep of real run directories (the product's writers) and its sweep.json."""
    settings = []
    grid = [(f, t) for f in AXES["frames.max_frames"] for t in AXES["generation.max_tokens"]]
    for i, (frames, tokens) in enumerate(grid):
        sid, name = f"s{i:02d}", f"max_frames-{frames}__max_tokens-{tokens}"
        values = {"frames.max_frames": frames, "generation.max_tokens": tokens}
        settings.append({"id": sid, "values": values, "run": name})
        if sid not in skip:
            write_run(
                root / name,
                MODEL,
                {"Video-MME": _recs(sid)},
                frames={"max_frames": frames},
                max_tokens=tokens,
            )
    doc = {
        "schema": 1,
        "kind": "evalkit-sweep",
        "axes": AXES,
        "zip": False,
        "base": {"model": MODEL, "bench": ["Video-MME"]},
        "settings": settings,
        "pinned": {"Video-MME": {"frames.max_frames": 768, "generation.max_tokens": 128}},
        "benchmarks": ["Video-MME"],
    }
    (root / "sweep.json").write_text(json.dumps(doc))
    return root


def test_hand_computed_scores_paired_deltas_and_the_axis_that_moves_most(tmp_path: Path):
    report = load_sweep(make_sweep(tmp_path / "sw"), bootstrap=200)
    (b,) = report.benchmarks
    rows = {r.setting.id: r for r in b.rows}
    # headline = the run's official number (Video-MME: mean over answered samples):
    # s00 2/10 (u unscored), s01 5/11, s02 7/11, s03 10/12 (x only there)
    assert [rows[s].headline for s in RIGHT] == pytest.approx([20.0, 500 / 11, 700 / 11, 250 / 3])
    # paired: samples 0..9 only (u unscored under s00, x only under s03)
    assert b.n_common == 10
    assert [rows[s].paired for s in RIGHT] == pytest.approx([20.0, 40.0, 60.0, 80.0])
    assert b.pinned_id == "s03" and b.pinned_by_spec and rows["s03"].pinned
    assert [rows[s].delta for s in ("s00", "s01", "s02")] == pytest.approx([-60.0, -40.0, -20.0])
    lo, hi = rows["s00"].delta_ci
    assert lo is not None and hi is not None and lo <= -60.0 <= hi < 0
    # main effects: max_frames (60+80)/2 - (20+40)/2 = 40; max_tokens (40+80)/2 - (20+60)/2 = 20
    assert [(e.axis, e.low, e.high) for e in b.effects] == [
        ("frames.max_frames", 8, 768),
        ("generation.max_tokens", 16, 128),
    ]
    assert [e.delta for e in b.effects] == pytest.approx([40.0, 20.0])
    assert re.fullmatch(
        r"Video-MME: frames\.max_frames moves the score most: 8 -> 768 \+40\.0 points "
        r"\[\+\d+\.\d, \+\d+\.\d\]\.",
        b.sentence,
    ), b.sentence
    text = render_terminal(tmp_path / "sw", bootstrap=200)
    assert b.sentence in text and "s03 (pinned)" in text
    # the reference (Qwen2.5-VL-7B-Instruct has one for Video-MME) and the pinned run's
    # extraction sensitivity: evalkit's rule gives 9/12 = 75.00, one flip
    assert "reference: Qwen2.5-VL-7B-Instruct 65.1" in text
    assert "extraction rules (s03): videomme 83.33; evalkit 75.00 (-8.33, 1 flips)" in text


def test_the_pinned_setting_defaults_to_the_first_when_none_has_the_pinned_values(
    tmp_path: Path,
) -> None:
    root = make_sweep(tmp_path / "sw")
    doc = json.loads((root / "sweep.json").read_text())
    doc["pinned"]["Video-MME"]["frames.max_frames"] = 32
    (root / "sweep.json").write_text(json.dumps(doc))
    (b,) = load_sweep(root, bootstrap=50).benchmarks
    assert b.pinned_id == "s00" and not b.pinned_by_spec
    assert b.rows[3].delta == pytest.approx(60.0)
    assert any("deltas are against the first setting (s00)" in n for n in b.notes)


def test_a_zipped_sweep_says_its_axes_cannot_be_told_apart(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw")
    doc = json.loads((root / "sweep.json").read_text())
    doc["zip"] = True  # (8, 16) and (768, 128) only: s00 20 and s03 80 on the paired samples
    doc["settings"] = [doc["settings"][0], doc["settings"][3]]
    (root / "sweep.json").write_text(json.dumps(doc))
    (b,) = load_sweep(root, bootstrap=50).benchmarks
    assert b.sentence.startswith(
        "Video-MME: the zipped axes frames.max_frames, generation.max_tokens change together "
        "(their effects cannot be told apart): frames.max_frames 8 -> 768 moves the score "
        "+60.0 points ["
    ), b.sentence


def test_a_missing_setting_run_is_shown_as_missing_never_as_zero(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw", skip=("s01",))
    (b,) = load_sweep(root, bootstrap=50).benchmarks
    row = b.rows[1]
    assert row.headline is None and row.paired is None and row.delta is None
    assert row.status.startswith("missing")
    # the effect of an axis averages the settings that have results
    assert b.effects[0].axis == "frames.max_frames"
    assert b.effects[0].delta == pytest.approx((60 + 80) / 2 - 20)
    text = render_terminal(root, bootstrap=50)
    assert "missing (no run directory max_frames-8__max_tokens-128)" in text
    assert "left out of the paired comparison (no results): s01" in text


def test_an_incomplete_setting_run_is_shown_as_such(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw")
    (root / "max_frames-8__max_tokens-16" / "Video-MME.jsonl").unlink()
    (b,) = load_sweep(root, bootstrap=50).benchmarks
    assert b.rows[0].headline is None and b.rows[0].status.startswith("incomplete")


@pytest.mark.parametrize(
    ("text", "why"),
    [
        ("{not json", "not valid JSON"),
        ('{"kind": "evalkit-sweep", "axes": {}, "pinned": {}, "benchmarks": []}', "'settings'"),
        ('{"kind": "something else"}', "not an evalkit sweep manifest"),
    ],
)
def test_a_malformed_sweep_json_is_a_one_line_error_naming_the_file(
    tmp_path: Path, text: str, why: str
) -> None:
    root = make_sweep(tmp_path / "sw")
    (root / "sweep.json").write_text(text)
    with pytest.raises(DataError) as exc:
        load_sweep(root)
    assert str(root / "sweep.json") in str(exc.value) and why in str(exc.value)
    assert "\n" not in str(exc.value)


def test_a_missing_sweep_json_is_a_one_line_error_naming_the_file(tmp_path: Path) -> None:
    with pytest.raises(DataError, match=r"sweep\.json: no sweep manifest"):
        load_sweep(tmp_path)


def test_cli_report_on_a_sweep_dir_renders_the_sweep_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = make_sweep(tmp_path / "sw")
    assert main(["report", str(root), "--bootstrap", "50"]) == 0
    out = capsys.readouterr().out
    assert "Video-MME: score by setting" in out and "moves the score most" in out
    md = (root / "report" / "report.md").read_text()
    assert "| s03 (pinned) | 768 | 128 | 83.33 | 80.00 |" in md
    data = json.loads((root / "report" / "report.json").read_text())
    assert data["benchmarks"][0]["pinned"] == "s03"
    html = (root / "report" / "report.html").read_text()
    assert "<style>" in html and "src='http" not in html  # self-contained


def _widen(root: Path) -> None:
    """Seven more axes in sweep.json: five held at one value, ``frames.fps`` and
    ``frames.nframes`` with two (so four axes vary), and a setting whose run is missing."""
    doc = json.loads((root / "sweep.json").read_text())
    extra = {
        "frames.max_pixels": 602112,
        "frames.min_pixels": 100352,
        "frames.total_pixels": 24084480,
        "frames.resize": "torchvision",
        "prompt.variant": "official",
    }
    for key, value in extra.items():
        doc["axes"][key] = [value]
        for st in doc["settings"]:
            st["values"][key] = value
    doc["axes"]["frames.nframes"] = [16, 32]
    doc["axes"]["frames.fps"] = [2.0, 0.5]
    for i, st in enumerate(doc["settings"]):
        st["values"]["frames.nframes"] = doc["axes"]["frames.nframes"][i % 2]
        st["values"]["frames.fps"] = doc["axes"]["frames.fps"][i % 2]
    missing = dict(doc["settings"][0]["values"])
    doc["settings"].append({"id": "s04", "values": missing, "run": "never_ran_" + "x" * 40})
    (root / "sweep.json").write_text(json.dumps(doc))


def test_axes_held_at_one_value_are_a_note_and_many_varying_axes_share_a_column(
    tmp_path: Path,
) -> None:
    root = make_sweep(tmp_path / "sw")
    _widen(root)
    overview, bench = sections(load_sweep(root, bootstrap=20))
    assert overview.headers == ["setting", "values", "run", "status"]
    # the four varying axes, in sweep.json's order, in one column
    assert bench.rows[0][1] == (
        "frames.max_frames=8, generation.max_tokens=16, frames.nframes=16, frames.fps=2.0"
    )
    held = (
        "held at one value in every setting: frames.max_pixels=602112, "
        "frames.min_pixels=100352, frames.total_pixels=24084480, frames.resize=torchvision, "
        "prompt.variant=official"
    )
    assert held in overview.notes and held in bench.notes
    # two varying axes keep a column each
    overview2, _ = sections(load_sweep(make_sweep(tmp_path / "sw2"), bootstrap=20))
    assert overview2.headers == [
        "setting",
        "frames.max_frames",
        "generation.max_tokens",
        "run",
        "status",
    ]


def _in_chromium(page: Path, shot: Path) -> tuple[dict[str, int], np.ndarray]:
    """The page's layout at 1280 px (``page_layout``) and its screenshot (RGB)."""
    layout = page_layout(page, shot, height=2000)
    with Image.open(shot) as im:
        rgb = np.asarray(im.convert("RGB"), dtype=int)
    return layout, rgb


@pytest.mark.heavy
def test_a_sweep_with_many_axes_fits_a_1280px_page_in_headless_chromium(tmp_path: Path):
    root = make_sweep(tmp_path / "sw")
    _widen(root)
    page = write_sweep_report(load_sweep(root, bootstrap=50), tmp_path / "out", ["html"])["html"]
    w, _ = _in_chromium(page, tmp_path / "wide.png")
    assert w["tables"] == 2
    assert w["table_right"] <= w["page"] and w["scroll"] <= w["page"], w


@pytest.mark.heavy
def test_the_sweep_page_fits_a_1280px_page_in_headless_chromium(tmp_path: Path) -> None:
    root = make_sweep(tmp_path / "sw")
    page = write_sweep_report(load_sweep(root, bootstrap=50), tmp_path / "out", ["html"])["html"]
    w, rgb = _in_chromium(page, tmp_path / "sweep.png")
    assert w["tables"] == 2  # the settings, then Video-MME by setting
    assert w["table_right"] <= w["page"] and w["scroll"] <= w["page"], w
    assert rgb.shape[1] == 1280

    def pixels(colour: list[int]) -> int:
        return int((np.abs(rgb - colour).sum(axis=-1) < 30).sum())

    # the header cells' background (#f0f0f0): the tables are on the screenshot
    assert pixels([240, 240, 240]) > 5000
    # the chart: bars of the other settings (#4c72b0), the pinned one (#1a4d8f), and the
    # published reference's dashed line (#c44e52)
    assert pixels([76, 114, 176]) > 2000 and pixels([26, 77, 143]) > 1000
    assert pixels([196, 78, 82]) > 200


@pytest.mark.parametrize("vectorised", [True, False])
def test_grouped_settings_are_resampled_by_whole_groups_with_one_draw_for_all(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, vectorised: bool
) -> None:
    """Video-MME-v2 scores groups of 4 questions: two settings with the same records have
    a delta of exactly 0 in every replicate (one draw for both), by either bootstrap path."""
    import evalkit.reports.sweep as sweep_mod

    if not vectorised:  # the official aggregate re-run on every replicate
        monkeypatch.setattr(sweep_mod, "linear_form", lambda *a, **k: None)
    recs = [
        Rec(
            f"q{g}_{pos}",
            float((g * 7 + pos) % 3 != 0),
            {
                "group": f"g{g}",
                "position": pos,
                "group_type": ("relevance", "logic")[g % 2],
                "group_structure": "[1, 2, 3, 4]",
            },
        )
        for g in range(8)
        for pos in range(4)
    ]
    root = tmp_path / "sw"
    settings = []
    for i, frames in enumerate((8, 16)):
        name = f"max_frames-{frames}"
        write_run(root / name, MODEL, {"Video-MME-v2": recs}, frames={"max_frames": frames})
        settings.append({"id": f"s{i:02d}", "values": {"frames.max_frames": frames}, "run": name})
    doc = {
        "schema": 1,
        "kind": "evalkit-sweep",
        "axes": {"frames.max_frames": [8, 16]},
        "zip": False,
        "base": {},
        "settings": settings,
        "pinned": {"Video-MME-v2": {"frames.max_frames": None}},
        "benchmarks": ["Video-MME-v2"],
    }
    (root / "sweep.json").write_text(json.dumps(doc))
    (b,) = load_sweep(root, bootstrap=30).benchmarks
    assert "clusters by group" in b.method
    assert ("per replicate" in b.method) is not vectorised
    assert b.n_common == 32
    s0, s1 = b.rows
    assert s1.paired == s0.paired == s0.headline
    assert s1.delta == 0.0 and s1.delta_ci == (0.0, 0.0)
    assert s0.ci[0] is not None and s0.ci[0] < s0.ci[1]  # the score itself does vary


def _alike(root: Path, bench: str, listed: bool) -> Path:
    """A sweep of max_frames 4 vs 8 over ``bench``, both settings scoring 3 of 6 alike;
    ``listed``: sweep.json names the benchmark (a --data sweep named none before)."""
    settings = []
    for i, frames in enumerate((4, 8)):
        name = f"max_frames-{frames}"
        settings.append({"id": f"s{i:02d}", "values": {"frames.max_frames": frames}, "run": name})
        recs = [Rec(str(k), float(k < 3), {"duration": "short"}) for k in range(6)]
        write_run(root / name, MODEL, {bench: recs}, frames={"max_frames": frames})
    doc = {
        "schema": 1,
        "kind": "evalkit-sweep",
        "axes": {"frames.max_frames": [4, 8]},
        "zip": False,
        "base": {"model": MODEL, "bench": [bench] if listed else []},
        "settings": settings,
        "pinned": {bench: {"frames.max_frames": 768}} if listed else {},
        "benchmarks": [bench] if listed else [],
    }
    (root / "sweep.json").write_text(json.dumps(doc))
    return root


def test_a_main_effect_names_the_two_values_it_compares_when_they_score_the_same(
    tmp_path: Path,
) -> None:
    # no value moves the score; the sentence read "frames.max_frames moves the score
    # most: 4 -> 4"
    root = _alike(tmp_path / "sw", "Video-MME", listed=True)
    (b,) = load_sweep(root, bootstrap=50).benchmarks
    assert [(e.axis, e.low, e.high, e.delta) for e in b.effects] == [
        ("frames.max_frames", 4, 8, 0.0)
    ]
    assert b.sentence.startswith(
        "Video-MME: no swept setting moves the score: frames.max_frames 4 -> 8 +0.0 points"
    ), b.sentence
    text = render_terminal(root, bootstrap=50)
    assert "main effect of frames.max_frames: 4 -> 8 +0.00 points" in text
    assert "4 -> 4" not in text


def test_a_data_file_sweep_that_named_no_benchmark_shows_the_runs_scores(tmp_path: Path) -> None:
    # sweep.json of a --data sweep listed no benchmark: its report had no score table
    root = _alike(tmp_path / "sw", "clips", listed=False)
    (b,) = load_sweep(root, bootstrap=50).benchmarks
    assert b.name == "clips" and [r.headline for r in b.rows] == [50.0, 50.0]
    assert "clips: score by setting" in render_terminal(root, bootstrap=50)
