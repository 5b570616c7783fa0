"""Benchmarks come from the Hub on first use, pinned, verified and resumable: the table of
what issue 37 says a fetch must show, each case a real ``evalkit`` process talking to the
hub stand-in (evalkit.testing.hub_server) through ``HF_ENDPOINT``, never to the network.

The stand-in serves Video-MME at its spec's pinned commit (videos in chunked zips),
LongVideoBench behind a gate (a split tar), MLVU (loose videos in nested folders), LVBench
(annotations only: its videos come from YouTube) and hostile archives.
"""

from __future__ import annotations

import json
import os
import shlex
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from evalkit.bench.registry import get_benchmark
from evalkit.testing import hub_fixtures as fx
from evalkit.testing.hub_server import HubStandIn, client_env
from tests._tmpfs import tmpfs

PINNED = get_benchmark("Video-MME").data.revision
RELEASE = Path("videomme") / str(PINNED)
"""Video-MME's release folder under EVALKIT_DATA."""


@pytest.fixture(scope="module")
def hub() -> Iterator[HubStandIn]:
    with HubStandIn() as stand_in:
        fx.serve(stand_in, fx.videomme(n_videos=4, per_archive=2, commit=PINNED))
        fx.serve(stand_in, fx.longvideobench())
        fx.serve(stand_in, fx.mlvu())
        fx.serve(stand_in, fx.lvbench())
        for kind in fx.HOSTILE:
            fx.serve(stand_in, fx.hostile(kind))
        yield stand_in


@pytest.fixture
def home(hub: HubStandIn, tmp_path: Path) -> Path:
    """A fresh EVALKIT_DATA and HF_HOME for the case, the stand-in's log emptied."""
    hub.clear_log()
    return tmp_path


def evalkit(
    hub: HubStandIn, home: Path, *argv: str, **env: str
) -> subprocess.CompletedProcess[str]:
    """``evalkit ARGV`` in a child process with the Hub at the stand-in."""
    full = {**client_env(hub, home), **env}
    for key in [k for k, v in env.items() if v == ""]:  # "" takes a variable away
        full.pop(key)
    return subprocess.run(
        [sys.executable, "-m", "evalkit", *argv],
        env=full,
        capture_output=True,
        text=True,
        timeout=300,
        cwd=home,
    )


def spawn(hub: HubStandIn, home: Path, *argv: str) -> subprocess.Popen[str]:
    """``python ARGV`` started in a session of its own with the Hub at the stand-in."""
    return subprocess.Popen(
        [sys.executable, *argv],
        env=client_env(hub, home),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,
    )


def blob_gets(
    hub: HubStandIn, repo_path: str, repo: str = "lmms-lab/Video-MME"
) -> list[str | None]:
    """The Range header of each CDN transfer of ``repo_path`` (None: the whole file)."""
    r = hub.repo(repo)
    sha = r.commits[r.head][repo_path].sha256
    return [q.range for q in hub.requests(f"/blobs/{sha}") if q.method == "GET"]


def served(hub: HubStandIn, archive: str, member: str) -> bytes:
    """Member ``member`` of the zip ``archive`` as the stand-in serves Video-MME."""
    import io
    import zipfile

    r = hub.repo("lmms-lab/Video-MME")
    return zipfile.ZipFile(io.BytesIO(r.commits[r.head][archive].data)).read(member)


def files_under(folder: Path) -> list[str]:
    return sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())


# --- the cases ------------------------------------------------------------------------


def _second_run_asks_nothing(
    hub: HubStandIn, home: Path, out: subprocess.CompletedProcess[str]
) -> None:
    assert hub.log, "the first fetch asked the Hub"
    hub.clear_log()
    again = evalkit(hub, home, "bench", "validate", "Video-MME")
    assert again.returncode == 0, again.stderr
    assert "8 samples loaded" in again.stdout and "no problems found" in again.stdout
    assert hub.log == [], [r.path for r in hub.log]


def _cut_resumes_verified(
    hub: HubStandIn, home: Path, out: subprocess.CompletedProcess[str]
) -> None:
    ranges = blob_gets(hub, "videos_chunked_01.zip")
    assert ranges[0] is None and ranges[1] == "bytes=1500-", ranges  # the rest, not all again
    video = home / "data" / RELEASE / "media/videos_chunked_01.zip/data/vid001x.mp4"
    assert video.read_bytes() == served(hub, "videos_chunked_01.zip", "data/vid001x.mp4")


def _damaged_once_fetched_again(
    hub: HubStandIn, home: Path, out: subprocess.CompletedProcess[str]
) -> None:
    assert len(blob_gets(hub, "videos_chunked_02.zip")) == 2
    assert (home / "data" / RELEASE / "media/videos_chunked_02.zip/data/vid003x.mp4").is_file()


def _damaged_twice_leaves_nothing(
    hub: HubStandIn, home: Path, out: subprocess.CompletedProcess[str]
) -> None:
    assert len(blob_gets(hub, "videos_chunked_02.zip")) == 2
    kept = files_under(home / "data" / RELEASE)
    assert not any("videos_chunked_02" in f for f in kept), kept


def _limit_fetches_one_archive(
    hub: HubStandIn, home: Path, out: subprocess.CompletedProcess[str]
) -> None:
    listed, fetched = blob_gets(hub, "videos_chunked_01.zip")
    assert listed and listed.startswith("bytes=") and fetched is None  # its end, then it
    assert blob_gets(hub, "videos_chunked_02.zip") == []  # neither listed nor fetched
    kept = files_under(home / "data" / RELEASE / "media")
    assert kept == [
        "videos_chunked_01.zip/data/vid000x.mp4",
        "videos_chunked_01.zip/data/vid001x.mp4",
    ]


def _tar_fetched_whole(hub: HubStandIn, home: Path, out: subprocess.CompletedProcess[str]) -> None:
    for part in ("videos.tar.part.aa", "videos.tar.part.ab"):
        assert blob_gets(hub, part, "longvideobench/LongVideoBench") == [None]


def _no_request(hub: HubStandIn, home: Path, out: subprocess.CompletedProcess[str]) -> None:
    assert hub.log == [], [r.path for r in hub.log]
    assert not (home / "data").exists()


def _annotations_only_listed(
    hub: HubStandIn, home: Path, out: subprocess.CompletedProcess[str]
) -> None:
    commit = hub.repo("zai-org/LVBench").head
    listing = home / "data" / "lvbench" / commit / ".evalkit" / "missing-media.txt"
    assert listing.read_text().splitlines() == [
        "0000\tvideos/yt0000.mp4",
        "1000\tvideos/yt0001.mp4",
    ]


def _annotations_only(hub: HubStandIn, home: Path, out: subprocess.CompletedProcess[str]) -> None:
    assert not any("videos_chunked" in r.path for r in hub.log)
    assert out.stdout.splitlines()[1].startswith("001-1")


@dataclass
class Case:
    name: str
    argv: tuple[str, ...]
    rc: int
    says: tuple[str, ...] = ()
    """Parts of the last line on stderr."""
    before: Callable[[HubStandIn], None] | None = None
    check: Callable[[HubStandIn, Path, subprocess.CompletedProcess[str]], None] | None = None
    env: tuple[tuple[str, str], ...] = ()


CASES = [
    Case(
        "first use fetches, the second command makes no request",
        ("bench", "fetch", "Video-MME"),
        0,
        check=_second_run_asks_nothing,
    ),
    Case(
        "a transfer cut midway resumes and ends with verified files",
        ("bench", "fetch", "Video-MME"),
        0,
        before=lambda hub: hub.cut("videos_chunked_01.zip", 1500),
        check=_cut_resumes_verified,
    ),
    Case(
        "a damaged archive is named, removed and fetched again once",
        ("bench", "fetch", "Video-MME"),
        0,
        before=lambda hub: hub.damage("videos_chunked_02.zip"),
        check=_damaged_once_fetched_again,
    ),
    Case(
        "an archive damaged twice is named and refused",
        ("bench", "fetch", "Video-MME"),
        2,
        ("videos_chunked_02.zip arrived damaged twice", "sha256"),
        before=lambda hub: hub.damage("videos_chunked_02.zip", times=2),
        check=_damaged_twice_leaves_nothing,
    ),
    Case(
        "--limit fetches only the archives its samples are in",
        ("bench", "fetch", "Video-MME", "--limit", "3"),
        0,
        check=_limit_fetches_one_archive,
    ),
    Case(
        "a gated repo gives one line naming its page and the login",
        ("bench", "fetch", "LongVideoBench"),
        2,
        ("gated", "/datasets/longvideobench/LongVideoBench", "hf auth login", "HF_TOKEN"),
    ),
    Case(
        "a split tar cannot be listed: fetched whole for --limit, and said",
        ("bench", "fetch", "LongVideoBench", "--limit", "1"),
        0,
        env=(("HF_TOKEN", "hf_accepted"),),
        before=lambda hub: hub.repo("longvideobench/LongVideoBench").granted_tokens.add(
            "hf_accepted"
        ),
        check=_tar_fetched_whole,
    ),
    Case(
        "--no-fetch makes no request and names the fetch command",
        ("bench", "validate", "Video-MME", "--no-fetch"),
        2,
        ("--no-fetch", "`evalkit bench fetch Video-MME`"),
        check=_no_request,
    ),
    Case(
        "HF_HUB_OFFLINE=1 makes no request and names the fetch command",
        ("bench", "validate", "Video-MME"),
        2,
        ("HF_HUB_OFFLINE", "`evalkit bench fetch Video-MME`"),
        env=(("HF_HUB_OFFLINE", "1"),),
        check=_no_request,
    ),
    Case(
        "a release of annotations only: the missing videos listed, their source named",
        ("bench", "fetch", "LVBench"),
        0,
        ("not on the Hub", "YouTube", "missing-media.txt", "--video-root"),
        check=_annotations_only_listed,
    ),
    Case(
        "commands that read annotations only fetch no video",
        ("bench", "ids", "Video-MME"),
        0,
        check=_annotations_only,
    ),
]


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_fetch(case: Case, hub: HubStandIn, home: Path) -> None:
    if case.before is not None:
        case.before(hub)
    out = evalkit(hub, home, *case.argv, **dict(case.env))
    assert out.returncode == case.rc, out.stderr[-3000:]
    last = [line for line in out.stderr.splitlines() if line.strip()][-1:] or [""]
    for part in case.says:
        assert part in last[0], out.stderr[-3000:]
    if case.rc == 2:
        assert len(out.stderr.strip().splitlines()) >= 1
        assert "Traceback" not in out.stderr
    if case.check is not None:
        case.check(hub, home, out)


@pytest.mark.parametrize("kind", sorted(fx.HOSTILE))
def test_a_hostile_archive_is_refused_and_nothing_outside_is_written(
    kind: str, hub: HubStandIn, home: Path
) -> None:
    specs = home / "specs"
    specs.mkdir()
    (specs / "hostile.yaml").write_text(fx.hostile_spec(kind))
    workdir = home / "work" / "a" / "b"  # ../../ from the extraction lands in home
    workdir.mkdir(parents=True)
    before = set(files_under(home))
    absolute = Path("/tmp/abs.mp4")
    assert not absolute.exists()
    out = evalkit(hub, home, "bench", "fetch", f"Hostile-{kind}", EVALKIT_BENCHMARKS=str(specs))
    assert out.returncode == 2, out.stderr
    line = out.stderr.strip().splitlines()[-1]
    assert "videos" in line and "refused" in line and "Traceback" not in out.stderr, line
    written = set(files_under(home)) - before
    release = f"data/{f'hostile{kind}'.replace('_', '')}/"
    # nothing outside the data folder (HF_HOME: the client's own registry cache)
    assert all(w.startswith((release, "hf/")) for w in written), written
    assert not [w for w in written if "/media/" in w or "/downloads/" in w], written
    assert not absolute.exists()


def test_a_disk_too_small_is_refused_before_anything_is_written(
    hub: HubStandIn, home: Path
) -> None:
    with tmpfs(home / "small", "8k") as mnt:
        out = evalkit(hub, home, "bench", "fetch", "Video-MME", EVALKIT_DATA=str(mnt))
        assert out.returncode == 2, out.stderr
        line = out.stderr.strip().splitlines()[-1]
        assert "not enough disk space" in line and "needs " in line and "8.2 kB free" in line
        assert list(mnt.iterdir()) == []  # not one file, not one folder
        assert not any("/blobs/" in r.path for r in hub.log)


def test_a_fetch_killed_midway_continues_where_it_stopped(hub: HubStandIn, home: Path) -> None:
    """The second call fetches nothing complete again and the cut file from its last byte."""
    release = hub.stall("videos_chunked_02.zip", 3000)
    child = spawn(hub, home, "-m", "evalkit", "bench", "fetch", "Video-MME")
    try:
        assert hub.wait_stalled(timeout=60), "the transfer never reached its stall point"
        time.sleep(0.3)  # the bytes sent reach the part file
        os.killpg(child.pid, signal.SIGKILL)
        child.wait(timeout=30)
    finally:
        release.set()
    deadline = time.monotonic() + 30
    while not blob_gets(hub, "videos_chunked_02.zip") and time.monotonic() < deadline:
        time.sleep(0.1)  # the stalled transfer ends (its peer is gone) and is logged
    folder = home / "data" / RELEASE
    assert not (folder / "media" / "videos_chunked_02.zip").exists()  # never half there
    assert (folder / "media" / "videos_chunked_01.zip" / "data" / "vid000x.mp4").is_file()
    hub.clear_log()
    again = evalkit(hub, home, "bench", "fetch", "Video-MME")
    assert again.returncode == 0, again.stderr
    assert blob_gets(hub, "videos_chunked_01.zip") == []  # complete: not fetched again
    assert blob_gets(hub, "videos_chunked_02.zip") == ["bytes=3000-"]
    video = folder / "media/videos_chunked_02.zip/data/vid003x.mp4"
    assert video.read_bytes() == served(hub, "videos_chunked_02.zip", "data/vid003x.mp4")


@pytest.mark.heavy
def test_run_from_an_empty_cache_reaches_a_report_and_the_second_run_asks_nothing(
    hub: HubStandIn, home: Path
) -> None:
    """``evalkit run --bench Video-MME --model org/tiny-model``: the model and the release
    come from the stand-in with zero manual steps, vLLM (CPU) runs, the report says which
    data and model commit it read; the same command again makes no request at all."""
    pytest.importorskip("vllm")
    from evalkit.tiny_checkpoint import build_tiny_model
    from tests._engine_env import engine_env

    if ("model", "org/tiny-model") not in hub.repos:
        hub.add_repo("org/tiny-model", fx.model_files(build_tiny_model(home / "m")), kind="model")
    hub.clear_log()
    engine = {k: v for k, v in engine_env().items() if k not in ("HF_HOME", "HF_HUB_OFFLINE")}
    engine.pop("TRANSFORMERS_OFFLINE")
    argv = shlex.split(
        "run --bench Video-MME --model org/tiny-model --limit 3 --engine vllm --dtype float32 "
        "--max-num-batched-tokens 64 --max-num-seqs 8 --max-model-len 2048 --engine-opt "
        "enforce_eager=true --frames-max-frames 4 --max-tokens 4 --no-progress --runs-dir runs"
    )
    env = {**engine, "EVALKIT_CACHE": str(home / "frames")}
    first = evalkit(hub, home, *argv, "--run-id", "first", **env)
    assert first.returncode == 0, first.stderr[-3000:]
    asked = {r.path.split("/resolve/")[0] for r in hub.log if "/blobs/" not in r.path}
    assert asked <= {
        "/api/agent-harnesses",
        "/api/models/org/tiny-model/revision/main",
        f"/api/models/org/tiny-model/tree/{hub.repo('org/tiny-model', 'model').head}",
        "/org/tiny-model",
        f"/api/datasets/lmms-lab/Video-MME/tree/{PINNED}",
        "/datasets/lmms-lab/Video-MME",
    }, asked  # the Hub was asked for the model and the release, nothing else
    assert blob_gets(hub, "videos_chunked_02.zip") == []  # 3 samples: one archive
    config = json.loads((home / "runs" / "first" / "config.json").read_text())
    assert config["result_config"]["model_revision"] == hub.repo("org/tiny-model", "model").head
    assert config["data"]["Video-MME"]["commit"] == PINNED
    report = " ".join(first.stdout.split())
    assert f"Video-MME: data lmms-lab/Video-MME@{PINNED[:7]}" in report
    hub.clear_log()
    second = evalkit(hub, home, *argv, "--run-id", "second", **env)
    assert second.returncode == 0, second.stderr[-3000:]
    assert hub.log == [], [(r.method, r.path) for r in hub.log]
    assert "3 done" in second.stdout


PLAN = """
import json, sys
from pathlib import Path
from evalkit.run.config import RunConfig
from evalkit.run.plan import plan_run
cfg = RunConfig(model="m", bench=["LVBench"], engine="hf", video_root=sys.argv[1])
(bench,) = plan_run(cfg).benches
print(json.dumps([(s.id, s.media[0].path, Path(s.media[0].path).is_file()) for s in bench.samples]))
"""


def test_videos_of_a_release_of_annotations_only_come_from_video_root(
    hub: HubStandIn, home: Path
) -> None:
    videos = home / "yt" / "videos"
    videos.mkdir(parents=True)
    for key in ("yt0000", "yt0001"):
        (videos / f"{key}.mp4").write_bytes(b"a video fetched from YouTube")
    run = [sys.executable, "-c", PLAN, str(home / "yt")]
    first = subprocess.run(run, env=client_env(hub, home), capture_output=True, text=True)
    assert first.returncode == 0, first.stderr
    got = json.loads(first.stdout.strip().splitlines()[-1])
    assert [(sid, Path(p).relative_to(home).as_posix(), ok) for sid, p, ok in got] == [
        ("0000", "yt/videos/yt0000.mp4", True),
        ("0001", "yt/videos/yt0000.mp4", True),
        ("1000", "yt/videos/yt0001.mp4", True),
        ("1001", "yt/videos/yt0001.mp4", True),
    ]
    hub.clear_log()
    again = subprocess.run(run, env=client_env(hub, home), capture_output=True, text=True)
    assert again.returncode == 0 and hub.log == [], [r.path for r in hub.log]


NODE = """
import pickle, sys
from pathlib import Path
from evalkit.errors import EvalkitError
from evalkit.run.config import RunConfig
from evalkit.run.plan import plan_run
from evalkit.run.components import data_here
plan_file = Path(sys.argv[1])
if sys.argv[2] == "driver":
    plan = plan_run(RunConfig(model="m", bench=["Video-MME"], engine="hf", limit=3))
    plan_file.write_bytes(pickle.dumps(plan))
else:
    try:
        data_here(pickle.loads(plan_file.read_bytes()))
        print("ready")
    except EvalkitError as exc:
        print(exc)
"""


def test_a_cluster_node_without_the_release_fetches_it_and_the_same_data_folder_is_asked(
    hub: HubStandIn, home: Path
) -> None:
    """What a replica does before its engine starts (evalkit.scale.replica): the driver's
    plan names media this node lacks, so this node fetches the release, once."""
    plan = home / "plan.pkl"

    def node(role: str, **env: str) -> str:
        out = subprocess.run(
            [sys.executable, "-c", NODE, str(plan), role],
            env={**client_env(hub, home), **env},
            capture_output=True,
            text=True,
        )
        assert out.returncode == 0, out.stderr
        return out.stdout.strip()

    node("driver")
    shutil.rmtree(home / "data" / "videomme")  # another node: nothing fetched there yet
    hub.clear_log()
    assert node("replica") == "ready"
    assert blob_gets(hub, "videos_chunked_01.zip")[-1] is None  # fetched on this node
    hub.clear_log()
    assert node("replica") == "ready" and hub.log == []  # the next replica of the node
    shutil.rmtree(home / "data" / "videomme")  # a node whose EVALKIT_DATA is elsewhere
    elsewhere = node("replica", EVALKIT_DATA=str(home / "other"))
    assert "give every node the same EVALKIT_DATA" in elsewhere


OVERLAP = """
import asyncio, sys
from pathlib import Path
from evalkit.engines.base import Completion, Timings
from evalkit.run.config import RunConfig
from evalkit.run.execute import execute

seen = Path(sys.argv[1])

class Echo:
    model = "echo"
    async def generate(self, request):
        with open(seen, "a") as f:
            f.write(request.id.split("/")[-1] + "\\n")
        return Completion(request.id, ["A"], 10, 1, timings=Timings())
    async def close(self):
        return None

cfg = RunConfig(model="m", engine="openai", bench=["Video-MME"], cache_root=sys.argv[2],
                cache_workers=1, runs_dir=sys.argv[3], run_id="overlap")
result = execute(cfg, engine=Echo())
print(sum(s.completed for s in result.stats.values()))
"""


def test_the_run_starts_on_the_samples_in_place_while_later_archives_still_download(
    hub: HubStandIn, home: Path
) -> None:
    """The second archive is held midway: were the run to wait for every archive, no
    sample would reach the engine; the first archive's samples do, then the rest."""
    release = hub.stall("videos_chunked_02.zip", 3000)
    seen = home / "seen.txt"
    child = spawn(hub, home, "-c", OVERLAP, str(seen), str(home / "cache"), str(home / "runs"))
    try:
        assert hub.wait_stalled(timeout=120), "the second archive was never asked for"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline and len(_lines(seen)) < 4:
            time.sleep(0.2)
        # the samples of videos 0 and 1 (videos_chunked_01.zip), none of the others yet
        assert sorted(_lines(seen)) == ["001-1", "001-2", "002-1", "002-2"], _lines(seen)
        folder = home / "data" / RELEASE / "media"
        assert not (folder / "videos_chunked_02.zip").exists()
    finally:
        release.set()
    out, err = child.communicate(timeout=300)
    assert child.returncode == 0, err[-3000:]
    assert out.strip().splitlines()[-1] == "8" and len(_lines(seen)) == 8
    assert "while the run goes" in err


def _lines(path: Path) -> list[str]:
    return path.read_text().split() if path.exists() else []
