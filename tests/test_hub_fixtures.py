"""The stand-in's fixture releases are laid out as the real ones (evalkit.testing.hub_fixtures)."""

from __future__ import annotations

import io
import json
import tarfile
import zipfile

import pyarrow.parquet as pq
import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.testing import hub_fixtures as fx
from tests._realdata import real_file


def test_videomme_rows_have_the_releases_columns_and_its_videos_sit_in_chunked_zips() -> None:
    rel = fx.videomme(n_videos=4, per_archive=2)
    table = pq.read_table(io.BytesIO(rel.files["videomme/test-00000-of-00001.parquet"]))
    assert tuple(table.column_names) == fx.VIDEOMME_FIELDS
    spec = get_benchmark("Video-MME")
    for field in [spec.mapping.question, spec.mapping.options, spec.mapping.target]:
        assert field in table.column_names
    chunks = sorted(p for p in rel.files if p.startswith("videos_chunked_"))
    assert chunks == ["videos_chunked_01.zip", "videos_chunked_02.zip"]
    names = zipfile.ZipFile(io.BytesIO(rel.files[chunks[1]])).namelist()
    assert names == ["data/vid002x.mp4", "data/vid003x.mp4"]
    assert rel.holds["vid003x"] == chunks[1]


@pytest.mark.realdata
def test_videomme_columns_are_the_real_releases_field_names() -> None:
    rows = json.loads(real_file("videomme.json").read_text())
    assert set(fx.VIDEOMME_FIELDS) <= set(rows[0])  # the release's own fields, kept there


def test_longvideobench_is_gated_and_its_tar_is_split_in_parts_that_join_back() -> None:
    rel = fx.longvideobench(n_videos=3, parts=2)
    assert rel.gated
    parts = sorted(p for p in rel.files if ".tar.part." in p)
    assert parts == ["videos.tar.part.aa", "videos.tar.part.ab"]
    whole = b"".join(rel.files[p] for p in parts)
    with tarfile.open(fileobj=io.BytesIO(whole)) as tar:
        assert tar.getnames() == ["videos/lvb00.mp4", "videos/lvb01.mp4", "videos/lvb02.mp4"]
    rows = json.loads(rel.files["lvb_val.json"])
    spec = get_benchmark("LongVideoBench")
    assert {spec.mapping.question, spec.mapping.options, spec.mapping.target} <= set(rows[0])


def test_mlvu_keeps_its_videos_loose_in_nested_task_folders() -> None:
    rel = fx.mlvu(per_task=1)
    spec = get_benchmark("MLVU")
    assert {fs.path for fs in spec.files} <= set(rel.files)
    assert "MLVU/video/3_ego/ego_0.mp4" in rel.files


@pytest.mark.parametrize("kind", sorted(fx.HOSTILE))
def test_each_hostile_archive_holds_the_member_it_is_named_for(kind: str) -> None:
    archive, _ = fx.HOSTILE[kind]
    blob = fx.hostile(kind).files[archive]
    if archive.endswith(".zip"):
        infos = {i.filename: i for i in zipfile.ZipFile(io.BytesIO(blob)).infolist()}
        found = {
            "dotdot": "../../escape.mp4" in infos,
            "absolute": "/tmp/abs.mp4" in infos,
            "symlink": (infos.get("videos/link.mp4") or zipfile.ZipInfo()).external_attr >> 28
            == 0o12,
            "oversized": infos["videos/bomb.mp4"].file_size == 4096 if kind == "oversized" else 0,
        }[kind]
    else:
        with tarfile.open(fileobj=io.BytesIO(blob)) as tar:
            members = {m.name: m for m in tar.getmembers()}
        found = {
            "tar_symlink": members.get("videos/out.mp4", tarfile.TarInfo()).issym(),
            "hardlink": members.get("videos/hard.mp4", tarfile.TarInfo()).islnk(),
            "device": members.get("videos/null.mp4", tarfile.TarInfo()).ischr(),
        }[kind]
    assert found
    assert f"evil/{kind}" in fx.hostile_spec(kind)
