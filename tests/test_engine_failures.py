"""A broken server is never a model's empty answer (``evalkit run --engine openai``).

Against a real HTTP server on 127.0.0.1 that misbehaves on cue (tests/_openai_server.py),
every way a server fails a request (an error status, a hang-up, an empty or HTML body, no
choices, a stream that carries vLLM's error event or stops short, an aborted or empty
generation, a reply slower than the timeout) leaves the sample recorded as failed at stage
``engine`` with the cause, never ``ok`` with an empty prediction, and the run exits 1 with
one line naming the cause. A dead server or a model name it does not serve is found by the
probe before the run: one line, exit 2, no run directory."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("httpx")

from evalkit.cli.main import main
from tests._openai_server import Script, serve
from tests._synth_world import synth_world

SAMPLES = 2  # SynthVideo's yes/no family, one per split half

# cue, streamed, words of the recorded cause
CASES = [
    ("status:500", True, "server answered 500"),
    ("drop", True, "Server disconnected"),
    ("empty", True, "no event stream but an empty body"),
    ("empty", False, "is not a JSON object: an empty body"),
    ("no_choices", True, "holds no choices"),
    ("no_choices", False, "holds no choices"),
    ("html", True, "HTML page ('502 Bad Gateway')"),
    ("html", False, "HTML page ('502 Bad Gateway')"),
    ("slow", True, "ReadTimeout"),
    ("stream_error", True, "failed the request (400): pixel_values_videos dim[3] expected 384"),
    ("abort", True, "finish_reason 'abort'"),
    ("abort", False, "finish_reason 'abort'"),
    ("zero_tokens", True, "empty answer with 0 completion tokens"),
    ("zero_tokens", False, "empty answer with 0 completion tokens"),
    ("cut", True, "stream ended before its [DONE]"),
]


@pytest.fixture
def world(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    return synth_world(tmp_path, monkeypatch, SAMPLES)


@pytest.fixture
def script() -> Script:
    return Script(models=["served"], slow_s=2.0)


@pytest.fixture
def url(script: Script) -> Iterator[str]:
    with serve(script) as base:
        yield base


def _run(world: Path, url: str, *flags: str, model: str = "served") -> int:
    argv = ["run", "--engine", "openai", "--model", model, "--engine-opt", f"base_url={url}"]
    argv += ["--engine-opt", "max_retries=0", "--engine-opt", "timeout_s=1"]
    argv += ["--pipeline-max-retries", "0", "--bench", "SynthVideo"]
    argv += ["--data-root", str(world / "synth"), "--no-progress", "--cache-workers", "1"]
    argv += ["--cache-root", str(world / "cache"), "--runs-dir", str(world / "runs")]
    return main([*argv, "--run-id", "r", *flags])


def _records(world: Path) -> list[dict[str, object]]:
    store = world / "runs" / "r" / "SynthVideo.jsonl"
    return [json.loads(line) for line in store.read_text().splitlines()]


@pytest.mark.parametrize(("cue", "stream", "cause"), CASES, ids=[f"{c}-{s}" for c, s, _ in CASES])
def test_a_broken_reply_is_a_failed_sample_and_the_run_exits_1(
    world: Path,
    url: str,
    script: Script,
    capsys: pytest.CaptureFixture[str],
    cue: str,
    stream: bool,
    cause: str,
) -> None:
    script.misbehave = [cue] * 10
    assert _run(world, url, "--engine-opt", f"stream={str(stream).lower()}") == 1
    records = _records(world)
    assert len(records) == SAMPLES
    for record in records:
        assert record["status"] == "failed", record
        assert record["stage"] == "engine"
        assert cause in str(record["error"])
        assert "score" not in record or record.get("score") is None
    err = capsys.readouterr().err.strip().splitlines()
    assert err[-1].startswith(f"evalkit run: every sample failed ({SAMPLES} of {SAMPLES}):")
    assert cause[:20] in err[-1]


def test_the_engine_failing_on_some_samples_exits_1_unless_allowed(
    world: Path, url: str, script: Script, capsys: pytest.CaptureFixture[str]
) -> None:
    script.misbehave = ["ok", "status:500"]
    assert _run(world, url, "--pipeline-max-in-flight", "1") == 1
    statuses = sorted(str(r["status"]) for r in _records(world))
    assert statuses == ["failed", "ok"]
    last = capsys.readouterr().err.strip().splitlines()[-1]
    assert last.startswith("evalkit run: the engine failed on 1 of 2 samples (50%;")
    assert "server answered 500" in last and "--retry-failed" in last

    # resumed with --retry-failed, the failed sample reruns and the run is whole: exit 0
    failed = next(r["id"] for r in _records(world) if r["status"] == "failed")
    argv = ["run", "--resume", str(world / "runs" / "r"), "--retry-failed", "--no-progress"]
    assert main(argv) == 0
    rerun = _records(world)[-1]
    assert (rerun["id"], rerun["status"]) == (failed, "ok")


def test_a_share_of_engine_failures_can_be_allowed(
    world: Path, url: str, script: Script, capsys: pytest.CaptureFixture[str]
) -> None:
    script.misbehave = ["ok", "status:500"]
    flags = ["--pipeline-max-in-flight", "1", "--max-engine-failures", "0.5"]
    assert _run(world, url, *flags) == 0
    assert sorted(str(r["status"]) for r in _records(world)) == ["failed", "ok"]


def test_a_model_the_server_does_not_serve_is_one_line_before_the_run(
    world: Path, url: str, script: Script, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _run(world, url, model="servd") == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "does not serve --model 'servd'; did you mean 'served'?" in err[0]
    assert not (world / "runs").exists() and not script.bodies


def test_a_dead_server_is_one_line_in_seconds(
    world: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with serve(Script()) as url:
        pass  # the port is free again: nothing answers there
    assert _run(world, url) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "no answer (ConnectError" in err[0]
    assert not (world / "runs").exists()


def test_a_server_that_fails_the_probe_request_is_one_line(
    world: Path, url: str, script: Script, capsys: pytest.CaptureFixture[str]
) -> None:
    script.models = None  # no /models (404): the one-token request decides
    script.probe_cue = "html"
    assert _run(world, url) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1
    assert "a one-token test request failed" in err[0] and "502 Bad Gateway" in err[0]
    assert not (world / "runs").exists() and not script.bodies


@pytest.mark.parametrize(("finish", "tokens"), [("abort", [5]), ("error", []), ("length", [])])
def test_vllm_ending_a_request_without_an_answer_is_an_engine_failure(
    finish: str, tokens: list[int]
) -> None:
    """vLLM's own engine: a completion aborted, errored or of no token raises (the sample
    fails at stage engine) instead of returning its empty text."""
    import asyncio
    from types import SimpleNamespace

    pytest.importorskip("vllm")
    from evalkit.engines.base import Request, SamplingParams
    from evalkit.engines.vllm_engine import FrameCountGate, VLLMEngine
    from evalkit.errors import EvalkitError

    out = SimpleNamespace(index=0, text="", token_ids=tokens, finish_reason=finish, logprobs=None)

    class Engine:
        async def generate(self, *args: object) -> object:
            yield SimpleNamespace(outputs=[out], prompt_token_ids=[1, 2])

    engine = VLLMEngine.__new__(VLLMEngine)
    engine.family, engine._engine, engine._ids = None, Engine(), iter(range(9))
    engine._gate = FrameCountGate(None)
    engine.prompt = lambda request: "prompt"  # type: ignore[method-assign]
    request = Request(id="s1", text="q", sampling=SamplingParams(max_tokens=4))
    with pytest.raises(EvalkitError, match=rf"finish_reason '{finish}' after {len(tokens)} token"):
        asyncio.run(engine.generate(request))
    out.finish_reason, out.token_ids, out.text = "stop", [7], "yes"  # a real answer passes
    assert asyncio.run(engine.generate(request)).text == "yes"
