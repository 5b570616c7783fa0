"""`evalkit repro`: within tolerance exits 0; a miss exits non-zero naming the benchmark."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from evalkit.cli.main import main
from evalkit.reports import load_run, verdicts
from evalkit.reports.reference import model_names
from evalkit.testing.runs import Rec, open_run, record, sample_of, write_run

QWEN25 = "/ckpt/Qwen2.5-VL-7B-Instruct"  # Video-MME reference (base spec): 65.1


def _vmme(n_right: int, n: int = 20) -> list[Rec]:
    return [
        Rec(str(i), float(i < n_right), {"duration": "short", "domain": "d", "task": "t"})
        for i in range(n)
    ]


def test_within_tolerance_exits_zero(tmp_path: Path, capsys: pytest.CaptureFixture) -> None:
    run = write_run(tmp_path / "r", QWEN25, {"Video-MME": _vmme(13)})  # 65.0: delta -0.1
    assert main(["repro", str(run), "--tolerance", "1.0"]) == 0
    out = capsys.readouterr().out
    assert "match" in out and "repro: OK" in out


def test_a_miss_exits_nonzero_naming_benchmark_delta_and_settings(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run = write_run(tmp_path / "r", QWEN25, {"Video-MME": _vmme(12)}, frames={"fps": 1.0})
    assert main(["repro", str(run), "--tolerance", "1.0"]) == 1
    err = capsys.readouterr().err
    assert "FAIL miss: Video-MME (Qwen2.5-VL-7B-Instruct)" in err
    assert "overall 60.00 vs reference 65.1: delta -5.10" in err
    assert "fps 1.0 (reference 2.0)" in err


def test_tolerance_decides_the_verdict(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", QWEN25, {"Video-MME": _vmme(12)})  # delta -5.1
    assert main(["repro", str(run), "--tolerance", "5.2"]) == 0
    assert main(["repro", "--run", str(run), "--tolerance", "5.0"]) == 1


def test_reference_of_the_run_variant_is_used(tmp_path: Path) -> None:
    # with_subtitles reference is 71.6; 14/20 = 70.0 is within 2 points of it, not of 65.1
    run = write_run(tmp_path / "r", QWEN25, {"Video-MME": _vmme(14)}, variant="with_subtitles")
    (v,) = verdicts(load_run(run), tolerance=2.0)
    assert v.status == "match" and v.checks[0].reference == 71.6


def test_a_model_without_any_reference_checks_nothing_and_fails(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    run = write_run(tmp_path / "r", "/ckpt/my-finetune-step500", {"Video-MME": _vmme(5)})
    out = tmp_path / "v.json"
    assert main(["repro", str(run), "--json", str(out)]) == 1
    captured = capsys.readouterr()
    assert "no reference for model my-finetune-step500" in captured.err
    assert "repro: nothing checked" in captured.out and "--model-name" in captured.out
    assert json.loads(out.read_text())["ok"] is False


def test_a_benchmark_without_reference_next_to_a_checked_one_fails_only_if_strict(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    holmes = [Rec(str(i), 1.0, {}) for i in range(4)]  # Video-Holmes: no Qwen2.5 reference
    run = write_run(tmp_path / "r", QWEN25, {"Video-MME": _vmme(13), "Video-Holmes": holmes})
    assert main(["repro", str(run)]) == 0
    assert "repro: OK (1 benchmark(s) checked, 1 without a reference)" in capsys.readouterr().out
    assert main(["repro", str(run), "--strict"]) == 1


def test_a_run_over_a_slice_is_named_with_its_counts(
    tmp_path: Path, capsys: pytest.CaptureFixture
) -> None:
    recs = _vmme(13)  # 65.0 on the 20 run, of a benchmark of 30 samples
    more = recs + [Rec(str(i), 0.0, {"duration": "short"}) for i in range(20, 30)]
    run, fp, (name,) = open_run(
        tmp_path / "r",
        QWEN25,
        ["Video-MME"],
        samples={"Video-MME": [sample_of(r, "Video-MME") for r in more]},
    )
    with run.store(name) as store:
        for r in recs:
            store.append(record(r, name, fp))
    assert main(["repro", str(run.path), "--json", str(tmp_path / "v.json")]) == 0
    out = capsys.readouterr().out
    assert "partial run: Video-MME ran 20 of its 30 samples" in out
    assert "1 on a slice of the benchmark" in out
    (v,) = json.loads((tmp_path / "v.json").read_text())["verdicts"]
    assert (v["samples_run"], v["samples_in_benchmark"], v["partial"]) == (20, 30, True)


def test_model_name_override_selects_the_reference(tmp_path: Path) -> None:
    run = write_run(tmp_path / "r", "/ckpt/step500", {"Video-MME": _vmme(13)})
    assert main(["repro", str(run), "--model-name", "qwen2.5-vl-7b-instruct"]) == 0


def test_model_name_comes_from_path_and_checkpoint_config(tmp_path: Path) -> None:
    ckpt = tmp_path / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"_name_or_path": "Qwen/Qwen2-VL-7B-Instruct"}))
    assert model_names(str(ckpt)) == ["ckpt", "Qwen2-VL-7B-Instruct"]
    assert model_names("Qwen/Qwen2.5-VL-7B-Instruct/") == ["Qwen2.5-VL-7B-Instruct"]


def test_unscored_benchmark_with_a_reference_fails(tmp_path: Path) -> None:
    recs = [Rec(str(i), None, {"duration": "short"}) for i in range(3)]
    run = write_run(tmp_path / "r", QWEN25, {"Video-MME": recs})
    (v,) = verdicts(load_run(run), tolerance=1.0)
    assert v.status == "no score"
    assert main(["repro", str(run)]) == 1


def test_every_benchmark_gets_its_own_verdict_and_json(tmp_path: Path) -> None:
    mv = [Rec(f"{t}{i}", float(i < 7), {"task": t}) for t in "AB" for i in range(10)]  # 70.0
    run = write_run(tmp_path / "r", QWEN25, {"Video-MME": _vmme(12), "MVBench": mv})
    out = tmp_path / "v.json"
    assert main(["repro", str(run), "--json", str(out)]) == 1
    doc = json.loads(out.read_text())
    status = {v["benchmark"]: v["status"] for v in doc["verdicts"]}
    assert status == {"Video-MME": "miss", "MVBench": "match"}  # MVBench ref 69.6
    assert doc["ok"] is False
