"""A release's archives (evalkit.hub.archives): which files form one, a zip listed from its
end, and the spec fields that only say how a release is fetched."""

from __future__ import annotations

import io

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.hub.archives import RangeReader, archives_of, glob_match, zip_members
from evalkit.manifest import hash_json
from evalkit.testing.hub_fixtures import zip_of


def test_split_parts_are_one_archive_in_part_order_and_whole_archives_stand_alone() -> None:
    paths = [
        "videos.tar.part.ab",
        "videos.tar.part.aa",
        "video/star.zip",
        "video/clevrer.zip",
        "README.md",
        "sub/x.tar.gz.00",
        "sub/x.tar.gz.01",
    ]
    found = archives_of(["videos.tar.part.*", "video/*.zip", "sub/*"], paths)
    assert [(a.name, a.parts, a.kind) for a in found] == [
        ("sub/x.tar.gz", ("sub/x.tar.gz.00", "sub/x.tar.gz.01"), "tar"),
        ("video/clevrer.zip", ("video/clevrer.zip",), "zip"),
        ("video/star.zip", ("video/star.zip",), "zip"),
        ("videos.tar", ("videos.tar.part.aa", "videos.tar.part.ab"), "tar"),
    ]
    assert [a.listable for a in found] == [False, True, True, False]
    assert found[1].folder == "media/video/clevrer.zip"


def test_a_file_named_as_an_archive_that_is_none_is_a_spec_error() -> None:
    with pytest.raises(ValueError, match=r"README\.md: named by data\.archives"):
        archives_of(["*"], ["README.md"])


def test_a_glob_matches_as_under_the_release_folder_star_never_crossing_a_slash() -> None:
    assert glob_match("videos_chunked_*.zip", "videos_chunked_01.zip")
    assert not glob_match("*.zip", "video/star.zip")
    assert glob_match("video/*.zip", "video/star.zip")


def test_a_zip_is_listed_from_its_end_in_one_ranged_read() -> None:
    blob = zip_of({f"data/v{i}.mp4": bytes(200_000) for i in range(3)})
    reads: list[tuple[int, int]] = []

    def fetch(start: int, end: int) -> bytes:
        reads.append((start, end))
        return blob[start : end + 1]

    members = zip_members(io.BufferedReader(RangeReader(fetch, len(blob))))
    assert members == [(f"data/v{i}.mp4", 200_000) for i in range(3)]
    assert len(reads) == 1 and reads[0][1] == len(blob) - 1  # the last block only
    assert reads[0][0] > 500_000


def test_how_a_release_is_fetched_is_not_part_of_the_spec_a_run_records() -> None:
    spec = get_benchmark("Video-MME")
    assert spec.data.archives  # fetched from chunked zips
    bare = spec.model_copy(update={"data": spec.data.model_copy(update={"archives": []})})
    assert "archives" not in spec.recorded()["data"]
    assert hash_json(spec.recorded()) == hash_json(bare.recorded())


def test_the_catalog_says_how_each_benchmark_is_had_from_its_spec(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from evalkit.bench.registry import registry
    from evalkit.cli.main import main
    from evalkit.hub.catalog import row

    rows = {s.name: row(s) for s in registry().specs()}
    assert len(rows) == 23  # the 22 benchmarks and SynthVideo
    assert rows["Video-MME"].how == "whole" and rows["Video-MME"].size == "101 GB"
    assert rows["LVBench"].how == "annotations only" and "YouTube" in rows["LVBench"].media
    assert rows["MINERVA"].how == rows["VideoReasonBench"].how == "by hand"
    assert rows["LongVideoBench"].source.endswith("(gated)")
    assert rows["SynthVideo"].how == "generated"
    assert main(["bench", "fetch", "--list"]) == 0
    out = capsys.readouterr().out
    assert "where each benchmark comes from (23)" in out and "annotations only" in out
