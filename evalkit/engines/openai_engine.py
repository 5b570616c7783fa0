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
"""

from __future__ import annotations

import asyncio
import base64
import io
import json
import os
import random
import time
from typing import Any, Literal

import numpy as np
from pydantic import BaseModel, ConfigDict

from evalkit.config import throughput_only
from evalkit.engines.base import Completion, Request, Timings
from evalkit.engines.family import NO_RESAMPLE, ModelFamily, named_family
from evalkit.engines.prompting import content_items, media_images
from evalkit.errors import EvalkitError, TransientError

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
        body["mm_processor_kwargs"] = dict(fam.processor_kwargs if fam else NO_RESAMPLE)
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


class OpenAIEngine:
    """The Engine protocol over HTTP to an OpenAI-compatible (vLLM) server."""

    def __init__(self, config: OpenAIConfig) -> None:
        import httpx

        self.config = config
        self.family = named_family(config.family) if config.family else None
        headers = {"Content-Type": "application/json"}
        if key := os.environ.get(config.api_key_env):
            headers["Authorization"] = f"Bearer {key}"
        self._client: Any = httpx.AsyncClient(
            base_url=config.base_url.rstrip("/"),
            headers=headers,
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
                    text = (await resp.aread()).decode("utf-8", "replace")[:500]
                    msg = f"request {request.id}: server answered {resp.status_code}: {text}"
                    if "mm_processor_kwargs" in text or "media_io_kwargs" in text:
                        msg += f"\n{PROCESSOR_KWARGS_HINT}"
                    if resp.status_code in RETRY_STATUS:
                        raise TransientError(msg)
                    raise EvalkitError(msg)
                if self.config.stream:
                    return await self._read_stream(request, resp, timings)
                data = json.loads(await resp.aread())
        except (httpx.TransportError, httpx.TimeoutException) as exc:
            raise TransientError(f"request {request.id}: {type(exc).__name__}: {exc}") from exc
        texts = [c["message"]["content"] or "" for c in data["choices"]]
        timings.finished = time.time()
        return _completion(request, texts, data.get("usage") or {}, timings)

    async def _read_stream(self, request: Request, resp: Any, timings: Timings) -> Completion:
        parts: dict[int, list[str]] = {}
        usage: dict[str, Any] = {}
        async for line in resp.aiter_lines():
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                break
            chunk = json.loads(data)
            usage = chunk.get("usage") or usage
            for choice in chunk.get("choices", []):
                delta = (choice.get("delta") or {}).get("content")
                if delta:
                    if timings.first_token is None:
                        timings.first_token = time.time()
                    parts.setdefault(choice.get("index", 0), []).append(delta)
        timings.finished = time.time()
        n = max(request.sampling.n, len(parts))
        texts = ["".join(parts.get(i, [])) for i in range(n)]
        return _completion(request, texts, usage, timings)

    async def close(self) -> None:
        """Close the HTTP connection pool (idempotent)."""
        client, self._client = self._client, None
        if client is not None:
            await client.aclose()


def _completion(
    request: Request, texts: list[str], usage: dict[str, Any], timings: Timings
) -> Completion:
    return Completion(
        request_id=request.id,
        texts=texts,
        prompt_tokens=int(usage.get("prompt_tokens") or 0),
        output_tokens=int(usage.get("completion_tokens") or 0),
        timings=timings,
    )
