"""``evalkit bench``: list, show, validate."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from evalkit.cli.main import main
from tests.fixtures.bench import official
from tests.test_bench_list_suite import SUITE, row_of


def test_list_shows_every_benchmark_with_its_settings(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "list"]) == 0
    out = capsys.readouterr().out
    for name in SUITE[:11]:  # the first eleven (the rest: test_bench_list_suite.py)
        assert row_of(out, name), name
    assert "macro_mean" in out and "768" in out


def test_show_json_dumps_the_resolved_variant(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "show", "videomathqa:mbin", "--json"]) == 0
    spec = json.loads(capsys.readouterr().out)
    assert spec["variant"] == "mbin" and spec["aggregation"]["name"] == "mbin"


def test_show_renders_the_spec_one_setting_per_line(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "show", "videomme_w_subtitle"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert re.match(r"benchmark +Video-MME:with_subtitles - ", lines[0])
    assert re.search(r"\nframes +2 fps, 4-768 frames; 100352-602112 px per frame", "\n".join(lines))
    assert any(re.match(r"references +Qwen2.5-VL-7B-Instruct 65.1", x) for x in lines)
    assert not any(x.lstrip().startswith(("{", '"')) for x in lines)  # no JSON


def test_list_fits_100_columns_and_has_no_samples_column_without_data(
    capsys: pytest.CaptureFixture[str],
) -> None:
    assert main(["bench", "list"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert max(len(x) for x in lines) <= 100
    header = next(x for x in lines if x.startswith("name "))
    assert "samples" not in header and "max_pixels" not in header


def test_list_wide_adds_pixels_and_aliases(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "list", "--wide"]) == 0
    out = capsys.readouterr().out
    assert "max_pixels" in out and "videomme_w_subtitle" in out


def test_show_names_the_headline_rule_and_its_source(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "show", "Video-MME"]) == 0
    out = capsys.readouterr().out
    assert re.search(r"headline rule +multiple_choice: videomme - ", out)
    assert "eval_your_results.py" in out  # the official file the rule reproduces
    assert main(["bench", "show", "MINERVA"]) == 0  # no official rule published
    assert re.search(r"headline rule +multiple_choice: evalkit - evalkit", capsys.readouterr().out)


def test_validate_exits_1_and_lists_each_problem(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = official.lvbench(tmp_path)
    (root / "videos" / "vidL2.mp4").unlink()
    assert main(["bench", "validate", "lvbench", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "2 samples loaded" in out and "2 problem(s)" in out
    assert "4 rows: 2 valid, 2 invalid, 0 loaded with a warning" in out
    assert out.count("video not found") == 2 and "expected layout" in out


def test_validate_a_good_copy_exits_0(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    root = official.lvbench(tmp_path)
    assert main(["bench", "validate", "LVBench", "--root", str(root), "--decode"]) == 0
    assert "no problems found" in capsys.readouterr().out


def test_an_unknown_benchmark_is_a_clean_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["bench", "show", "lvbnch"]) == 2
    assert "did you mean 'LVBench'" in capsys.readouterr().err


def test_list_counts_samples_of_local_copies(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("COLUMNS", "160")  # wide enough for the boxed table with samples
    official.lvbench(tmp_path / "LVBench")
    assert main(["bench", "list", "--data-root", str(tmp_path)]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert "┃ samples" in next(x for x in lines if "┃ name" in x)
    assert "│ 4 " in next(x for x in lines if "│ LVBench " in x)
    assert "│ - " in next(x for x in lines if "│ MVBench " in x)  # no copy there


def _unified(tmp_path: Path) -> Path:
    rows = [
        {
            "data_type": "video",
            "data_source": "LiveSports-3K-QA",
            "problem_type": "multiple choice",
            "path": "a.mp4",
            "problem": f"Who {i}?",
            "problem_id": "vid_e1_q1" if i < 2 else f"vid_e1_q{i}",
            "options": ["A: x", "B: y"] if i != 2 else ["A: x", "B: y", "B: z"],
            "solution": "<answer>B</answer>",
        }
        for i in range(4)
    ]
    path = tmp_path / "livesports3k_qa.json"
    path.write_text(json.dumps(rows))
    return path


def test_validate_data_json_counts_rows_and_gives_each_reason(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = _unified(tmp_path)
    assert main(["bench", "validate", "--data", str(path), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["rows"], out["valid"], out["invalid"], out["warnings"]) == (4, 3, 1, 1)
    bad, dup = sorted(out["reasons"], key=lambda r: r["level"])
    assert bad == {
        "file": str(path),
        "row": "item 2",
        "field": "options",
        "reason": "option letters ['A', 'B', 'B'] repeat B",
        "level": "error",
    }
    assert dup["row"] == "item 1" and "loaded as 'LiveSports-3K-QA/vid_e1_q1#2'" in dup["reason"]
    (bench,) = out["benchmarks"]
    assert (bench["name"], bench["official"], bench["valid"]) == (
        "LiveSports-3K-QA (livesports3k_qa.json)",
        True,
        3,
    )


def test_validate_data_prints_counts_for_people(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["bench", "validate", "--data", str(_unified(tmp_path))]) == 1
    out = capsys.readouterr().out
    assert "4 rows: 3 valid, 1 invalid, 1 loaded with a warning" in out
    assert "item 2, field 'options': option letters" in out


def test_validate_name_json_counts_invalid_rows(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = official.lvbench(tmp_path)
    (root / "videos" / "vidL2.mp4").unlink()
    assert main(["bench", "validate", "lvbench", "--root", str(root), "--json"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["rows"], out["valid"], out["invalid"]) == (4, 2, 2)
    assert {r["field"] for r in out["reasons"]} == {"key"}


def _peak_mb(args: list[str], warm: list[str]) -> float:
    """Peak traced memory (MB) of ``evalkit bench validate ARGS`` (exit 1), after a run of
    ``warm`` has loaded the registry (so only the rows' cost is measured). In a process of
    its own: tracemalloc counts every thread's allocations, and threads an earlier test
    of this worker left running (a pool's, a sandbox starter's) would count too."""
    import subprocess
    import sys

    script = (
        "import contextlib, io, sys, tracemalloc\n"
        "from evalkit.cli.main import main\n"
        "with contextlib.redirect_stdout(io.StringIO()):\n"
        f"    main(['bench', 'validate', *{warm!r}])\n"
        "tracemalloc.start()\n"
        f"code = main(['bench', 'validate', *{args!r}])\n"
        "peak = tracemalloc.get_traced_memory()[1] / 2**20\n"
        "tracemalloc.stop()\n"
        "print(f'PEAK {code} {peak}', file=sys.stderr)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True)
    print(done.stdout, end="")  # what the measured run printed, for the test to read
    code, peak = done.stderr.strip().splitlines()[-1].split()[1:]
    assert code == "1", done.stderr[-2000:]
    return float(peak)


TINY_BAD_ROWS = 200_000


def test_validate_data_of_many_bad_rows_keeps_50_and_counts_the_rest_in_bounded_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path, warm = tmp_path / "tiny.jsonl", tmp_path / "warm.jsonl"
    path.write_text("1\n" * TINY_BAD_ROWS)  # every row is one character, none an object
    warm.write_text("1\n")
    # holding every Problem took ~70 MB here; counting them and keeping 50 takes < 1 MB
    assert _peak_mb(["--data", str(path)], ["--data", str(warm)]) < 10
    out = capsys.readouterr().out.splitlines()
    assert out[-52:] == [
        f"{TINY_BAD_ROWS} problem(s):",
        *(f"  {path}, line {i}: a row must be a JSON object" for i in range(1, 51)),
        f"  ... and {TINY_BAD_ROWS - 50} more",
    ]


def test_validate_name_of_many_bad_rows_runs_in_bounded_memory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = official.lvbench(tmp_path)
    warm = ["lvbench", "--root", str(root), "--no-media"]
    with (root / "video_info.meta.jsonl").open("a") as f:
        f.write("1\n" * TINY_BAD_ROWS)
    assert _peak_mb(["lvbench", "--root", str(root)], warm) < 10
    assert f"... and {TINY_BAD_ROWS - 50} more" in capsys.readouterr().out


def test_validate_data_json_lists_the_kept_reasons_and_says_how_many_were_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "tiny.jsonl"
    path.write_text("1\n" * 1000)
    assert main(["bench", "validate", "--data", str(path), "--json", "--max-problems", "2"]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["rows"], out["invalid"], out["reasons_left_out"]) == (1000, 1000, 998)
    assert [r["row"] for r in out["reasons"]] == ["line 1", "line 2"]


def test_validate_name_json_says_how_many_reasons_were_left_out(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = official.lvbench(tmp_path)
    with (root / "video_info.meta.jsonl").open("a") as f:
        f.write("1\n" * 10)
    args = ["lvbench", "--root", str(root), "--json", "--max-problems", "4"]
    assert main(["bench", "validate", *args]) == 1
    out = json.loads(capsys.readouterr().out)
    assert (out["rows"], out["invalid"], len(out["reasons"]), out["reasons_left_out"]) == (
        14,
        10,
        4,
        6,
    )


def test_validate_data_json_counts_every_missing_video_and_lists_the_first(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {"problem_type": "multiple choice", "options": ["A. x", "B. y"], "solution": "A"}
    rows = [{**row, "problem_id": i, "path": f"v{i}.mp4"} for i in range(30)]
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(rows))
    assert main(["bench", "validate", "--data", str(path), "--json", "--max-problems", "2"]) == 1
    (media,) = json.loads(capsys.readouterr().out)["missing_media"]
    assert (media["samples"], media["of"], media["paths_left_out"]) == (30, 30, 28)
    assert media["paths"] == [str(tmp_path / "v0.mp4"), str(tmp_path / "v1.mp4")]


def test_validate_data_of_many_valid_rows_holds_no_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    row = {"problem_type": "multiple choice", "options": ["A. x", "B. y"], "solution": "A"}
    path, warm = tmp_path / "mine.jsonl", tmp_path / "warm.jsonl"
    rows = "".join(json.dumps({**row, "problem_id": i}) + "\n" for i in range(20_000))
    path.write_text(rows + "1\n")  # and one bad row, so that it exits 1
    warm.write_text("1\n")
    # holding every Sample took ~35 MB here; counting them, only their ids stay (~3 MB)
    assert _peak_mb(["--data", str(path)], ["--data", str(warm)]) < 10
    assert "20001 rows: 20000 valid, 1 invalid" in capsys.readouterr().out


def _lvbench_of_many_questions(tmp_path: Path, n: int) -> Path:
    """The LVBench copy with ``n`` more lines of four questions each on vidL1, and one bad
    line (so that validate exits 1)."""
    root = official.lvbench(tmp_path)
    q = {"question": "Who?\n(A) cat\n(B) dog\n(C) owl\n(D) fox", "answer": "A"}
    q |= {"question_type": ["reasoning"], "time_reference": ""}
    with (root / "video_info.meta.jsonl").open("a") as f:
        for i in range(n):
            qa = [{**q, "uid": f"x{i}_{j}"} for j in range(4)]
            f.write(json.dumps({"key": "vidL1", "type": "cartoon", "qa": qa}) + "\n")
        f.write("1\n")
    return root


def test_validate_name_of_many_valid_rows_holds_no_sample(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _lvbench_of_many_questions(tmp_path, 5000)
    warm = ["lvbench", "--root", str(root), "--no-media"]
    # holding every Sample took ~58 MB here; counting them, only their ids stay (~5 MB)
    assert _peak_mb(["lvbench", "--root", str(root)], warm) < 15
    assert "20005 rows: 20004 valid, 1 invalid" in capsys.readouterr().out


def test_validate_name_decode_opens_each_video_as_its_rows_are_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _lvbench_of_many_questions(tmp_path, 3)
    (root / "videos" / "vidL1.mp4").write_bytes(b"not a video at all")
    assert main(["bench", "validate", "lvbench", "--root", str(root), "--decode"]) == 1
    out = capsys.readouterr().out
    assert "17 rows: 16 valid, 2 invalid" in out and out.count("cannot decode") == 1


def test_validate_data_counts_the_left_out_problems_of_a_benchmark_with_no_valid_row(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    good = {"problem_type": "multiple choice", "options": ["A. x", "B. y"], "solution": "A"}
    bad = {"data_source": "vsibench", "problem_type": "multiple choice"}  # no solution
    rows = [{**good, "problem_id": 0}, *({**bad, "problem_id": i} for i in range(1, 6))]
    path = tmp_path / "mine.json"
    path.write_text(json.dumps(rows))
    assert main(["bench", "validate", "--data", str(path), "--json", "--max-problems", "2"]) == 1
    out = json.loads(capsys.readouterr().out)
    (bench,) = out["benchmarks"]  # VSI-Bench's rows all failed: its problems go to the rest
    assert (bench["valid"], bench["invalid"], out["invalid"], out["reasons_left_out"]) == (
        1,
        5,
        5,
        3,
    )
