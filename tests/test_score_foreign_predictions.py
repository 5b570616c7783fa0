"""``evalkit score`` reads the prediction files of lmms-eval and VLMEvalKit as they write
them, and predictions keyed by a benchmark's natural fields, to the same records and
headline as evalkit's own ``{"id", "prediction"}`` file of the same replies.

The file layouts are the tools' own: lmms-eval's ``--log_samples`` line (lmms_eval/
evaluator.py: doc_id, doc, target, arguments, resps, filtered_resps, doc_hash, ...) and
VLMEvalKit's prediction sheet (vlmeval/inference_video.py: the dataset's TSV columns plus
``prediction``). The replies differ in form so that extraction matters.
"""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pandas as pd
import pytest

from evalkit.cli.main import main
from evalkit.reports import load_run
from evalkit.reports.load import read_records
from tests.fixtures.bench import official, official_reasoning_streaming

REPLIES = {  # Video-MME fixture targets: 001-1 A, 001-2 B, 002-1 C, 002-2 D, 003-1 A, 003-2 B
    "001-1": "A",
    "001-2": "The answer is C.",
    "002-1": "(C) three 002-1",
    "002-2": "D. four",
    "003-1": "Best option: B",
}


def _jsonl(path: Path, rows: list[dict[str, Any]]) -> Path:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture
def videomme_root(tmp_path: Path) -> Path:
    official.videomme(tmp_path / "data" / "Video-MME")
    shutil.rmtree(tmp_path / "data" / "Video-MME" / "data")  # annotations only
    return tmp_path / "data"


def _docs(root: Path) -> list[dict[str, Any]]:
    frame = pd.read_parquet(next((root / "Video-MME" / "videomme").glob("*.parquet")))
    rows = frame.to_dict("records")
    return [{**r, "options": list(r["options"])} for r in rows]


def _score(tmp_path: Path, bench: str, root: Path, preds: Path, run_id: str) -> int:
    argv = ["score", "--bench", bench, "--data-root", str(root), "--predictions", str(preds)]
    return main([*argv, "--runs-dir", str(tmp_path / "runs"), "--run-id", run_id])


def _verdicts(tmp_path: Path, run_id: str, bench: str) -> dict[str, Any]:
    recs = read_records(tmp_path / "runs" / run_id / f"{bench}.jsonl")
    return {r.id: (r.status, r.score.value if r.score else None) for r in recs}


def _overall(tmp_path: Path, run_id: str, bench: str) -> float:
    return load_run(tmp_path / "runs" / run_id, bootstrap=0).benchmarks[bench].overall


def _evalkit_file(tmp_path: Path) -> Path:
    rows = [{"id": sid, "prediction": text} for sid, text in REPLIES.items()]
    return _jsonl(tmp_path / "evalkit.jsonl", rows)


def _lmms_eval_line(doc_id: int, doc: dict[str, Any], reply: str) -> dict[str, Any]:
    """One ``--log_samples`` line as lmms-eval's evaluator writes it."""
    return {
        "doc_id": doc_id,
        "doc": doc,
        "target": doc["answer"],
        "arguments": [{"max_new_tokens": 16, "temperature": 0}],
        "resps": [[reply]],
        "filtered_resps": [reply],
        "doc_hash": "0" * 64,
        "videomme_perception_score": {"question_id": doc["question_id"], "pred_answer": reply},
    }


def test_lmms_eval_log_samples_file_scores_like_evalkits_own_predictions(
    tmp_path: Path, videomme_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    docs = [d for d in _docs(videomme_root) if d["question_id"] in REPLIES]
    lines = [_lmms_eval_line(i, d, REPLIES[d["question_id"]]) for i, d in enumerate(docs)]
    lmms = _jsonl(tmp_path / "samples_videomme.jsonl", lines)
    assert _score(tmp_path, "Video-MME", videomme_root, _evalkit_file(tmp_path), "own") == 0
    assert _score(tmp_path, "Video-MME", videomme_root, lmms, "lmms") == 0
    assert "5 row(s) read (lmms-eval format): 0 matched by id, 5 by the" in capsys.readouterr().out
    assert _verdicts(tmp_path, "lmms", "Video-MME") == _verdicts(tmp_path, "own", "Video-MME")
    assert _overall(tmp_path, "lmms", "Video-MME") == _overall(tmp_path, "own", "Video-MME")


def _vlmevalkit_sheet(root: Path) -> pd.DataFrame:
    """VLMEvalKit's Video-MME sheet: the columns its generate_tsv keeps (vlmeval/dataset/
    videomme.py: index = row position, video = videoID, no question_id) + prediction."""
    rows = []
    for i, d in enumerate(_docs(root)):
        if d["question_id"] not in REPLIES:
            continue
        rows.append(
            {
                "index": i,
                "video": d["videoID"],
                "video_path": f"./video/{d['videoID']}.mp4",
                "duration": d["duration"],
                "domain": d["domain"],
                "candidates": str(d["options"]),
                "sub_category": d["sub_category"],
                "task_type": d["task_type"],
                "subtitle_path": f"./subtitle/{d['videoID']}.srt",
                "question": d["question"],
                "answer": d["answer"],
                "prediction": REPLIES[d["question_id"]],
            }
        )
    return pd.DataFrame(rows)


@pytest.mark.parametrize("suffix", [".tsv", ".xlsx"])
def test_vlmevalkit_prediction_sheet_scores_like_evalkits_own_predictions(
    tmp_path: Path, videomme_root: Path, suffix: str
) -> None:
    sheet = tmp_path / f"Qwen2.5-VL-7B_Video-MME_64frame{suffix}"
    frame = _vlmevalkit_sheet(videomme_root)
    if suffix == ".tsv":
        frame.to_csv(sheet, sep="\t", index=False)
    else:
        pytest.importorskip("openpyxl")
        frame.to_excel(sheet, index=False)
    assert _score(tmp_path, "Video-MME", videomme_root, _evalkit_file(tmp_path), "own") == 0
    assert _score(tmp_path, "Video-MME", videomme_root, sheet, "vlm") == 0
    assert _verdicts(tmp_path, "vlm", "Video-MME") == _verdicts(tmp_path, "own", "Video-MME")
    assert _overall(tmp_path, "vlm", "Video-MME") == _overall(tmp_path, "own", "Video-MME")


def test_tempcompass_predictions_keyed_by_natural_fields_score_like_evalkit_ids(
    tmp_path: Path,
) -> None:
    root = tmp_path / "data"
    official.tempcompass(root / "TempCompass")
    frame = pd.read_parquet(next((root / "TempCompass" / "multi-choice").glob("*.parquet")))
    replies = ["B", "A. slow", "fast"]
    natural = [
        {"video_id": r["video_id"], "dim": r["dim"], "question": r["question"], "prediction": t}
        for r, t in zip(frame.to_dict("records"), replies, strict=True)
    ]
    assert _score(tmp_path, "TempCompass", root, _jsonl(tmp_path / "n.jsonl", natural), "nat") == 0
    ids = list(_verdicts(tmp_path, "nat", "TempCompass"))
    own = [{"id": sid, "prediction": t} for sid, t in zip(ids, replies, strict=True)]
    assert _score(tmp_path, "TempCompass", root, _jsonl(tmp_path / "o.jsonl", own), "own") == 0
    assert _verdicts(tmp_path, "nat", "TempCompass") == _verdicts(tmp_path, "own", "TempCompass")
    assert [v for _, v in _verdicts(tmp_path, "own", "TempCompass").values()] == [1.0, 0.0, 0.0]


def _ovo_root(tmp_path: Path) -> Path:
    official_reasoning_streaming.ovobench(tmp_path / "data" / "OVO-Bench")
    return tmp_path / "data"


def test_ovobench_forward_probes_are_matched_by_id_and_probe(tmp_path: Path) -> None:
    rows = [
        {"id": 7, "probe": 1, "prediction": "Yes"},  # SSR probe 1: "stir", type 1
        {"id": 7, "probe": 2, "prediction": "Yes"},  # probe 2: type 0
        {"id": 1, "prediction": "A"},  # EPM question 1, gt 0
    ]
    assert (
        _score(tmp_path, "OVO-Bench", _ovo_root(tmp_path), _jsonl(tmp_path / "p.jsonl", rows), "o")
        == 0
    )
    got = _verdicts(tmp_path, "o", "OVO-Bench")
    assert (got["7/1"], got["7/2"], got["1"]) == (("ok", 1.0), ("ok", 0.0), ("ok", 1.0))


def test_list_valued_reply_is_read_as_its_first_element(tmp_path: Path) -> None:
    rows = [{"id": "1", "prediction": ["A", "C"]}, {"id": "2", "prediction": ["B"]}]
    assert (
        _score(tmp_path, "OVO-Bench", _ovo_root(tmp_path), _jsonl(tmp_path / "p.jsonl", rows), "o")
        == 0
    )
    got = _verdicts(tmp_path, "o", "OVO-Bench")
    assert (got["1"], got["2"]) == (("ok", 1.0), ("ok", 1.0))


def test_duplicated_rows_keep_the_first_and_are_reported(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    rows = [{"id": "1", "prediction": "A"}, {"id": 1, "prediction": "B"}]
    assert (
        _score(tmp_path, "OVO-Bench", _ovo_root(tmp_path), _jsonl(tmp_path / "p.jsonl", rows), "o")
        == 0
    )
    out = capsys.readouterr().out
    assert "1 duplicated (ignored: a sample keeps its first row; first at" in out
    assert _verdicts(tmp_path, "o", "OVO-Bench")["1"] == ("ok", 1.0)


def test_prediction_for_a_row_the_loader_set_aside_says_so(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _ovo_root(tmp_path)
    path = root / "OVO-Bench" / "ovo_bench_new.json"
    release = json.loads(path.read_text())
    release[0]["gt"] = 9  # question 1's answer index now lies outside its options
    path.write_text(json.dumps(release))
    rows = [{"id": "1", "prediction": "A"}]
    assert _score(tmp_path, "OVO-Bench", root, _jsonl(tmp_path / "p.jsonl", rows), "o") == 2
    err = capsys.readouterr().err
    assert "1 of them are rows the loader set aside as invalid" in err
    assert "index 9 outside the 4 options" in err


def test_tempcompass_authors_prediction_file_scores_like_natural_field_rows(tmp_path: Path) -> None:
    # predictions/<model>/<format>.json of llyx97/TempCompass: the input of its eval_*.py
    root = tmp_path / "data"
    official.tempcompass(root / "TempCompass")
    frame = pd.read_parquet(next((root / "TempCompass" / "multi-choice").glob("*.parquet")))
    replies = ["B", "A. slow", "fast"]
    nested: dict[str, dict[str, list[dict[str, Any]]]] = {}
    rows = []
    for r, text in zip(frame.to_dict("records"), replies, strict=True):
        item = {"question": r["question"], "answer": r["answer"], "prediction": text}
        nested.setdefault(r["video_id"], {}).setdefault(r["dim"], []).append(item)
        rows.append({"video_id": r["video_id"], "dim": r["dim"], "question": r["question"]})
    authors = tmp_path / "multi-choice.json"
    authors.write_text(json.dumps(nested, indent=4))  # pretty-printed, as they publish it
    natural = [{**k, "prediction": t} for k, t in zip(rows, replies, strict=True)]
    assert _score(tmp_path, "TempCompass", root, authors, "authors") == 0
    assert _score(tmp_path, "TempCompass", root, _jsonl(tmp_path / "n.jsonl", natural), "nat") == 0
    assert _verdicts(tmp_path, "authors", "TempCompass") == _verdicts(
        tmp_path, "nat", "TempCompass"
    )


def _unified(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """EasyVideoR1's unified rows of Video-MME: the release's fields kept (question_id,
    videoID, question, ...), plus the unified ones (eval/data/valid_data/videomme.json)."""
    return [
        {
            **d,
            "problem_id": 1500 + i,
            "problem": d["question"],
            "data_type": "video",
            "problem_type": "multiple choice",
            "original_question_type": d["task_type"],
            "solution": f"<answer>{d['answer']}</answer>",
            "path": f"./videos/{d['videoID']}.mp4",
            "subtitle": "",
        }
        for i, d in enumerate(docs)
    ]


def _score_data(tmp_path: Path, data: Path, preds: Path, run_id: str) -> int:
    argv = ["score", "--data", str(data), "--predictions", str(preds)]
    return main([*argv, "--runs-dir", str(tmp_path / "runs"), "--run-id", run_id])


def _values(tmp_path: Path, run_id: str) -> list[tuple[str, Any]]:
    run = tmp_path / "runs" / run_id
    (store,) = run.glob("*.jsonl")
    recs = read_records(store)
    return sorted((r.status, r.score.value if r.score else None) for r in recs)


@pytest.mark.parametrize("tool", ["lmms-eval", "vlmevalkit"])
def test_a_foreign_file_matches_a_data_file_of_the_benchmark_by_its_own_fields(
    tmp_path: Path, videomme_root: Path, capsys: pytest.CaptureFixture[str], tool: str
) -> None:
    docs = [d for d in _docs(videomme_root) if d["question_id"] in REPLIES]
    data = tmp_path / "videomme.json"  # named as EasyVideoR1 names it: no data_source
    data.write_text(json.dumps(_unified(_docs(videomme_root))))
    if tool == "lmms-eval":
        lines = [_lmms_eval_line(i, d, REPLIES[d["question_id"]]) for i, d in enumerate(docs)]
        preds = _jsonl(tmp_path / "samples_videomme.jsonl", lines)
    else:
        preds = tmp_path / "Qwen2.5-VL-7B_Video-MME_64frame.tsv"
        _vlmevalkit_sheet(videomme_root).to_csv(preds, sep="\t", index=False)
    assert _score(tmp_path, "Video-MME", videomme_root, preds, "official") == 0
    assert _score_data(tmp_path, data, preds, "data") == 0
    assert "5 by the benchmark's own fields" in capsys.readouterr().out
    assert _values(tmp_path, "data") == _values(tmp_path, "official")
    b = load_run(tmp_path / "runs" / "data", bootstrap=0).benchmarks["Video-MME (videomme.json)"]
    assert b.overall == _overall(tmp_path, "official", "Video-MME")


def test_unmatched_rows_are_said_in_three_lines_count_two_examples_and_the_fix(
    tmp_path: Path, videomme_root: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    data = tmp_path / "videomme.json"
    data.write_text(json.dumps(_unified(_docs(videomme_root))))
    rows = [{"question_id": f"9{i:02d}-1", "prediction": "A"} for i in range(30)]
    assert _score_data(tmp_path, data, _jsonl(tmp_path / "p.jsonl", rows), "x") == 2
    err = capsys.readouterr().err.replace(str(tmp_path), "")
    assert len(err) <= 3 * 100, err  # three lines of a 100-column terminal at most
    assert "30 of 30 rows name no sample of Video-MME (videomme.json)" in err
    assert "question_id='900-1'" in err and "question_id='901-1'" in err and "28 more" in err
    assert "fix: " in err and "question_id" in err.split("matched by")[1]


REALDATA = Path(__file__).resolve().parents[2] / "shared" / "realdata" / "easyvideor1"


@pytest.mark.skipif(not REALDATA.is_dir(), reason="../shared/realdata is not in this checkout")
def test_an_lmms_eval_log_matches_easyvideor1s_real_videomme_rows(tmp_path: Path) -> None:
    rows = json.loads((REALDATA / "videomme.json").read_text())
    release = ("video_id", "duration", "domain", "sub_category", "url", "videoID")
    keep = (*release, "question_id", "task_type", "question", "options", "answer")
    lines = [
        _lmms_eval_line(i, {k: r[k] for k in keep}, f"The answer is {r['answer']}.")
        for i, r in enumerate(rows)
    ]
    preds = _jsonl(tmp_path / "samples_videomme.jsonl", lines)
    data = tmp_path / "videomme.json"
    shutil.copy(REALDATA / "videomme.json", data)
    assert _score_data(tmp_path, data, preds, "real") == 0
    b = load_run(tmp_path / "runs" / "real", bootstrap=0).benchmarks["Video-MME (videomme.json)"]
    assert (b.counts.total, b.counts.failed, b.overall) == (len(rows), 0, 100.0)
