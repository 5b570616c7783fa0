"""``evalkit cache build|verify|ls|prune`` (stand-in decoder, in-process builds)."""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from evalkit.cache import FrameCache, listing
from evalkit.cache import frame_cache as frame_cache_module
from evalkit.cli.main import main
from tests.test_cache_unit import decodes, fake_decode

SPEC_FLAGS = ["--nframes", "4", "--max-pixels", str(56 * 56), "--min-pixels", str(28 * 28)]


@pytest.fixture(autouse=True)
def _stand_in_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        frame_cache_module, "_load_videos", lambda ref, specs: [fake_decode(ref, s) for s in specs]
    )


@pytest.fixture
def videos(tmp_path: Path) -> list[Path]:
    out = []
    for i in range(3):
        p = tmp_path / f"v{i}.mp4"
        p.write_bytes(bytes([i]) + b"x" * 20)
        out.append(p)
    return out


def _json(capsys: pytest.CaptureFixture[str]) -> dict:
    return json.loads(capsys.readouterr().out.strip().splitlines()[-1])


def _build(root: Path, *args: str) -> int:
    return main(["cache", "build", "--root", str(root), "--workers", "0", "--no-progress",
                 *SPEC_FLAGS, *args])  # fmt: skip


def test_build_reports_and_exits_zero(tmp_path: Path, videos, capsys) -> None:
    assert _build(tmp_path / "c", *map(str, videos), "--json") == 0
    out = _json(capsys)
    assert (out["built"], out["hit"], out["failed"]) == (3, 0, {})
    assert _build(tmp_path / "c", *map(str, videos), "--json") == 0
    assert _json(capsys)["hit"] == 3


def test_build_reads_a_list_file_relative_to_itself(tmp_path: Path, videos, capsys) -> None:
    listing = tmp_path / "videos.txt"
    listing.write_text("# my videos\nv0.mp4\n\n" + str(videos[1]) + "\n")
    assert _build(tmp_path / "c", "--list", str(listing), "--json") == 0
    assert _json(capsys)["built"] == 2


def test_build_exits_non_zero_and_names_the_failures(tmp_path: Path, videos, capsys) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"BAD")
    assert _build(tmp_path / "c", str(videos[0]), str(bad), str(tmp_path / "gone.mp4")) == 1
    out = capsys.readouterr().out
    assert "1 built" in out and "2 failed" in out
    assert f"FAILED {bad}" in out and f"FAILED {tmp_path / 'gone.mp4'}" in out


def test_build_without_videos_is_a_usage_error(tmp_path: Path, capsys) -> None:
    assert _build(tmp_path / "c") == 2
    assert "no videos given" in capsys.readouterr().err


def test_a_bad_spec_flag_names_the_field(tmp_path: Path, videos, capsys) -> None:
    assert _build(tmp_path / "c", str(videos[0]), "--min-frames", "900") == 2
    assert "min_frames" in capsys.readouterr().err


def test_build_with_a_grid_writes_every_combination_from_one_decode(
    tmp_path: Path, videos, capsys
) -> None:
    root = tmp_path / "c"
    grid = ["--grid", "nframes=4,6", "--grid", f"frames.max_pixels={56 * 56},{84 * 84}"]
    assert _build(root, str(videos[0]), *grid, "--json") == 0
    assert _json(capsys)["built"] == 4
    assert decodes(videos[0]) == 4  # the stand-in decoder is asked once per spec
    assert _build(root, str(videos[0]), "--nframes", "6", "--max-pixels", str(84 * 84)) == 0
    assert "1 already cached" in capsys.readouterr().out


def test_a_grid_none_value_clears_the_field(tmp_path: Path, videos, capsys) -> None:
    root = tmp_path / "c"
    grid = ["--grid", "total_pixels=none,100000", "--total-pixels", "50000"]
    assert _build(root, str(videos[0]), *grid, "--json") == 0
    totals = sorted(str(g["spec"]["total_pixels"]) for g in listing(FrameCache(root))["per_spec"])
    assert totals == ["100000", "None"]


@pytest.mark.parametrize(
    ("item", "says"),
    [
        ("nframe=4,6", "'nframe' is not a FrameSpec field; did you mean 'nframes'"),
        ("nframes", "expected FIELD=V1,V2"),
        ("min_frames=2,900", "--grid min_frames=900: min_frames 900 > max_frames 768"),
        ("nframes=abc", "--grid nframes=abc: nframes: Input should be a valid integer"),
    ],
)
def test_a_bad_grid_is_a_usage_error_naming_it(
    tmp_path: Path, videos, capsys, item: str, says: str
) -> None:
    assert _build(tmp_path / "c", str(videos[0]), "--grid", item) == 2
    assert says in capsys.readouterr().err
    assert not (tmp_path / "c").exists() or not list(FrameCache(tmp_path / "c").entries())


def test_ls_counts_entries_per_spec_and_hits_for_given_videos(
    tmp_path: Path, videos, capsys
) -> None:
    root = tmp_path / "c"
    _build(root, *map(str, videos[:2]))
    _build(root, str(videos[0]), "--nframes", "6")
    capsys.readouterr()
    assert main(["cache", "ls", "--root", str(root), "--json"]) == 0
    out = _json(capsys)
    assert out["entries"] == 3
    assert sorted(g["entries"] for g in out["per_spec"]) == [1, 2]
    assert out["bytes"] == sum(p.stat().st_size for p in FrameCache(root).entries())
    args = ["cache", "ls", "--root", str(root), *SPEC_FLAGS, *map(str, videos), "--json"]
    assert main(args) == 0
    out = _json(capsys)
    assert out["videos"] == {"hit": 2, "miss": 1} and out["missing"] == [str(videos[2])]
    assert main(["cache", "ls", "--root", str(root)]) == 0
    assert "3 entries" in capsys.readouterr().out


def test_verify_finds_and_removes_damage(tmp_path: Path, videos, capsys) -> None:
    root = tmp_path / "c"
    _build(root, *map(str, videos))
    victim = next(iter(FrameCache(root).entries()))
    victim.write_bytes(victim.read_bytes()[:-1])
    capsys.readouterr()
    assert main(["cache", "verify", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "2 entries intact" in out and f"DAMAGED {victim}" in out
    assert main(["cache", "verify", "--root", str(root), "--remove"]) == 1
    assert not victim.exists()
    assert main(["cache", "verify", "--root", str(root)]) == 0


def test_prune_removes_entries_of_changed_and_vanished_sources(
    tmp_path: Path, videos, capsys
) -> None:
    root = tmp_path / "c"
    _build(root, *map(str, videos))
    videos[0].unlink()
    os.utime(videos[1], ns=(0, videos[1].stat().st_mtime_ns + 10**6))
    capsys.readouterr()
    assert main(["cache", "prune", "--root", str(root), "--dry-run", "--json"]) == 0
    assert sorted(_json(capsys)["removed"].values()) == ["source changed", "source vanished"]
    assert len(list(FrameCache(root).entries())) == 3
    assert main(["cache", "prune", "--root", str(root)]) == 0
    assert "removed 2 files" in capsys.readouterr().out
    remaining = list(FrameCache(root).entries())
    assert remaining == [FrameCache(root).path_for(videos[2], _spec())]
    assert main(["cache", "prune", "--root", str(root), "--all"]) == 0
    assert not list(FrameCache(root).entries())


def _spec():
    from evalkit.video.types import FrameSpec

    return FrameSpec(nframes=4, max_pixels=56 * 56, min_pixels=28 * 28)


def _leftover_temp(root: Path) -> Path:
    """What a writer killed half-way leaves: ``<key>.safetensors.tmp-<pid>-<hex>``."""
    entry = next(iter(FrameCache(root).entries()))
    tmp = entry.with_name(entry.name + ".tmp-4242-deadbeef")
    tmp.write_bytes(b"\0" * 1_500_000)
    return tmp


def test_verify_fails_on_an_unfinished_write_unless_told_to_ignore_it(
    tmp_path: Path, videos, capsys
) -> None:
    root = tmp_path / "c"
    _build(root, str(videos[0]))
    tmp = _leftover_temp(root)
    capsys.readouterr()
    assert main(["cache", "verify", "--root", str(root)]) == 1
    out = capsys.readouterr().out
    assert "0 damaged" in out and f"UNFINISHED {tmp}: 1.5 MB, abandoned" in out
    assert main(["cache", "verify", "--root", str(root), "--ignore-tmp"]) == 0
    assert main(["cache", "verify", "--root", str(root), "--json"]) == 1
    assert list(_json(capsys)["unfinished"]) == [str(tmp)]


def test_verify_says_when_an_unfinished_write_is_still_in_progress(
    tmp_path: Path, videos, capsys
) -> None:
    from filelock import FileLock

    from evalkit.cache.frame_cache import lock_path

    root = tmp_path / "c"
    _build(root, str(videos[0]))
    tmp = _leftover_temp(root)
    capsys.readouterr()
    entry = tmp.with_name(tmp.name.split(".tmp-")[0])
    with FileLock(lock_path(entry)):
        assert main(["cache", "verify", "--root", str(root)]) == 1
    assert f"UNFINISHED {tmp}: 1.5 MB, in progress" in capsys.readouterr().out


def test_build_and_ls_with_bench_use_its_pinned_spec(tmp_path: Path, videos, capsys) -> None:
    from evalkit.bench.registry import get_benchmark

    pinned = get_benchmark("Video-MME").frames
    root = tmp_path / "c"
    args = ["--root", str(root), "--bench", "Video-MME", str(videos[0])]
    assert main(["cache", "build", "--workers", "0", "--no-progress", *args]) == 0
    assert FrameCache(root).path_for(videos[0], pinned).exists()
    capsys.readouterr()
    assert main(["cache", "ls", *args, "--json"]) == 0
    out = _json(capsys)
    assert out["videos"] == {"hit": 1, "miss": 0} and out["spec"] == pinned.model_dump(mode="json")
    assert main(["cache", "ls", *args, "--max-pixels", "200704", "--json"]) == 0  # an override
    assert _json(capsys)["videos"] == {"hit": 0, "miss": 1}


def test_verify_remove_on_a_read_only_cache_says_so_in_one_line(
    tiny_disk: Path, videos, capsys
) -> None:
    import subprocess

    root = tiny_disk / "c"
    _build(root, str(videos[0]))
    victim = next(iter(FrameCache(root).entries()))
    victim.write_bytes(victim.read_bytes()[:-1])
    subprocess.run(["mount", "-o", "remount,ro", str(tiny_disk)], check=True)
    capsys.readouterr()
    assert main(["cache", "verify", "--root", str(root), "--remove"]) == 2
    err = capsys.readouterr().err
    assert len(err.strip().splitlines()) == 1 and "Traceback" not in err
    assert f"{victim} is damaged but cannot be removed" in err and "not writable" in err
    assert victim.exists()
