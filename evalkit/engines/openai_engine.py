"""Client for a remote OpenAI-compatible server (``vllm serve``), over httpx.

Frames travel the way vLLM's server takes pre-sampled frames: one ``video_url`` item whose
URL is ``data:video/jpeg;base64,<frame>,<frame>,...`` (each frame a base64 image; vLLM
decodes each with PIL, so lossless PNG frames work under that media type), plus the
request-level ``media_io_kwargs.video`` = source fps, sampled ``frames_indices``,
``total_num_frames``, ``duration`` and ``num_frames=-1`` (take every frame sent), and
``mm_processor_kwargs`` = no resampling, no resizing. ``vllm serve`` takes both per request
only when started with ``--trust-request-mm-kwargs``; server-wide defaults cannot replace
them (the metadata differs per video). Images go as ``image_url`` data URLs. A request's
assistant prefix goes as a final assistant message with ``continue_final_message: true``
and ``add_generation_prompt: false`` (vLLM's chat-completions extra parameters).

Concurrency is bounded by a semaphore; transient failures (connection errors, timeouts,
HTTP 408/429/5xx) are retried with exponential backoff and jitter; other HTTP errors fail
at once with the server's message.

A reply is an answer only when it is one: a 200 whose body is empty, not JSON (a proxy's
HTML error page), holds no choices, carries the server's error object (vLLM streams one
when a request fails after the 200 went out), ends a choice with ``finish_reason`` abort or
error, stops before the stream's ``[DONE]``, or generated nothing (an empty text with zero
completion tokens) raises, so the sample is recorded as failed at stage ``engine`` with the
server's words, never as an empty prediction. :func:`probe` asks a server once, before a
run, whether it is there and serves the model.
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import random
import re
import time
from dataclasses import dataclass, field
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from evalkit.config import throughput_only
from evalkit.engines.base import Completion, Request, SamplingParams, Timings
from evalkit.engines.family import NO_RESAMPLE, ModelFamily, named_family
from evalkit.engines.prompting import content_items, media_images
from evalkit.errors import ConfigError, EvalkitError, TransientError

RETRY_STATUS = frozenset({408, 409, 425, 429, 500, 502, 503, 504})
PROCESSOR_KWARGS_HINT = (
    "evalkit sends frames already sampled and resized, with their source metadata "
    "(media_io_kwargs) and no-resampling settings (mm_processor_kwargs) per request: start "
    "`vllm serve` with --trust-request-mm-kwargs."
)


class OpenAIConfig(BaseModel):
    """Settings of the OpenAI-compatible HTTP client."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    base_url: str = "http://127.0.0.1:8000/v1"
    """Server root up to and including ``/v1``."""
    model: str
    """Model name as the server knows it (``vllm serve``'s served model name)."""
    api_key_env: str = "OPENAI_API_KEY"
    """Environment variable holding the bearer token (unset: no Authorization header)."""
    max_concurrency: int = 32
    """Most requests in flight at once."""
    timeout_s: float = throughput_only(600.0)
    """Read timeout of one HTTP request, in seconds."""
    connect_timeout_s: float = 10.0
    """Connect timeout, in seconds."""
    max_retries: int = 4
    """Retries of a transient failure before giving up with TransientError."""
    backoff_s: float = 1.0
    """First retry delay; doubles each retry (with jitter), capped by ``max_backoff_s``."""
    max_backoff_s: float = 30.0
    """Longest retry delay, in seconds."""
    frame_format: Literal["png", "jpeg"] = "png"
    """How frames are encoded: png is lossless (same pixels as the local engines)."""
    jpeg_quality: int = 95
    """JPEG quality when ``frame_format`` is jpeg."""
    stream: bool = True
    """Stream the answer (gives the first-token time)."""
    probe: bool = throughput_only(True)
    """Before a run, ask the server once (``/models``, then a one-token request) so that a
    dead server or a model name it does not serve is one line in seconds."""
    family: str | None = None
    """The served model's family (a name `evalkit models` lists, or the served checkpoint's
    folder, whose processor config gives its exact frame size): the run caches frames on
    its grid and sends its processor settings (None: a Qwen-VL family, as before)."""


def encode_image(array: np.ndarray, fmt: str = "png", quality: int = 95) -> str:
    """One uint8 H x W x 3 array as base64 PNG/JPEG (no data-URL prefix)."""
    from PIL import Image

    buf = io.BytesIO()
    image = Image.fromarray(np.ascontiguousarray(array), mode="RGB")
    if fmt == "jpeg":
        image.save(buf, format="JPEG", quality=quality)
    else:
        image.save(buf, format="PNG", compress_level=1)
    return base64.b64encode(buf.getvalue()).decode("ascii")


def build_payload(
    request: Request, config: OpenAIConfig, family: ModelFamily | None = None
) -> dict[str, Any]:
    """The chat-completions JSON body for ``request`` (fed as the served ``family`` is)."""
    fmt, q = config.frame_format, config.jpeg_quality
    videos, images = iter(request.videos), iter(media_images(request, family))
    content: list[dict[str, Any]] = []
    for item in content_items(request, family):
        if item["type"] == "video":
            frames = ",".join(encode_image(f, fmt, q) for f in next(videos).array)
            url = f"data:video/jpeg;base64,{frames}"
            content.append({"type": "video_url", "video_url": {"url": url}})
        elif item["type"] == "image":
            url = f"data:image/{fmt};base64,{encode_image(next(images), fmt, q)}"
            content.append({"type": "image_url", "image_url": {"url": url}})
        else:
            content.append({"type": "text", "text": item["text"]})
    messages: list[dict[str, Any]] = []
    if request.system:
        messages.append({"role": "system", "content": request.system})
    messages.append({"role": "user", "content": content})
    s = request.sampling
    prefill: dict[str, Any] = {}
    if request.assistant_prefix:
        # vLLM's server continues a final assistant message when asked (ChatCompletionRequest
        # continue_final_message, which excludes add_generation_prompt); the answer it sends
        # back is the continuation alone, as the local engines return it
        messages.append({"role": "assistant", "content": request.assistant_prefix})
        prefill = {"continue_final_message": True, "add_generation_prompt": False}
    body: dict[str, Any] = {
        "model": config.model,
        "messages": messages,
        "max_tokens": s.max_tokens,
        "temperature": s.temperature,
        "top_p": s.top_p,
        "n": s.n,
        "stream": config.stream,
        **prefill,
    }
    if s.top_k > 0:
        body["top_k"] = s.top_k
    if s.seed is not None:
        body["seed"] = s.seed
    if s.stop:
        body["stop"] = list(s.stop)
    if config.stream:
        body["stream_options"] = {"include_usage": True}
    fam = family.family if family is not None else None
    if request.videos or request.images:
        body["mm_processor_kwargs"] = fam.vllm_processor_kwargs if fam else dict(NO_RESAMPLE)
    if request.videos and (fam is None or fam.feed == "video"):
        extra = fam.video_metadata if fam is not None else {}
        body["media_io_kwargs"] = {"video": {**_video_io_kwargs(request), **extra}}
    return body


def _video_io_kwargs(request: Request) -> dict[str, Any]:
    """Source metadata for vLLM's frame loader; one set per request, so videos must agree."""
    metas = [v.meta.to_vllm() for v in request.videos]
    keys = ("fps", "frames_indices", "total_num_frames", "duration")
    first = {k: metas[0][k] for k in keys}
    if any({k: m[k] for k in keys} != first for m in metas[1:]):
        raise EvalkitError(
            f"request {request.id}: an OpenAI-compatible server takes one video metadata per "
            "request, but its videos differ in fps/indices/length; send them separately"
        )
    return {**first, "num_frames": -1}


def _headers(config: OpenAIConfig) -> dict[str, str]:
    """JSON, and the bearer token when its variable is set."""
    headers = {"Content-Type": "application/json"}
    if key := os.environ.get(config.api_key_env):
        headers["Authorization"] = f"Bearer {key}"
    return headers


class OpenAIEngine:
    """The Engine protocol over HTTP to an OpenAI-compatible (vLLM) server."""

    def __init__(self, config: OpenAIConfig) -> None:
        import httpx

        self.config = config
        self.family = named_family(config.family) if config.family else None
        self._client: Any = httpx.AsyncClient(
            base_url=config.base_url.rstrip("/"),
            headers=_headers(config),
            timeout=httpx.Timeout(config.timeout_s, connect=config.connect_timeout_s),
            limits=httpx.Limits(max_connections=config.max_concurrency),
        )
        self._slots = asyncio.Semaphore(config.max_concurrency)
        self.retries = 0

    async def generate(self, request: Request) -> Completion:
        """POST the request (bounded, retried); return texts, token counts and times."""
        if self._client is None:
            raise EvalkitError("OpenAIEngine is closed")
        if self.family is not None:
            self.family.check_frames(request)
        body = json.dumps(build_payload(request, self.config, self.family))
        async with self._slots:
            for attempt in range(self.config.max_retries + 1):
                timings = Timings(submitted=time.time())
                try:
                    return await self._post(request, body, timings)
                except TransientError:
                    if attempt == self.config.max_retries:
                        raise
                    self.retries += 1
                    await asyncio.sleep(self._delay(attempt))
        raise AssertionError("unreachable")

    def _delay(self, attempt: int) -> float:
        base = min(self.config.backoff_s * 2**attempt, self.config.max_backoff_s)
        return base * (0.5 + random.random() / 2)

    async def _post(self, request: Request, body: str, timings: Timings) -> Completion:
        import httpx

        try:
            async with self._client.stream("POST", "/chat/completions", content=body) as resp:
                if resp.status_code != 200:
                    raw = await resp.aread()
                    text = _said(raw, resp.headers.get("content-type", ""))
                    msg = f"request {request.id}: server answered {resp.status_code}: {text}"
                    if "mm_processor_kwargs" in text or "media_io_kwargs" in text:
                        msg += f"\n{PROCESSOR_KWARGS_HINT}"
                    if resp.status_code in RETRY_STATUS:
                        raise TransientError(msg)
                    raise EvalkitError(msg)
                if self.config.stream:
                    return await self._read_stream(request, resp, timings)
                raw = await resp.aread()
                ctype = resp.headers.get("content-type", "")
        except (httpx.TransportError, httpx.TimeoutException) as exc:
            raise TransientError(f"request {request.id}: {type(exc).__name__}: {exc}") from exc
        reply = _parse_reply(request.id, raw, ctype)
        timings.finished = time.time()
        return _completion(request, reply, timings)

    async def _read_stream(self, request: Request, resp: Any, timings: Timings) -> Completion:
        reply = _Reply()
        events = done = 0
        async for line in resp.aiter_lines():
            if not line.startswith("data:"):
                if line.strip() and not events and len(reply.stray) < 200:
                    reply.stray.append(line)
                continue
            data = line[5:].strip()
            events += 1
            if data == "[DONE]":
                done = 1
                break
            chunk = _json_object(request.id, data.encode(), "an event of the stream")
            reply.take_error(chunk)
            reply.usage = chunk.get("usage") or reply.usage
            for choice in chunk.get("choices") or []:
                index = choice.get("index", 0)
                reply.seen.add(index)
                if choice.get("finish_reason"):
                    reply.finish[index] = choice["finish_reason"]
                delta = (choice.get("delta") or {}).get("content")
                if delta:
                    if timings.first_token is None:
                        timings.first_token = time.time()
                    reply.parts.setdefault(index, []).append(delta)
        timings.finished = time.time()
        reply.raise_error(request.id)
        if not events:
            stray = "\n".join(reply.stray)
            if stray.lstrip().startswith("{"):  # a server that ignored "stream": a plain reply
                return _completion(request, _parse_reply(request.id, stray.encode(), ""), timings)
            raise TransientError(
                f"request {request.id}: the server answered 200 with no event stream but "
                f"{_said(stray.encode(), resp.headers.get('content-type', ''))}"
            )
        if not done:
            raise TransientError(
                f"request {request.id}: the server's stream ended before its [DONE] "
                f"({events} event(s) read)"
            )
        return _completion(request, reply, timings)

    async def close(self) -> None:
        """Close the HTTP connection pool (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


FAILED_FINISH = frozenset({"abort", "error"})
"""``finish_reason`` values that mean the server gave up on the request (vLLM's
``FINISH_REASON_STRINGS``): an engine failure, never the model's answer."""


@dataclass
class _Reply:
    """What a chat-completions reply said, gathered from a body or a stream's events."""

    parts: dict[int, list[str]] = field(default_factory=dict)
    seen: set[int] = field(default_factory=set)
    finish: dict[int, str] = field(default_factory=dict)
    usage: dict[str, Any] = field(default_factory=dict)
    error: tuple[str, int | None] | None = None
    stray: list[str] = field(default_factory=list)

    def take_error(self, data: dict[str, Any]) -> None:
        """Keep the server's error object (vLLM streams ``{"error": {...}}`` when a request
        fails after the 200 went out, then ``[DONE]``)."""
        error = data.get("error")
        if error is None and data.get("object") == "error":
            error = data
        if error is None or self.error is not None:
            return
        if isinstance(error, dict):
            message = str(error.get("message") or error.get("type") or error)
            code = error.get("code")
            self.error = (message, code if isinstance(code, int) else None)
        else:
            self.error = (str(error), None)

    def raise_error(self, request_id: str) -> None:
        """TransientError (a server-side code, or none) or EvalkitError (a 4xx code) for an
        error the server sent inside a 200."""
        if self.error is None:
            return
        message, code = self.error
        said = f"request {request_id}: the server failed the request" + (
            f" ({code})" if code else ""
        )
        msg = f"{said}: {_snippet(message)}"
        if "mm_processor_kwargs" in message or "media_io_kwargs" in message:
            msg += f"\n{PROCESSOR_KWARGS_HINT}"
        if code is not None and 400 <= code < 500 and code not in RETRY_STATUS:
            raise EvalkitError(msg)
        raise TransientError(msg)


def _snippet(text: str, limit: int = 300) -> str:
    """``text`` on one line, cut at ``limit`` characters."""
    text = " ".join(text.split())
    return text if len(text) <= limit else text[: limit - 3] + "..."


def _said(raw: bytes, ctype: str) -> str:
    """A body for an error message: an HTML page by its title, anything else on one line."""
    text = raw.decode("utf-8", "replace")
    if "html" in ctype.lower() or text.lstrip()[:15].lower().startswith(("<!doctype", "<html")):
        title = re.search(r"<title[^>]*>(.*?)</title>", text, re.IGNORECASE | re.DOTALL)
        heading = title.group(1) if title else re.sub(r"<[^>]+>", " ", text)
        return f"an HTML page ({_snippet(heading, 120)!r})"
    return _snippet(text) if text.strip() else "an empty body"


def _json_object(request_id: str, raw: bytes, what: str, ctype: str = "") -> dict[str, Any]:
    """``raw`` parsed as a JSON object, else TransientError saying what came instead."""
    try:
        data = json.loads(raw) if raw.strip() else None
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        raise TransientError(
            f"request {request_id}: {what} is not a JSON object: {_said(raw, ctype)}"
        )
    return data


def _parse_reply(request_id: str, raw: bytes, ctype: str) -> _Reply:
    """A non-streamed reply's texts, finish reasons and usage (or why it is no reply)."""
    data = _json_object(request_id, raw, "the server's 200 reply", ctype)
    reply = _Reply(usage=data.get("usage") or {})
    reply.take_error(data)
    reply.raise_error(request_id)
    choices = data.get("choices")
    if not isinstance(choices, list) or not choices:
        raise EvalkitError(
            f"request {request_id}: the server's 200 reply holds no choices: "
            f"{_snippet(json.dumps(data))}"
        )
    for choice in choices:
        index = choice.get("index", 0) if isinstance(choice, dict) else 0
        message = choice.get("message") if isinstance(choice, dict) else None
        if not isinstance(message, dict):
            raise EvalkitError(
                f"request {request_id}: choice {index} of the server's reply has no message"
            )
        reply.seen.add(index)
        reply.parts[index] = [str(message.get("content") or "")]
        if choice.get("finish_reason"):
            reply.finish[index] = choice["finish_reason"]
    return reply


def _completion(request: Request, reply: _Reply, timings: Timings) -> Completion:
    """The completion a reply makes, unless it is a failure dressed as an answer: a choice
    the server aborted or errored, none at all, or nothing generated (an empty text with
    no completion tokens, or with no count where the server gives none)."""
    n = max(request.sampling.n, len(reply.parts), len(reply.seen))
    texts = ["".join(reply.parts.get(i, [])) for i in range(n)]
    failed = {i: r for i, r in reply.finish.items() if r in FAILED_FINISH}
    if failed:
        index, reason = sorted(failed.items())[0]
        raise TransientError(
            f"request {request.id}: the server ended choice {index} with finish_reason "
            f"{reason!r} (it gave up on the request: see the server's log)"
        )
    output = reply.usage.get("completion_tokens")
    if not any(texts) and not output:
        counted = "0 completion tokens" if output == 0 else "no token count"
        raise TransientError(
            f"request {request.id}: the server sent an empty answer with {counted} "
            "(nothing was generated: see the server's log)"
        )
    if not reply.seen:
        raise TransientError(f"request {request.id}: the server's reply holds no choices")
    return Completion(
        request_id=request.id,
        texts=texts,
        prompt_tokens=int(reply.usage.get("prompt_tokens") or 0),
        output_tokens=int(output or 0),
        timings=timings,
    )


PROBE_TIMEOUT_S = 120.0
"""Longest wait for the probe's one-token answer (a cold server may compile first)."""


def probe(
    config: OpenAIConfig, flag: str = "--engine openai", opt_flag: str = "--engine-opt"
) -> None:
    """Ask the server at ``config.base_url`` whether it is up and serves ``config.model``,
    then for one token: ConfigError in one line (naming ``flag``) when it is not, before
    any run directory or sample exists. A server without ``/models`` is asked the token
    only."""
    import httpx

    if not config.probe:
        return
    url = config.base_url.rstrip("/")
    where = f"{flag} at {url}"
    timeout = httpx.Timeout(
        min(config.timeout_s, PROBE_TIMEOUT_S), connect=config.connect_timeout_s
    )
    try:
        with httpx.Client(base_url=url, headers=_headers(config), timeout=timeout) as client:
            _check_served(client, config, where, opt_flag)
            body = {
                "model": config.model,
                "messages": [{"role": "user", "content": "Reply with one word."}],
                "max_tokens": 1,
                "temperature": 0.0,
                "stream": False,
            }
            resp = client.post("/chat/completions", json=body)
    except (httpx.TransportError, httpx.TimeoutException) as exc:
        raise ConfigError(
            f"{where}: no answer ({type(exc).__name__}: {_snippet(str(exc), 160)}); start the "
            "server (`vllm serve MODEL --trust-request-mm-kwargs`) or give its address with "
            f"{opt_flag} base_url=http://HOST:PORT/v1"
        ) from None
    ctype = resp.headers.get("content-type", "")
    try:
        if resp.status_code != 200:
            raise EvalkitError(f"server answered {resp.status_code}: {_said(resp.content, ctype)}")
        request = Request(id="probe", text="", sampling=SamplingParams(max_tokens=1))
        _completion(request, _parse_reply("probe", resp.content, ctype), Timings())
    except EvalkitError as exc:
        said = " ".join(str(exc).removeprefix("request probe: ").split())
        raise ConfigError(f"{where}: a one-token test request failed: {said}") from None


def _check_served(client: Any, config: OpenAIConfig, where: str, opt_flag: str) -> None:
    """ConfigError when ``/models`` answers and lists other models only (or refuses the key)."""
    from evalkit.registry import did_you_mean

    resp = client.get("/models")
    if resp.status_code in (401, 403):
        raise ConfigError(
            f"{where}: the server refused the request ({resp.status_code}); set the API key "
            f"in ${config.api_key_env} (or name another variable: {opt_flag} api_key_env=NAME)"
        )
    if resp.status_code != 200:
        return  # not every OpenAI-compatible server lists its models
    try:
        served = [str(m["id"]) for m in resp.json()["data"]]
    except (ValueError, KeyError, TypeError):
        return
    if served and config.model not in served:
        hint = did_you_mean(config.model, served)
        listed = ", ".join(served[:5]) + (f" (+{len(served) - 5} more)" if len(served) > 5 else "")
        raise ConfigError(
            f"{where}: the server does not serve --model {config.model!r}{hint} (it serves: "
            f"{listed}); pass the served name as --model"
        )
