"""``evalkit bench ids`` lists the ids a user writes, with the rule and the row fields they
are made of; ``bench validate`` takes the folder ``run``/``score --data-root`` take, and
``--no-media`` checks a predictions-only set-up (annotations, no videos)."""

from __future__ import annotations

import hashlib
import json
import shutil
from pathlib import Path

import pytest

from evalkit.cli.main import main
from tests.fixtures.bench import official, official_reasoning_streaming


def _ids_json(capsys: pytest.CaptureFixture[str], *argv: str) -> dict[str, object]:
    assert main(["bench", "ids", *argv, "--json"]) == 0
    return json.loads(capsys.readouterr().out)


def test_tempcompass_ids_are_listed_with_the_fields_they_are_made_of(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    official.tempcompass(tmp_path / "TempCompass")
    doc = _ids_json(capsys, "TempCompass", "--data-root", str(tmp_path))
    first = doc["samples"][0]  # type: ignore[index]
    question = "How t1?\nA. slow\nB. fast\nC. still"
    digest = hashlib.sha1(repr(question).encode()).hexdigest()[:8]
    assert first == {
        "id": f"t1/speed/{digest}",
        "fields": {"video_id": "t1", "dim": "speed", "question": question},
    }


def test_the_id_rule_is_stated_in_words(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    official.tempcompass(tmp_path / "TempCompass")
    assert main(["bench", "ids", "TempCompass", "--data-root", str(tmp_path)]) == 0
    head = capsys.readouterr().out.splitlines()[0]
    assert "8 hex digits of sha1 of repr(question)" in head
    assert "predictions may give video_id, dim, question (as released) instead of 'id'" in head


def test_ovobench_forward_ids_show_the_release_id_and_probe(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    official_reasoning_streaming.ovobench(tmp_path / "OVO-Bench")
    doc = _ids_json(capsys, "OVO-Bench", "--data-root", str(tmp_path / "OVO-Bench"))
    by_id = {s["id"]: s["fields"] for s in doc["samples"]}  # type: ignore[attr-defined]
    assert (by_id["1"], by_id["7/2"]) == ({"id": 1}, {"id": 7, "probe": 2})


def test_validate_takes_the_folder_above_the_release_as_run_does(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    official.lvbench(tmp_path / "LVBench")
    assert main(["bench", "validate", "LVBench", "--data-root", str(tmp_path)]) == 0
    assert "no problems found" in capsys.readouterr().out


def test_validate_no_media_passes_a_copy_without_videos(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = official.lvbench(tmp_path / "LVBench")
    shutil.rmtree(root / "videos")
    assert main(["bench", "validate", "LVBench", "--root", str(root)]) == 1  # the control
    capsys.readouterr()
    assert main(["bench", "validate", "LVBench", "--root", str(root), "--no-media"]) == 0
    assert "no problems found" in capsys.readouterr().out


def _authors_release(root: Path) -> Path:
    """TempCompass as its authors release it: questions/<format>.json nested by video and
    dimension (llyx97/TempCompass), built from the lmms-lab fixture's rows."""
    import pandas as pd

    lmms = root / "lmms"
    official.tempcompass(lmms)
    authors = root / "authors"
    for fmt in ("multi-choice", "yes_no", "caption_matching", "captioning"):
        frame = pd.read_parquet(next((lmms / fmt).glob("*.parquet")))
        nested: dict[str, dict[str, list[dict[str, str]]]] = {}
        for r in frame.to_dict("records"):
            item = {"question": r["question"], "answer": r["answer"]}
            nested.setdefault(r["video_id"], {}).setdefault(r["dim"], []).append(item)
        (authors / "questions").mkdir(parents=True, exist_ok=True)
        (authors / "questions" / f"{fmt}.json").write_text(json.dumps(nested))
    return authors


@pytest.mark.parametrize("variant", ["", ":yes_no", ":caption_matching", ":captioning"])
def test_tempcompass_authors_release_loads_the_same_samples_as_lmms_lab(
    tmp_path: Path, variant: str
) -> None:
    from evalkit.bench.loader import load
    from evalkit.bench.registry import get_benchmark

    authors = _authors_release(tmp_path)
    spec = get_benchmark(f"TempCompass{variant}")
    theirs = load(spec, authors, check_media=False)
    lmms = load(spec, tmp_path / "lmms", check_media=False)
    assert [s.model_dump(exclude={"media"}) for s in theirs] == [
        s.model_dump(exclude={"media"}) for s in lmms
    ]
