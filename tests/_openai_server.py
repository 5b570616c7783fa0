"""A scripted OpenAI-compatible HTTP server on 127.0.0.1 (chat completions, plain and
streamed): it records the bodies, fails the calls it is told to, and answers "B" (a
stream: "The answer is C"), or what ``Script.answer`` says for the body."""

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
    active: int = 0
    max_active: int = 0
    lock: threading.Lock = field(default_factory=threading.Lock)


def _handler(script: Script) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def log_message(self, *args: Any) -> None:
            pass

        def do_POST(self) -> None:
            body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
            with script.lock:
                script.bodies.append(body)
                script.active += 1
                script.max_active = max(script.max_active, script.active)
                status = script.fail_status.pop(0) if script.fail_status else 200
            try:
                time.sleep(script.delay_s)
                if status != 200:
                    error = json.dumps({"error": script.fail_body}).encode()
                    self._send(status, "application/json", error)
                elif body.get("stream"):
                    self._stream(body)
                else:
                    text = script.answer(body) if script.answer else "B"
                    answer = {
                        "choices": [{"index": 0, "message": {"content": text}}],
                        "usage": {"prompt_tokens": 11, "completion_tokens": 1},
                    }
                    self._send(200, "application/json", json.dumps(answer).encode())
            finally:
                with script.lock:
                    script.active -= 1

        def _stream(self, body: dict[str, Any]) -> None:
            parts = [script.answer(body)] if script.answer else ["The answer", " is C"]
            chunks: list[dict[str, Any]] = [
                {"choices": [{"index": 0, "delta": {"content": part}}]} for part in parts
            ]
            chunks.append({"choices": [], "usage": {"prompt_tokens": 42, "completion_tokens": 4}})
            data = b"".join(f"data: {json.dumps(c)}\n\n".encode() for c in chunks)
            self._send(200, "text/event-stream", data + b"data: [DONE]\n\n")

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
