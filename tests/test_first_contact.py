"""First contact: what a newcomer's own file, videos and machine run into ends in an exit
status that says so, one line saying why, and no run directory where none should be made.

Every case runs the real entry point (``evalkit.cli.main:main``) in-process on a small
world built here: a unified ``--data`` file whose videos exist (SynthVideo clips), the same
rows pointing at a folder without them, and a scripted backend registered for the module
(``scripted``: it answers every request with one letter, or fails every one). Rows for
other first-contact cases (trainer configs by name, lmms-eval / VLMEvalKit prediction
files) belong to the modules that own them.
"""

from __future__ import annotations

import json
import logging
import os
import shlex
import shutil
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from pydantic import BaseModel, ConfigDict

from evalkit import engines
from evalkit.cli.main import main
from evalkit.engines import EngineSpec, register_engine
from evalkit.engines.base import Completion, Request
from evalkit.synthvideo import generate

NOISE = "NOISE-FROM-AN-ENGINE"
"""What the scripted engine prints the ways vLLM does (a library logger, a C-level write
to descriptor 2, a child process): never on the terminal unless --verbose."""


class ScriptedConfig(BaseModel):
    """Settings of the scripted backend."""

    model_config = ConfigDict(extra="forbid")
    model: str
    reply: str = "B"
    fail: bool = False
    noisy: bool = False
    crash: bool = False


class ScriptedEngine:
    """Answers every request with ``reply`` (or fails it); optionally noisy at start."""

    def __init__(self, config: ScriptedConfig) -> None:
        self.config = config
        if config.noisy:
            # as vLLM does: its own handler, on the sys.stdout of the time
            library = logging.getLogger("tests.noisy_library")
            handler = logging.StreamHandler(sys.stdout)
            library.addHandler(handler)
            library.warning("%s: library logger", NOISE)
            library.removeHandler(handler)
            os.write(2, f"{NOISE}: descriptor 2\n".encode())
            subprocess.run([sys.executable, "-c", f"print('{NOISE}: child process')"], check=True)
        if config.crash:
            os.write(2, f"{NOISE}: why the engine could not start\n".encode())
            raise RuntimeError("scripted engine: could not start")

    async def generate(self, request: Request) -> Completion:
        if self.config.fail:
            raise RuntimeError("scripted engine: out of memory")
        return Completion(request_id=request.id, texts=[self.config.reply], output_tokens=1)

    async def close(self) -> None:
        return None


@pytest.fixture(scope="module", autouse=True)
def scripted() -> Iterator[None]:
    """The test backend, registered for this module (the registries are process-wide)."""
    spec = register_engine(
        EngineSpec(
            "scripted",
            f"{__name__}:ScriptedEngine",
            f"{__name__}:ScriptedConfig",
            local_checkpoint=False,
        )
    )
    yield
    engines.ENGINE_SPECS.unregister(spec.name)  # ENGINES / ENGINE_CONFIGS are its views


def _rows(videos: list[str], source: str) -> list[dict[str, object]]:
    return [
        {
            "problem_id": f"q{i}",
            "problem": "Which shape moves?",
            "problem_type": "multiple choice",
            "options": ["A. circle", "B. square", "C. star", "D. heart"],
            "solution": "<answer>B</answer>",
            "path": f"videos/{name}",
            "data_type": "video",
            "data_source": source,
            "task_type": "Object Recognition",
            "videoID": f"v{i}",
            "duration": "short",
        }
        for i, name in enumerate(videos)
    ]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``good/``: a --data file with its videos beside it (Video-MME rows and rows of a
    source evalkit does not know); ``novids/``: the same file, no videos anywhere;
    ``half/``: the same file with one of its two videos; ``halfsynth/``: SynthVideo's own
    layout with one of its two videos."""
    root = tmp_path_factory.mktemp("first_contact")
    synth = root / "good"
    generate(synth, 1, "test", 0, families=["yes_no", "location"])
    videos = sorted(p.name for p in (synth / "videos").iterdir())
    rows = _rows(videos, "Video-MME") + _rows(videos, "my-clips")
    for folder in (root / "good", root / "novids", root / "empty", root / "half"):
        folder.mkdir(exist_ok=True)
        (folder / "mine.json").write_text(json.dumps(rows))
    shutil.copytree(synth, root / "halfsynth")  # SynthVideo's own layout, one video gone
    (root / "halfsynth" / "videos" / videos[1]).unlink()
    (root / "half" / "videos").mkdir()
    shutil.copy(synth / "videos" / videos[0], root / "half" / "videos" / videos[0])
    nulls = [{"id": f"{r['data_source']}/{r['problem_id']}", "prediction": None} for r in rows]
    (root / "nulls.jsonl").write_text("".join(json.dumps(n) + "\n" for n in nulls))
    ckpt = root / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
    return root


def _dead_port() -> int:
    """A loopback port nothing listens on (bound, then released)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture(scope="module")
def refusing_gcs() -> Iterator[int]:
    """A gRPC server on a loopback port that refuses every call as Ray's GCS refuses a
    missing or wrong token (its status and message); yields the port."""
    grpc = pytest.importorskip("grpc")
    from concurrent import futures

    class Refuse(grpc.GenericRpcHandler):
        def service(self, details: object) -> object:
            def deny(request: bytes, context: Any) -> bytes:
                context.abort(
                    grpc.StatusCode.UNAUTHENTICATED,
                    "InvalidAuthToken: Authentication token is missing or incorrect",
                )
                return b""

            return grpc.unary_unary_rpc_method_handler(deny)

    server = grpc.server(futures.ThreadPoolExecutor(max_workers=2))
    server.add_generic_rpc_handlers((Refuse(),))
    port = server.add_insecure_port("127.0.0.1:0")
    server.start()
    yield port
    server.stop(grace=None)


@dataclass(frozen=True)
class Case:
    """One first contact: the command, the exit status, what its one line must say."""

    name: str
    argv: str
    rc: int
    says: tuple[str, ...]
    makes_run_dir: bool = False


ENGINE = "--engine scripted --model m --no-progress --runs-dir runs --cache-root cache"
GOOD = f"run {ENGINE} --data good/mine.json"

CASES = [
    Case(
        "missing videos, --video-root without them",
        f"run {ENGINE} --data good/mine.json --video-root empty",
        2,
        ("Video-MME (mine.json): 2 of 2 samples have missing media", "videos/", "/empty)"),
    ),
    Case(
        "missing videos, no --video-root (the file's folder is searched)",
        f"run {ENGINE} --data novids/mine.json",
        2,
        ("2 of 2 samples have missing media", "/novids)", "--allow-missing"),
    ),
    Case(
        "missing videos, --bench X --data F without --video-root",
        f"run {ENGINE} --bench SynthVideo --data-root good --data novids/mine.json",
        2,
        ("mine: 2 of 2 samples have missing media", "--video-root"),
    ),
    Case(
        "missing videos in a benchmark's official layout (--bench X --data-root DIR)",
        f"run {ENGINE} --bench SynthVideo --data-root halfsynth",
        2,
        ("SynthVideo: 1 of 2 samples have missing media", "/halfsynth)", "--allow-missing"),
    ),
    Case(
        "missing videos with --allow-missing: every sample failed",
        f"run {ENGINE} --data novids/mine.json --allow-missing",
        1,
        ("every sample failed (4 of 4)", "4 x media not found", "stage media"),
        makes_run_dir=True,
    ),
    Case(
        "every sample failed in the engine",
        f"{GOOD} --engine-opt fail=true",
        1,
        (
            "every sample failed (4 of 4)",
            "4 x RuntimeError: scripted engine: out of memory",
            "stage engine",
        ),
        makes_run_dir=True,
    ),
    Case(
        "score: every prediction null",
        "score --data novids/mine.json --predictions nulls.jsonl --runs-dir runs",
        1,
        ("every sample failed (4 of 4)", "4 x prediction is null", "stage predictions"),
        makes_run_dir=True,
    ),
    Case(
        "run --data NAME (VLMEvalKit's habit): a benchmark's name, not a file",
        f"run {ENGINE} --data MVBench",
        2,
        ("--data MVBench: no such file; MVBench is a benchmark: give it as --bench MVBench",),
    ),
    Case(
        "score --data NAME, by an lmms-eval alias",
        "score --data videomme --predictions nulls.jsonl --runs-dir runs",
        2,
        ("Video-MME is a benchmark: give it as --bench videomme",),
    ),
    Case(
        "bench validate --data NAME",
        "bench validate --data MVBench",
        2,
        ("`evalkit bench validate MVBench --root DIR`",),
    ),
    Case(
        "a missing --data path that is no benchmark's name: no hint",
        f"run {ENGINE} --data nowhere/MVBench",
        2,
        ("--data nowhere/MVBench: no such file; check the path",),
    ),
    Case(
        "dead Ray address (loopback port nothing listens on)",
        f"{GOOD} --replicas 2 --ray-address 127.0.0.1:{{port}} --ray-connect-timeout 5",
        2,
        ("--ray-address 127.0.0.1:", "nothing listens on", "ray start --head"),
    ),
    Case(
        "Ray cluster that refuses our token",
        f"{GOOD} --replicas 2 --ray-address 127.0.0.1:{{gcs}} --ray-connect-timeout 5",
        2,
        ("--ray-address 127.0.0.1:", "authentication failed", "RAY_AUTH_TOKEN"),
    ),
]


def _run_dirs(root: Path) -> set[str]:
    runs = root / "runs"
    return {p.name for p in runs.iterdir()} if runs.is_dir() else set()


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_first_contact_ends_in_its_exit_status_and_one_line(
    case: Case,
    world: Path,
    refusing_gcs: int,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(world)
    before = _run_dirs(world)
    argv = shlex.split(case.argv.format(port=_dead_port(), gcs=refusing_gcs))
    run_id = ["--run-id", f"case{CASES.index(case)}"] if argv[0] in ("run", "score") else []
    rc = main([*argv, *run_id])
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == case.rc, err
    assert len(lines) == 1, err
    assert lines[0].startswith(f"evalkit {argv[0]}: "), lines[0]
    for part in case.says:
        assert part in lines[0], lines[0]
    made = _run_dirs(world) - before
    assert bool(made) == case.makes_run_dir, made


def test_score_data_reads_the_file_as_run_data_does(
    world: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """The same rows and replies through ``run --data`` and ``score --data``: the same
    benchmarks, specs as run, rules, verdicts and aggregates (Video-MME's rows under
    Video-MME's official rule, the unknown source pooled, in both)."""
    from evalkit.reports import load_run
    from evalkit.reports.load import read_records

    monkeypatch.chdir(world)
    assert main([*shlex.split(GOOD), "--engine-opt", "reply=B", "--run-id", "as-run"]) == 0
    ran = world / "runs" / "as-run"
    replies = [
        {"id": r.id, "prediction": r.prediction}
        for path in ran.glob("*.jsonl")
        for r in read_records(path)
    ]
    preds = world / "replies.jsonl"
    preds.write_text("".join(json.dumps(r) + "\n" for r in replies))
    argv = ["score", "--data", "good/mine.json", "--predictions", str(preds)]
    assert main([*argv, "--runs-dir", "runs", "--run-id", "as-scored", "--model", "m"]) == 0
    scored = world / "runs" / "as-scored"
    capsys.readouterr()

    def recorded(run: Path) -> tuple[object, ...]:
        doc = json.loads((run / "config.json").read_text())
        hashes = {k: v["spec_hash"] for k, v in doc["result_config"]["benchmarks"].items()}
        return doc["specs"], doc["data_benchmarks"], hashes

    assert recorded(ran) == recorded(scored)
    a, b = load_run(ran, bootstrap=0), load_run(scored, bootstrap=0)
    assert set(a.benchmarks) == set(b.benchmarks) == {"Video-MME (mine.json)", "mine"}
    for name, got in a.benchmarks.items():
        other = b.benchmarks[name]
        assert (got.overall, got.official, got.aggregation) == (
            other.overall,
            other.official,
            other.aggregation,
        ), name
    assert a.benchmarks["Video-MME (mine.json)"].official
    assert not a.benchmarks["mine"].official
    for path in ran.glob("*.jsonl"):
        verdicts = {r.id: (r.rule, r.score, r.rules) for r in read_records(path)}
        again = {r.id: (r.rule, r.score, r.rules) for r in read_records(scored / path.name)}
        assert verdicts == again, path.name


def test_engine_output_goes_to_the_run_log_not_the_terminal(
    world: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(world)
    argv = [*shlex.split(GOOD), "--engine-opt", "noisy=true", "--run-id", "quiet"]
    assert main(argv) == 0
    out, err = capfd.readouterr()
    assert NOISE not in out + err
    log = (world / "runs" / "quiet" / "output.log").read_text()
    for how in ("library logger", "descriptor 2", "child process"):
        assert f"{NOISE}: {how}" in log
    assert "engine and library output: runs/quiet/output.log" in out


def test_verbose_leaves_engine_output_on_the_terminal(
    world: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(world)
    argv = [*shlex.split(GOOD), "--engine-opt", "noisy=true", "--run-id", "loud", "--verbose"]
    assert main(argv) == 0
    out, err = capfd.readouterr()
    assert f"{NOISE}: descriptor 2" in err and f"{NOISE}: child process" in out
    assert not (world / "runs" / "loud" / "output.log").exists()


def test_engine_start_up_time_is_recorded_and_shown(
    world: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(world)
    assert main([*shlex.split(GOOD), "--run-id", "startup"]) == 0
    recorded = json.loads((world / "runs" / "startup" / "startup.json").read_text())
    assert recorded["engines_s"] >= 0 and recorded["ray_s"] is None
    assert recorded["replicas"] == 1
    assert "start-up: engine " in capsys.readouterr().out
    assert main(["report", "runs/startup"]) == 0  # and the report says it too
    report = " ".join(capsys.readouterr().out.split())  # the table wraps long notes
    assert f"start-up: engine {recorded['engines_s']:.1f} s (1 replica), before" in report


class _RefusingCluster:
    """A Ray module whose cluster answers but refuses the caller's token."""

    def init(self, **kwargs: object) -> None:
        raise ConnectionError("GCS rejected the request: Invalid or missing authentication token")


def test_a_cluster_that_refuses_our_token_is_named_an_authentication_failure() -> None:
    from evalkit.errors import ConfigError
    from evalkit.scale.cluster import connect

    with pytest.raises(ConfigError) as caught:
        connect(_RefusingCluster(), "auto", 1.0)  # "auto": no address to probe first
    said = str(caught.value)
    assert "authentication failed" in said and "RAY_AUTH_TOKEN" in said
    assert "no Ray cluster answers" not in said


def test_samples_per_s_is_over_pipeline_time_not_until_the_summary() -> None:
    from evalkit.pipeline import PipelineStats

    stats = PipelineStats(started=100.0, completed=15, failed=5, finished=110.0)
    assert stats.samples_per_s() == pytest.approx(2.0)


def test_allow_missing_runs_the_rest_and_records_the_missing_as_failed(
    world: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalkit.reports.load import read_records

    monkeypatch.chdir(world)
    argv = [*shlex.split(ENGINE), "--data", "half/mine.json", "--allow-missing"]
    assert main(["run", *argv, "--run-id", "half"]) == 0
    out = capsys.readouterr().out
    assert "1 done, 1 failed (1 with missing media)" in out
    records = [r for p in (world / "runs" / "half").glob("*.jsonl") for r in read_records(p)]
    assert sorted((r.status, r.stage) for r in records) == [
        ("failed", "media"),
        ("failed", "media"),
        ("ok", None),
        ("ok", None),
    ]


def test_bench_validate_data_makes_the_runs_media_check(
    world: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(world)
    assert main(["bench", "validate", "--data", "novids/mine.json", "--json"]) == 1
    first, _ = json.loads(capsys.readouterr().out)["missing_media"]
    assert (first["samples"], first["of"]) == (2, 2)
    assert first["searched"] == str(world / "novids")
    assert all(p.startswith(str(world / "novids" / "videos")) for p in first["paths"])
    assert main(["bench", "validate", "--data", "good/mine.json", "--json"]) == 0


def test_an_engine_that_does_not_start_is_one_line_naming_why_and_the_log(
    world: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Most start failures are the user's inputs (a checkpoint folder a trainer saved
    without its processor files, an option the backend refuses): the backend's words in
    one line, naming the log that holds its output and the traceback."""
    monkeypatch.chdir(world)
    rc = main([*shlex.split(GOOD), "--engine-opt", "crash=true", "--run-id", "crash"])
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert rc == 2 and len(lines) == 1, lines
    assert "the scripted engine did not start for --model m" in lines[0]
    assert "RuntimeError: scripted engine: could not start" in lines[0]
    assert lines[0].endswith("its output and traceback: runs/crash/output.log")
    log = (world / "runs" / "crash" / "output.log").read_text()
    assert f"{NOISE}: why the engine could not start" in log
    assert "Traceback (most recent call last)" in log and "could not start" in log
