"""The OpenAI-compatible client against a scripted HTTP server on 127.0.0.1."""

from __future__ import annotations

import asyncio
import base64
import io
import json
import socket
import struct
import threading
import time
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest

pytest.importorskip("httpx")

from evalkit.engines.base import Request, SamplingParams
from evalkit.engines.openai_engine import OpenAIConfig, OpenAIEngine
from evalkit.errors import EvalkitError, TransientError
from tests._engine_env import make_frames
from tests._openai_server import Script, serve


@pytest.fixture
def server() -> Iterator[tuple[str, Script]]:
    script = Script()
    with serve(script) as url:
        yield url, script


def _engine(url: str, **kw: Any) -> OpenAIEngine:
    return OpenAIEngine(OpenAIConfig(base_url=url, model="tiny", backoff_s=0.01, **kw))


def _decode_frames(url: str) -> np.ndarray:
    from PIL import Image

    head, _, data = url.partition(",")
    assert head == "data:video/jpeg;base64"
    frames = [np.asarray(Image.open(io.BytesIO(base64.b64decode(p)))) for p in data.split(",")]
    return np.stack(frames)


def _run(coro: Any) -> Any:
    return asyncio.run(coro)


def test_video_is_sent_losslessly_with_source_metadata(server: tuple[str, Script]) -> None:
    url, script = server
    frames = make_frames(4, 56, 84, seed=5)
    req = Request(id="v1", text="What happens?", videos=[frames], system="Be brief.")

    async def go() -> Any:
        eng = _engine(url)
        try:
            return await eng.generate(req)
        finally:
            await eng.close()

    comp = _run(go())
    assert comp.text == "The answer is C"
    assert (comp.prompt_tokens, comp.output_tokens) == (42, 4)
    t = comp.timings
    assert t.first_token is not None and t.finished is not None
    assert t.submitted <= t.first_token <= t.finished
    body = script.bodies[0]
    assert body["messages"][0] == {"role": "system", "content": "Be brief."}
    video, text = body["messages"][1]["content"]
    assert video["type"] == "video_url" and text == {"type": "text", "text": "What happens?"}
    np.testing.assert_array_equal(_decode_frames(video["video_url"]["url"]), frames.array)
    assert body["mm_processor_kwargs"] == {"do_sample_frames": False, "do_resize": False}
    io_kw = body["media_io_kwargs"]["video"]
    assert io_kw["frames_indices"] == frames.meta.indices
    assert io_kw["total_num_frames"] == frames.meta.total_frames
    assert io_kw["fps"] == frames.meta.source_fps and io_kw["num_frames"] == -1


def test_transient_errors_are_retried(server: tuple[str, Script]) -> None:
    url, script = server
    script.fail_status = [503, 429]

    async def go() -> Any:
        eng = _engine(url, stream=False)
        try:
            return await eng.generate(Request(id="r", text="hi")), eng.retries
        finally:
            await eng.close()

    comp, retries = _run(go())
    assert comp.text == "B" and retries == 2 and len(script.bodies) == 3


def test_retries_give_up_with_a_transient_error(server: tuple[str, Script]) -> None:
    url, script = server
    script.fail_status = [502, 502, 502]

    async def go() -> None:
        eng = _engine(url, max_retries=2)
        try:
            await eng.generate(Request(id="r9", text="hi"))
        finally:
            await eng.close()

    with pytest.raises(TransientError, match=r"r9.*502"):
        _run(go())
    assert len(script.bodies) == 3


def test_client_errors_fail_at_once_with_the_server_message(server: tuple[str, Script]) -> None:
    url, script = server
    script.fail_status = [400]

    async def go() -> None:
        eng = _engine(url)
        try:
            await eng.generate(Request(id="bad", text="hi"))
        finally:
            await eng.close()

    with pytest.raises(EvalkitError, match=r"bad.*400.*scripted") as info:
        _run(go())
    assert not isinstance(info.value, TransientError) and len(script.bodies) == 1


def test_timeouts_are_transient(server: tuple[str, Script]) -> None:
    url, script = server
    script.delay_s = 0.5

    async def go() -> None:
        eng = _engine(url, timeout_s=0.1, max_retries=1)
        try:
            await eng.generate(Request(id="slow", text="hi"))
        finally:
            await eng.close()

    with pytest.raises(TransientError, match="slow"):
        _run(go())


def test_concurrency_is_bounded(server: tuple[str, Script]) -> None:
    url, script = server
    script.delay_s = 0.05

    async def go() -> list[Any]:
        eng = _engine(url, max_concurrency=3)
        try:
            reqs = [Request(id=f"r{i}", text="hi") for i in range(12)]
            return await asyncio.gather(*(eng.generate(r) for r in reqs))
        finally:
            await eng.close()

    out = _run(go())
    assert len(out) == 12 and script.max_active == 3


def test_sampling_and_image_fields(server: tuple[str, Script]) -> None:
    url, script = server
    image = np.full((28, 56, 3), 7, np.uint8)
    sampling = SamplingParams(max_tokens=5, temperature=0.7, top_k=20, seed=1, stop=("\n",))
    req = Request(id="i", text="Look <image> now", images=[image], sampling=sampling)

    async def go() -> None:
        eng = _engine(url)
        try:
            await eng.generate(req)
        finally:
            await eng.close()

    _run(go())
    body = script.bodies[0]
    assert (body["max_tokens"], body["temperature"], body["top_k"]) == (5, 0.7, 20)
    assert (body["seed"], body["stop"]) == (1, ["\n"])
    kinds = [c["type"] for c in body["messages"][-1]["content"]]
    assert kinds == ["text", "image_url", "text"]
    assert "media_io_kwargs" not in body


def test_a_refused_processor_kwargs_error_says_how_to_start_the_server(
    server: tuple[str, Script],
) -> None:
    url, script = server
    script.fail_status = [400]
    script.fail_body = "Per-request mm_processor_kwargs are disabled by default"

    async def go() -> None:
        eng = _engine(url)
        try:
            await eng.generate(Request(id="v", text="hi", videos=[make_frames(2, 28, 28)]))
        finally:
            await eng.close()

    with pytest.raises(EvalkitError, match="--trust-request-mm-kwargs"):
        _run(go())


def test_an_assistant_prefix_is_sent_as_a_final_message_to_continue(
    server: tuple[str, Script],
) -> None:
    url, script = server
    req = Request(id="p", text="Which?", system="sys", assistant_prefix="Best Option: (")

    async def go() -> Any:
        eng = _engine(url, stream=False)
        try:
            return await eng.generate(req)
        finally:
            await eng.close()

    done = _run(go())
    body = script.bodies[0]
    assert [m["role"] for m in body["messages"]] == ["system", "user", "assistant"]
    assert body["messages"][-1]["content"] == "Best Option: ("
    # vLLM's ChatCompletionRequest refuses continue_final_message with the (default True)
    # add_generation_prompt, so both are sent
    assert (body["continue_final_message"], body["add_generation_prompt"]) == (True, False)
    assert done.text == "B"  # the server's continuation, not prefixed again


def test_without_a_prefix_the_user_turn_ends_the_chat(server: tuple[str, Script]) -> None:
    url, script = server

    async def go() -> None:
        eng = _engine(url)
        try:
            await eng.generate(Request(id="q", text="Which?"))
        finally:
            await eng.close()

    _run(go())
    body = script.bodies[0]
    assert body["messages"][-1]["role"] == "user"
    assert "continue_final_message" not in body and "add_generation_prompt" not in body


def _post_raw(url: str, body: bytes) -> socket.socket:
    """A chat-completions POST on a bare socket (so the test decides when it hangs up)."""
    host, port = url.split("//", 1)[1].split("/", 1)[0].split(":")
    sock = socket.create_connection((host, int(port)), timeout=5)
    head = f"POST /v1/chat/completions HTTP/1.1\r\nHost: {host}\r\nContent-Length: {len(body)}"
    sock.sendall(f"{head}\r\nContent-Type: application/json\r\n\r\n".encode() + body)
    return sock


def _handlers_done(timeout_s: float = 5.0) -> None:
    """Wait for the server's request threads (what they print comes before they end)."""
    for t in threading.enumerate():
        if t.name.endswith("(process_request_thread)"):
            t.join(timeout_s)


def test_a_client_that_hangs_up_mid_request_leaves_no_server_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    script = Script(delay_s=0.2)
    with serve(script) as url:
        sock = _post_raw(url, json.dumps({"model": "tiny", "messages": []}).encode())
        deadline = time.monotonic() + 5
        while not script.bodies and time.monotonic() < deadline:  # the request was read
            time.sleep(0.01)
        # hang up with a reset: the reply, written after the delay, meets a dead socket
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        sock.close()
        _handlers_done()
    assert script.bodies and script.active == 0
    assert "Traceback" not in capsys.readouterr().err


def test_any_other_server_error_still_prints_its_traceback(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """The control: the test above would see a traceback if there were one."""
    with serve(Script()) as url:
        with _post_raw(url, b"{not json") as sock:
            sock.recv(1)  # the server closes the connection once its handler failed
        _handlers_done()
    err = capsys.readouterr().err
    assert "Traceback" in err and "JSONDecodeError" in err
