"""``evalkit cache build --ray``: the same files, bytes and failure records as the local build."""

from __future__ import annotations

import hashlib
import json
from pathlib import Path

import numpy as np
import pytest

from evalkit.cache import FrameCache
from evalkit.cli.main import main
from evalkit.errors import ConfigError
from evalkit.sample import VideoRef
from evalkit.scale import cache_build
from evalkit.scale.cache_build import Batch, node_of, plan, read_node_map, resolve_nodes
from evalkit.video.types import FrameSpec

SPEC_FLAGS = ["--nframes", "4", "--max-pixels", str(56 * 56), "--min-pixels", str(28 * 28)]


def _videos(folder: Path) -> list[Path]:
    """Four short H.264 clips of different lengths, and one file that is not a video."""
    from evalkit.synthvideo import write_video

    folder.mkdir()
    rng = np.random.default_rng(0)
    out = []
    for i, n in enumerate((6, 9, 12, 15)):
        frames = rng.integers(0, 256, size=(n, 64, 80, 3), dtype=np.uint8)
        out.append(write_video(folder / f"v{i}.mp4", frames, fps=4.0))
    bad = folder / "corrupt.mp4"
    bad.write_bytes(b"\x00\x00\x00\x18ftypmp42" + bytes(range(256)) * 4)
    return [*out, bad]


def _tree(root: Path) -> dict[str, str]:
    """Every file under ``root``: relative name -> sha256 of its bytes."""
    return {
        str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest()
        for p in sorted(root.rglob("*"))
        if p.is_file()
    }


def _build(capsys: pytest.CaptureFixture[str], root: Path, *args: str) -> tuple[int, dict]:
    code = main(["cache", "build", "--root", str(root), "--no-progress", "--json",
                 *SPEC_FLAGS, *args])  # fmt: skip
    return code, json.loads(capsys.readouterr().out.strip().splitlines()[-1])


@pytest.mark.timeout(300)
def test_the_ray_build_leaves_the_local_builds_bytes_and_failures(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    import ray

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    videos = [str(v) for v in _videos(tmp_path / "videos")]
    code, local = _build(capsys, tmp_path / "local", "--workers", "1", *videos)
    assert code == 1 and local["built"] == 4 and list(local["failed"]) == [videos[-1]]

    code, remote = _build(capsys, tmp_path / "ray", "--ray", "--workers", "2", *videos)
    assert not ray.is_initialized()  # the local instance it started is shut down
    assert code == 1 and (remote["built"], remote["hit"]) == (4, 0)
    assert remote["failed"] == local["failed"]  # the corrupt one, with the same reason
    assert remote["bytes_built"] == local["bytes_built"]
    tree = _tree(tmp_path / "ray")
    assert len([n for n in tree if n.endswith(".safetensors")]) == 4
    assert tree == _tree(tmp_path / "local")

    # Again, with the videos' folder pinned to this node: everything is found cached.
    node_map = tmp_path / "nodes.txt"
    here = ray.util.get_node_ip_address()
    node_map.write_text(f"# node-local videos\n{tmp_path / 'videos'} {here}\n")
    code, again = _build(capsys, tmp_path / "ray", "--node-map", str(node_map), *videos)
    assert (again["built"], again["hit"], list(again["failed"])) == (0, 4, [videos[-1]])
    # A hit stamps each entry as verified (its first full read), as the local build's does;
    # a stamp holds the file's inode and ctime, so only its name can match.
    assert _build(capsys, tmp_path / "local", "--workers", "1", *videos)[1]["hit"] == 4
    after = _tree(tmp_path / "ray")
    assert after.keys() == _tree(tmp_path / "local").keys()
    assert {n: h for n, h in after.items() if not n.endswith(".verified")} == tree


def test_a_node_map_line_without_a_node_names_the_file_and_line(tmp_path: Path) -> None:
    bad = tmp_path / "nodes.txt"
    bad.write_text("/data/a 10.0.0.1\n/data/b\n")
    with pytest.raises(ConfigError, match=r"nodes.txt, line 2: expected `PATH_PREFIX NODE`"):
        read_node_map(bad)


NODES = [
    {"NodeID": "aa11", "NodeManagerAddress": "10.0.0.1", "Alive": True},
    {"NodeID": "bb22", "NodeManagerAddress": "10.0.0.2", "Alive": True},
    {"NodeID": "cc33", "NodeManagerAddress": "10.0.0.3", "Alive": False},
]


def test_nodes_are_given_by_ip_or_id_and_the_longest_prefix_wins() -> None:
    pairs = resolve_nodes([("/data", "10.0.0.1"), ("/data/long", "bb22")], NODES)
    assert node_of("/data/long/x.mp4", pairs) == "bb22"
    assert node_of("/data/short.mp4", pairs) == "aa11"
    assert node_of("/data2/x.mp4", pairs) is None  # a prefix is a folder, not a string


def test_a_dead_or_unknown_node_is_an_error_listing_the_alive_ones() -> None:
    with pytest.raises(ConfigError, match=r"'10.0.0.3'.*aa11 \(10.0.0.1\), bb22 \(10.0.0.2\)"):
        resolve_nodes([("/data", "10.0.0.3")], NODES)


def test_long_videos_get_a_task_each_and_short_ones_share_per_node(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(cache_build, "SHORT_BYTES", 100)
    monkeypatch.setattr(cache_build, "BATCH_VIDEOS", 2)
    sizes = {"long1": 500, "long2": 300, "s1": 50, "s2": 40, "s3": 30, "t1": 20}
    refs = []
    for name, size in sizes.items():
        (tmp_path / name).write_bytes(b"x" * size)
        refs.append(VideoRef(path=str(tmp_path / name)))
    batches = plan(refs, lambda r: "n2" if Path(r.path).name.startswith("t") else None)
    names = [([Path(r.path).name for r in b.refs], b.node) for b in batches]
    assert names == [
        (["long1"], None),
        (["long2"], None),
        (["s1", "s2"], None),
        (["s3"], None),
        (["t1"], "n2"),
    ]
    assert all(isinstance(b, Batch) for b in batches)


def test_the_build_help_explains_the_ray_flags(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exit_:
        main(["cache", "build", "--help"])
    assert exit_.value.code == 0
    text = " ".join(capsys.readouterr().out.split())
    assert "--node-map FILE" in text and "`PATH_PREFIX NODE`" in text and "--ray-address" in text


@pytest.mark.timeout(300)
def test_a_ray_build_with_a_grid_leaves_the_local_grid_builds_bytes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    videos = [str(v) for v in _videos(tmp_path / "videos")][-2:]  # one clip, the corrupt file
    grid = ["--grid", "nframes=4,6", "--grid", f"max_pixels={56 * 56},{84 * 84}"]
    code, local = _build(capsys, tmp_path / "local", "--workers", "0", *grid, *videos)
    assert code == 1 and local["built"] == 4 and list(local["failed"]) == [videos[-1]]
    code, remote = _build(capsys, tmp_path / "ray", "--ray", "--workers", "1", *grid, *videos)
    assert code == 1 and remote["built"] == 4 and remote["failed"] == local["failed"]
    assert _tree(tmp_path / "ray") == _tree(tmp_path / "local")


def test_without_ray_installed_a_ray_build_says_how_to_install_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import sys

    monkeypatch.setitem(sys.modules, "ray", None)  # `import ray` now fails
    video = tmp_path / "v.mp4"
    video.write_bytes(b"x")
    with pytest.raises(ConfigError, match=r"pip install 'evalkit\[ray\]'"):
        cache_build.build_on_ray(
            FrameCache(tmp_path / "c"), [VideoRef(path=str(video))], FrameSpec(), progress=False
        )
