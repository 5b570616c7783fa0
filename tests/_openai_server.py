"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 (chat completions, plain and
streamed; ``/models``): it records the bodies, fails the calls it is told to, misbehaves
on cue (``Script.misbehave``: the ways a broken server answers), and answers "B" (a
stream: "The answer is C"), or what ``Script.answer`` says for the body. evalkit's probe
before a run (its one-token request) is recorded in ``probes``, not ``bodies``, and always
answered, so that tests count the run's own requests."""

from __future__ import annotations

import contextlib
import json
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any


@dataclass
class Script:
    """What the fake server does: fail some calls, delay answers, record bodies."""

    fail_status: list[int] = field(default_factory=list)
    delay_s: float = 0.0
    fail_body: str = "scripted"
    answer: Callable[[dict[str, Any]], str] | None = None
    """The reply to a request body (None: the fixed replies above)."""
    bodies: list[dict[str, Any]] = field(default_factory=list)
    misbehave: list[str] = field(default_factory=list)
    """How to answer the next requests, one each (then "ok"): ``status:N``, ``drop`` (hang
    up without a reply), ``empty`` (200, no body), ``no_choices`` (200, ``{"choices": []}``),
    ``html`` (200, a proxy's error page), ``slow`` (answer after ``slow_s``), ``stream_error``
    (200, then vLLM's error event, as when the model crashes on the request), ``abort``
    (finish_reason abort), ``zero_tokens`` (an empty answer of 0 completion tokens),
    ``cut`` (the stream stops before [DONE])."""
    slow_s: float = 3.0
    models: list[str] | None = None
    """What ``GET /models`` lists (None: 404, as servers without the endpoint answer)."""
    probes: list[dict[str, Any]] = field(default_factory=list)
    probe_cue: str = "ok"
    """How to answer evalkit's probe (a cue of ``misbehave``)."""
    active: int = 0
    max_active: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_GET(self) -> None:
            if script.models is None or not self.path.endswith("/models"):
                self._send(404, "application/json", b'{"error": "not found"}')
                return
            listed = {"object": "list", "data": [{"id": m} for m in script.models]}
            self._send(200, "application/json", json.dumps(listed).encode())

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            if body.get("max_tokens") == 1 and "Reply with one word." in json.dumps(body):
                script.probes.append(body)  # evalkit's probe before a run
                if script.probe_cue == "ok":
                    self._plain("OK", 1)
                else:
                    self._misbehave(script.probe_cue, body)
                return
            with script.lock:
                script.bodies.append(body)
                script.active += 1
                script.max_active = max(script.max_active, script.active)
                status = script.fail_status.pop(0) if script.fail_status else 200
                cue = script.misbehave.pop(0) if script.misbehave else "ok"
            try:
                time.sleep(script.delay_s)
                if cue != "ok":
                    self._misbehave(cue, body)
                elif status != 200:
                    error = json.dumps({"error": script.fail_body}).encode()
                    self._send(status, "application/json", error)
                elif body.get("stream"):
                    self._stream(body)
                else:
                    self._plain(script.answer(body) if script.answer else "B", 1)
            finally:
                with script.lock:
                    script.active -= 1

        def _plain(self, text: str, tokens: int, finish: str = "stop") -> None:
            answer = {
                "choices": [{"index": 0, "message": {"content": text}, "finish_reason": finish}],
                "usage": {"prompt_tokens": 11, "completion_tokens": tokens},
            }
            self._send(200, "application/json", json.dumps(answer).encode())

        def _events(self, chunks: list[dict[str, Any]], done: bool = True) -> None:
            data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
            self._send(200, "text/event-stream", data + (b"data: [DONE]\n\n" if done else b""))

        def _misbehave(self, cue: str, body: dict[str, Any]) -> None:
            stream = bool(body.get("stream"))
            if cue.startswith("status:"):
                self._send(int(cue[7:]), "application/json", b'{"error": "scripted"}')
            elif cue == "drop":
                self.close_connection = True
                self.connection.shutdown(2)  # hang up, no status line
            elif cue == "empty":
                self._send(200, "application/json", b"")
            elif cue == "no_choices":
                self._send(200, "application/json", b'{"choices": []}')
            elif cue == "html":
                page = b"<html><head><title>502 Bad Gateway</title></head><body>nginx</body></html>"
                self._send(200, "text/html", page)
            elif cue == "slow":
                time.sleep(script.slow_s)
                self._plain("B", 1)
            elif cue == "stream_error" and stream:
                error = {"message": "pixel_values_videos dim[3] expected 384, got 252"}
                self._events([{"error": {**error, "type": "BadRequestError", "code": 400}}])
            elif cue == "abort" and stream:
                self._events([{"choices": [{"index": 0, "delta": {}, "finish_reason": "abort"}]}])
            elif cue == "abort":
                self._plain("", 0, "abort")
            elif cue == "zero_tokens" and stream:
                usage = {"prompt_tokens": 11, "completion_tokens": 0}
                self._events([{"choices": [], "usage": usage}])
            elif cue == "zero_tokens":
                self._plain("", 0)
            elif cue == "cut":
                self._events([{"choices": [{"index": 0, "delta": {"content": "The"}}]}], False)
            else:
                raise ValueError(f"unknown cue {cue!r} (stream={stream})")

        def _stream(self, body: dict[str, Any]) -> None:
            parts = [script.answer(body)] if script.answer else ["The answer", " is C"]
            chunks: list[dict[str, Any]] = [
                {"choices": [{"index": 0, "delta": {"content": part}}]} for part in parts
            ]
            chunks.append({"choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": 4}})
            self._events(chunks)

        def _send(self, status: int, ctype: str, data: bytes) -> None:
            self.send_response(status)
            self.send_header("Content-Type", ctype)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

    return Handler


class _Server(ThreadingHTTPServer):
    def handle_error(self, request: Any, client_address: Any) -> None:
        """A client that gave up mid-request (a timeout test's) is no error of the server's:
        no socketserver traceback for it; any other error still prints one."""
        if isinstance(sys.exc_info()[1], ConnectionError):
            return
        super().handle_error(request, client_address)


@contextlib.contextmanager
def serve(script: Script) -> Iterator[str]:
    """The server running ``script`` on a free port; yields its base URL (``.../v1``)."""
    httpd = _Server(("127.0.0.1", 0), _handler(script))
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{httpd.server_address[1]}/v1"
    finally:
        httpd.shutdown()
        httpd.server_close()
