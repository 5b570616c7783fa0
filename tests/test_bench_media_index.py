"""A fetched release's media are found by file name wherever its archives put them
(evalkit.bench.media_index), so a release that moves its videos a folder down still loads."""

from __future__ import annotations

import json
from pathlib import Path

from evalkit.bench.loader import load
from evalkit.bench.media_index import MediaIndex
from evalkit.bench.spec import BenchmarkSpec

SPEC = BenchmarkSpec.model_validate(
    {
        "name": "Indexed",
        "citation": "a test",
        "data": {"local_path": "."},
        "layout": "rows.jsonl, videos/<video>.mp4",
        "files": [{"path": "rows.jsonl"}],
        "mapping": {
            "id": {"template": "{id}"},
            "question": "q",
            "options": "options",
            "target": "answer",
        },
        "video": {"root": "videos", "pattern": "{video}", "extensions": [".mp4"]},
        "aggregation": {"name": "mean", "source": "a test"},
    }
)


def _release(root: Path, where: dict[str, str]) -> None:
    rows = [
        {"id": vid, "q": "?", "options": ["A. a", "B. b"], "answer": "A", "video": vid}
        for vid in where
    ]
    (root / "rows.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    for rel in where.values():
        (root / rel).parent.mkdir(parents=True, exist_ok=True)
        (root / rel).write_bytes(b"v")


def test_a_video_a_folder_down_in_an_archives_folder_is_found_through_the_index(
    tmp_path: Path,
) -> None:
    _release(tmp_path, {"a": "media/part1.zip/videos/a.mp4", "b": "videos/b.mp4"})
    assert load(SPEC, tmp_path, check_media=False)[0].media[0].path.endswith("videos/a.mp4")
    assert not Path(load(SPEC, tmp_path, check_media=False)[0].media[0].path).exists()
    MediaIndex.scan(tmp_path).write(tmp_path)
    samples = load(SPEC, tmp_path)  # every video found: no row invalid
    assert [Path(s.media[0].path).relative_to(tmp_path).as_posix() for s in samples] == [
        "media/part1.zip/videos/a.mp4",
        "videos/b.mp4",  # where the layout says: the index is not asked
    ]


def test_of_two_files_of_one_name_the_one_sharing_more_folders_is_chosen() -> None:
    index = MediaIndex.of(
        ["media/clevrer.zip/clevrer/x.mp4", "media/star.zip/star/Charades/x.mp4", "x.mp4"]
    )
    assert index.find(["video/star/Charades/x.mp4"]) == "media/star.zip/star/Charades/x.mp4"
    assert index.find(["video/clevrer/x.mp4"]) == "media/clevrer.zip/clevrer/x.mp4"
    assert index.find(["other/x.mp4"]) == "x.mp4"  # a tie: the shortest path
    assert index.find(["nope.mp4", "video/star/Charades/x.mp4"]).startswith("media/star")
    assert index.find(["nope.mp4"]) is None


def test_a_folder_laid_out_by_hand_has_no_index_and_its_missing_videos_stay_missing(
    tmp_path: Path,
) -> None:
    _release(tmp_path, {"a": "elsewhere/a.mp4"})
    assert MediaIndex.load(tmp_path) is None
    rows = load(SPEC, tmp_path, check_media=False)
    assert rows[0].media[0].path == str(tmp_path / "videos" / "a.mp4")
