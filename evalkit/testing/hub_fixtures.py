"""Fixture releases for the hub stand-in (``evalkit.testing.hub_server``), built by code.

Each builder lays a tiny release out as the real one is laid out on the Hub, with the
real annotation files' field names (those of the spec's ``layout`` and, where the shared
reference data has the release's own rows, of those rows: ``tests/test_hub_fixtures.py``
holds them against each other) and tiny generated videos packed as the release packs
them: Video-MME's ``videos_chunked_*.zip``, LongVideoBench's split tar parts
(``videos.tar.part.aa`` ...) behind a gate, MLVU's loose videos in nested folders. The
hostile ones hold archives that try to write outside the data folder. A test serves them
with :func:`serve`; nothing here is ever downloaded.
"""

from __future__ import annotations

import io
import json
import tarfile
import tempfile
import zipfile
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from evalkit.testing.hub_server import HubRepo, HubStandIn

VIDEO_FPS, VIDEO_FRAMES, VIDEO_W, VIDEO_H = 4.0, 8, 112, 84
"""Every fixture video: 2 s at 4 fps, 112x84 (a multiple of 28: no resize for Qwen-VL)."""


@dataclass
class FixtureRelease:
    """A release as the stand-in serves it."""

    repo_id: str
    files: dict[str, bytes]
    commit: str | None = None
    """Its commit hash (the spec's pinned revision, where the spec pins one)."""
    gated: bool = False
    holds: dict[str, str] = field(default_factory=dict)
    """Video id -> the repo file that holds it (an archive, or the video itself)."""


def tiny_video(index: int) -> bytes:
    """A distinct 2 s mp4 (its frames carry their index, offset by ``index``)."""
    from evalkit.testing.index_video import write_index_video

    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "v.mp4"
        write_index_video(path, VIDEO_FRAMES + index, VIDEO_FPS, VIDEO_W, VIDEO_H)
        return path.read_bytes()


def zip_of(members: dict[str, bytes]) -> bytes:
    """A zip holding ``members`` (path -> bytes), stored uncompressed as video zips are."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        for name, data in members.items():
            z.writestr(name, data)
    return buf.getvalue()


def tar_of(members: dict[str, bytes]) -> bytes:
    """A tar holding ``members`` (path -> bytes)."""
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        for name, data in members.items():
            info = tarfile.TarInfo(name)
            info.size = len(data)
            info.mode = 0o644
            t.addfile(info, io.BytesIO(data))
    return buf.getvalue()


def split_parts(blob: bytes, stem: str, parts: int) -> dict[str, bytes]:
    """``blob`` cut into ``parts`` consecutive pieces named ``stem.aa``, ``stem.ab``, ...
    (``split -b``: ``cat stem.* > whole`` puts it back)."""
    size = -(-len(blob) // parts)
    letters = "abcdefghijklmnopqrstuvwxyz"
    return {
        f"{stem}.{letters[i // 26]}{letters[i % 26]}": blob[i * size : (i + 1) * size]
        for i in range(parts)
    }


def _parquet(rows: list[dict[str, object]]) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buf = io.BytesIO()
    pq.write_table(pa.Table.from_pylist(rows), buf)
    return buf.getvalue()


VIDEOMME_FIELDS = (
    "video_id",
    "duration",
    "domain",
    "sub_category",
    "url",
    "videoID",
    "question_id",
    "task_type",
    "question",
    "options",
    "answer",
)
"""The columns of lmms-lab/Video-MME's videomme/test-*.parquet."""


def videomme(
    n_videos: int = 4, per_archive: int = 2, questions: int = 2, commit: str | None = None
) -> FixtureRelease:
    """lmms-lab/Video-MME: ``videomme/test-00000-of-00001.parquet``, the videos as
    ``data/<videoID>.mp4`` in ``videos_chunked_NN.zip`` (``per_archive`` each), subtitles as
    ``subtitle/<videoID>.srt`` in ``subtitle.zip``."""
    rows: list[dict[str, object]] = []
    chunks: list[dict[str, bytes]] = []
    subs: dict[str, bytes] = {}
    holds: dict[str, str] = {}
    for v in range(n_videos):
        vid = f"vid{v:03d}x"
        if v % per_archive == 0:
            chunks.append({})
        chunks[-1][f"data/{vid}.mp4"] = tiny_video(v)
        holds[vid] = f"videos_chunked_{len(chunks):02d}.zip"
        subs[f"subtitle/{vid}.srt"] = f"1\n00:00:00,000 --> 00:00:01,000\nline of {vid}\n".encode()
        for q in range(questions):
            rows.append(
                {
                    "video_id": str(v + 1),
                    "duration": ["short", "medium", "long"][v % 3],
                    "domain": "Life Record",
                    "sub_category": "Handicraft",
                    "url": f"https://www.youtube.com/watch?v={vid}",
                    "videoID": vid,
                    "question_id": f"{v + 1:03d}-{q + 1}",
                    "task_type": "Counting Problem",
                    "question": f"How many marks does clip {v} show ({q})?",
                    "options": ["A. One.", "B. Two.", "C. Three.", "D. Four."],
                    "answer": "ABCD"[(v + q) % 4],
                }
            )
    files = {"videomme/test-00000-of-00001.parquet": _parquet(rows), "README.md": b"Video-MME\n"}
    for i, members in enumerate(chunks, 1):
        files[f"videos_chunked_{i:02d}.zip"] = zip_of(members)
    files["subtitle.zip"] = zip_of(subs)
    return FixtureRelease("lmms-lab/Video-MME", files, commit=commit, holds=holds)


def longvideobench(n_videos: int = 3, parts: int = 2) -> FixtureRelease:
    """longvideobench/LongVideoBench (gated): ``lvb_val.json`` and the videos in one tar
    split into ``videos.tar.part.aa``, ``.ab``, ... (members ``videos/<video_path>``)."""
    rows = []
    members = {}
    for v in range(n_videos):
        name = f"lvb{v:02d}.mp4"
        members[f"videos/{name}"] = tiny_video(v)
        rows.append(
            {
                "id": f"lvb-{v}",
                "video_id": f"lvb{v:02d}",
                "video_path": name,
                "subtitle_path": f"lvb{v:02d}_en.json",
                "duration": 2.0,
                "duration_group": 15,
                "question": f"What happens in clip {v}?",
                "candidates": ["a ball rolls", "a door opens", "nothing", "a dog runs"],
                "correct_choice": v % 4,
                "question_category": "T3O",
                "topic_category": "NP-News-Programs",
                "level": "L1-Perception",
                "starting_timestamp_for_subtitles": 0.0,
            }
        )
    tar = tar_of(members)
    files = {"lvb_val.json": json.dumps(rows).encode(), "README.md": b"LongVideoBench\n"}
    files.update(split_parts(tar, "videos.tar.part", parts))
    holds = {f"lvb{v:02d}": "videos.tar.part.*" for v in range(n_videos)}
    return FixtureRelease("longvideobench/LongVideoBench", files, gated=True, holds=holds)


def lvbench(n_videos: int = 2, questions: int = 2) -> FixtureRelease:
    """zai-org/LVBench: ``video_info.meta.jsonl`` only (its videos come from YouTube)."""
    lines = []
    for v in range(n_videos):
        qa = [
            {
                "uid": f"{v}{q:03d}",
                "question": f"What is shown ({q})?\n(A) a cat\n(B) a car\n(C) a cup\n(D) a dog",
                "answer": "ABCD"[(v + q) % 4],
                "question_type": ["key information retrieval"],
                "time_reference": "00:00-00:01",
            }
            for q in range(questions)
        ]
        lines.append({"key": f"yt{v:04d}", "type": "documentary", "qa": qa})
    meta = b"".join(json.dumps(line).encode() + b"\n" for line in lines)
    return FixtureRelease("zai-org/LVBench", {"video_info.meta.jsonl": meta, "README.md": b"x"})


MLVU_TASKS = (
    "1_plotQA",
    "2_needle",
    "3_ego",
    "4_count",
    "5_order",
    "6_anomaly_reco",
    "7_topic_reasoning",
)
"""MLVU dev's task folders (``MLVU/json/<task>.json``, ``MLVU/video/<task>/``)."""


def mlvu(per_task: int = 1) -> FixtureRelease:
    """MLVU/MVLU: one ``MLVU/json/<n>_<task>.json`` per task and the videos as loose files
    in nested folders ``MLVU/video/<n>_<task>/<video>``."""
    files: dict[str, bytes] = {"README.md": b"MLVU\n"}
    holds = {}
    index = 0
    for task in MLVU_TASKS:
        rows = []
        for i in range(per_task):
            video = f"{task.split('_', 1)[1]}_{i}.mp4"
            files[f"MLVU/video/{task}/{video}"] = tiny_video(index)
            holds[f"{task}/{video}"] = f"MLVU/video/{task}/{video}"
            index += 1
            rows.append(
                {
                    "video": video,
                    "duration": 2.0,
                    "question": f"What does clip {index} show?",
                    "candidates": ["a cat", "a car", "a tree", "a cup"],
                    "answer": "a car",
                    "question_type": task.split("_", 1)[1],
                }
            )
        files[f"MLVU/json/{task}.json"] = json.dumps(rows).encode()
    return FixtureRelease("MLVU/MVLU", files, holds=holds)


# --- hostile releases ----------------------------------------------------------------


def _zip_with(add: Callable[[zipfile.ZipFile], None]) -> bytes:
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_STORED) as z:
        z.writestr("videos/ok0.mp4", b"not really a video")
        add(z)
    return buf.getvalue()


def _zip_symlink(z: zipfile.ZipFile) -> None:
    info = zipfile.ZipInfo("videos/link.mp4")
    info.create_system = 3  # unix: the mode in external_attr is read
    info.external_attr = (0o120777 << 16) | 0x10
    z.writestr(info, "../../../../outside.mp4")


def _tar_with(add: Callable[[tarfile.TarFile], None]) -> bytes:
    buf = io.BytesIO()
    with tarfile.open(fileobj=buf, mode="w") as t:
        ok = tarfile.TarInfo("videos/ok0.mp4")
        ok.size = 18
        t.addfile(ok, io.BytesIO(b"not really a video"))
        add(t)
    return buf.getvalue()


def _tar_member(kind: bytes, name: str, link: str = "") -> Callable[[tarfile.TarFile], None]:
    def add(t: tarfile.TarFile) -> None:
        info = tarfile.TarInfo(name)
        info.type = kind
        info.linkname = link
        if kind in (tarfile.CHRTYPE, tarfile.BLKTYPE):
            info.devmajor, info.devminor = 1, 3
        t.addfile(info)

    return add


def _oversized_zip() -> bytes:
    """A deflated member that inflates to more than the size its listing declares."""
    buf = io.BytesIO()
    with zipfile.ZipFile(buf, "w", zipfile.ZIP_DEFLATED) as z:
        z.writestr("videos/ok0.mp4", b"not really a video")
        z.writestr("videos/bomb.mp4", b"\0" * 200_000)
    blob = bytearray(buf.getvalue())
    declared = (4096).to_bytes(4, "little")
    name = b"videos/bomb.mp4"
    # the size fields of the local header (offset 22) and the central directory (24)
    for sig, offset in ((b"PK\x03\x04", 22), (b"PK\x01\x02", 24)):
        at = 0
        while (at := blob.find(sig, at)) != -1:
            header_name_at = at + (30 if sig == b"PK\x03\x04" else 46)
            if blob[header_name_at : header_name_at + len(name)] == name:
                blob[at + offset : at + offset + 4] = declared
            at += 4
    return bytes(blob)


HOSTILE: dict[str, tuple[str, Callable[[], bytes]]] = {
    "dotdot": ("videos.zip", lambda: _zip_with(lambda z: z.writestr("../../escape.mp4", b"x"))),
    "absolute": ("videos.zip", lambda: _zip_with(lambda z: z.writestr("/tmp/abs.mp4", b"x"))),
    "symlink": ("videos.zip", lambda: _zip_with(_zip_symlink)),
    "tar_symlink": (
        "videos.tar",
        lambda: _tar_with(_tar_member(tarfile.SYMTYPE, "videos/out.mp4", "../../../outside")),
    ),
    "hardlink": (
        "videos.tar",
        lambda: _tar_with(_tar_member(tarfile.LNKTYPE, "videos/hard.mp4", "/etc/passwd")),
    ),
    "device": (
        "videos.tar",
        lambda: _tar_with(_tar_member(tarfile.CHRTYPE, "videos/null.mp4")),
    ),
    "oversized": ("videos.zip", _oversized_zip),
}
"""Hostile archive kinds -> (the archive's name, its bytes)."""


def hostile(kind: str) -> FixtureRelease:
    """A release ``evil/<kind>`` whose one archive holds a member that must never be
    written (see :data:`HOSTILE`), beside an ordinary one; its spec: :func:`hostile_spec`."""
    archive, build = HOSTILE[kind]
    rows = [{"id": "q0", "video": "ok0", "question": "What?", "options": ["A. a", "B. b"]}]
    rows[0]["answer"] = "A"
    files = {
        "annotations.jsonl": b"".join(json.dumps(r).encode() + b"\n" for r in rows),
        archive: build(),
    }
    return FixtureRelease(f"evil/{kind}", files, holds={"ok0": archive})


def hostile_spec(kind: str) -> str:
    """The YAML spec of benchmark ``Hostile-<kind>`` reading :func:`hostile` (``kind``)."""
    archive = HOSTILE[kind][0]
    return f"""name: Hostile-{kind}
citation: a test fixture
data:
  hf_dataset: evil/{kind}
  archives: [{archive}]
layout: annotations.jsonl, videos/<video>.mp4 (from {archive})
files:
  - path: annotations.jsonl
mapping:
  id: {{template: "{{id}}"}}
  question: question
  options: options
  target: answer
video:
  root: videos
  pattern: "{{video}}"
  extensions: [.mp4]
aggregation: {{name: mean, source: a test fixture}}
"""


# --- models --------------------------------------------------------------------------


def model_files(folder: str | Path) -> dict[str, bytes]:
    """A model folder's files (``evalkit model tiny`` writes one), as a repo holds them."""
    root = Path(folder)
    return {
        str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()
    }


def serve(hub: HubStandIn, release: FixtureRelease, kind: str = "dataset") -> HubRepo:
    """Add ``release`` to ``hub`` as a repo (its commit and gate as the release says)."""
    if kind == "model":
        return hub.add_repo(release.repo_id, release.files, kind="model", commit=release.commit)
    return hub.add_repo(release.repo_id, release.files, gated=release.gated, commit=release.commit)
