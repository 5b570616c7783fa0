"""transformers backend (CPU-friendly): the same Requests as vLLM, one at a time.

Frames arrive sampled and resized by the frame cache; the processor is told not to touch
them (``do_resize=False, do_sample_frames=False``) and gets the source-clip metadata, as
vLLM does. Generation runs in a worker thread so ``generate`` is a coroutine; requests
are served one after another (a CPU model gains nothing from interleaving).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from typing import Any

from pydantic import BaseModel, ConfigDict

from evalkit.engines.base import Completion, Request, Timings
from evalkit.engines.family import detect_family
from evalkit.engines.prompting import processor_inputs, render_prompt
from evalkit.errors import EvalkitError


class HFConfig(BaseModel):
    """Settings of the transformers engine."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model: str
    """Checkpoint directory."""
    dtype: str = "float32"
    """torch dtype name of the weights (float32 on CPU)."""
    device: str = "cpu"
    """torch device the model runs on."""
    attn_implementation: str = "sdpa"
    """transformers attention implementation (sdpa, eager, flash_attention_2)."""


class _FirstTokenClock:
    """A generate() streamer that notes when the first new token arrives."""

    def __init__(self) -> None:
        self.calls = 0
        self.first_token: float | None = None

    def put(self, value: Any) -> None:
        self.calls += 1
        if self.calls == 2 and self.first_token is None:  # call 1 carries the prompt
            self.first_token = time.time()

    def end(self) -> None:
        pass


class _SampledLogprobs:
    """The last logits processor of a generate() call: log-probs of the sampled tokens.

    It sees the scores after every other processor (temperature, top-k/p, suppressed
    tokens), i.e. the distribution the token is drawn from; the token itself is known one
    step later (the last column of ``input_ids``), so only one step's log-softmax is held.
    Scores pass through unchanged and no random number is drawn: sampling is unaffected.
    """

    def __init__(self) -> None:
        self.prev: Any = None
        self.steps: list[Any] = []

    def __call__(self, input_ids: Any, scores: Any) -> Any:
        if self.prev is not None:
            self.steps.append(self.prev.gather(-1, input_ids[:, -1:]).squeeze(-1))
        self.prev = scores.float().log_softmax(-1)
        return scores

    def finish(self, sequences: Any) -> list[list[float]]:
        """Per sequence, the log-prob of every generated token (padding after EOS included)."""
        if self.prev is not None:
            self.steps.append(self.prev.gather(-1, sequences[:, -1:]).squeeze(-1))
            self.prev = None
        return [
            [float(x) for x in row] for row in zip(*(s.tolist() for s in self.steps), strict=True)
        ]


@contextmanager
def _recording(model: Any, recorder: _SampledLogprobs | None) -> Iterator[None]:
    """Append ``recorder`` after generate()'s own processors (its warpers come after any
    user-given processor, so it cannot simply be passed as ``logits_processor``)."""
    if recorder is None:
        yield
        return
    original = model._get_logits_processor

    def with_recorder(*args: Any, **kwargs: Any) -> Any:
        processors = original(*args, **kwargs)
        processors.append(recorder)
        return processors

    model._get_logits_processor = with_recorder
    try:
        yield
    finally:
        del model._get_logits_processor


class HFEngine:
    """The Engine protocol on a transformers model (greedy by default)."""

    def __init__(self, config: HFConfig) -> None:
        import torch
        import transformers
        from transformers import AutoProcessor

        from evalkit.engines.reference_rope import use_reference_rope

        self.config = config
        self.family = detect_family(config.model)
        t0 = time.time()
        self.processor = AutoProcessor.from_pretrained(config.model)
        model_cls = getattr(
            transformers, self.family.family.hf_model or "AutoModelForImageTextToText"
        )
        model: Any = model_cls.from_pretrained(
            config.model,
            dtype=getattr(torch, config.dtype),
            attn_implementation=config.attn_implementation,
        )
        use_reference_rope(model)  # HF 5.x's Qwen2/2.5-VL positions after a video are off
        self.model: Any = model.to(config.device).eval()
        self.start_s = time.time() - t0
        self._pool: ThreadPoolExecutor | None = ThreadPoolExecutor(1, "evalkit-hf")

    def prompt(self, request: Request) -> str:
        """The chat prompt this engine feeds the processor for ``request``."""
        return render_prompt(self.processor.tokenizer, request, self.family)

    def inputs(self, request: Request) -> Any:
        """Processor output (token ids, pixel values, grids) for ``request``."""
        return processor_inputs(self.processor, self.family, request).to(self.config.device)

    def generate_sync(self, request: Request) -> Completion:
        """Generate for one request in the calling thread."""
        import torch

        s = request.sampling
        timings = Timings(submitted=time.time())
        inputs = self.inputs(request)
        clock = _FirstTokenClock()
        gen: dict[str, Any] = {"max_new_tokens": s.max_tokens, "num_return_sequences": s.n}
        if s.temperature > 0:
            gen |= {"do_sample": True, "temperature": s.temperature, "top_p": s.top_p}
            # top_k <= 0 means no top-k (as in vLLM); transformers would fall back to the
            # generation config's top_k (50 by default) if none were passed: 0 turns it off
            gen["top_k"] = s.top_k if s.top_k > 0 else 0
            if s.seed is not None:
                torch.manual_seed(s.seed)
        else:
            gen |= {"do_sample": False, "temperature": None, "top_p": None, "top_k": None}
        if s.stop:
            gen |= {"stop_strings": list(s.stop), "tokenizer": self.processor.tokenizer}
        recorder = _SampledLogprobs() if s.logprobs else None
        with torch.inference_mode(), _recording(self.model, recorder):
            out = self.model.generate(**inputs, **gen, streamer=clock if s.n == 1 else None)
        n_prompt = int(inputs["input_ids"].shape[1])
        token_ids = [self._trim_eos(row[n_prompt:].tolist()) for row in out]
        logprobs = None
        if recorder is not None:
            rows = recorder.finish(out) if out.shape[1] > n_prompt else [[] for _ in out]
            logprobs = [lp[: len(ids)] for lp, ids in zip(rows, token_ids, strict=True)]
        texts = [self._text(ids, s.stop) for ids in token_ids]
        timings.first_token = clock.first_token
        timings.finished = time.time()
        return Completion(
            request_id=request.id,
            texts=texts,
            prompt_tokens=n_prompt,
            output_tokens=sum(len(t) for t in token_ids),
            timings=timings,
            token_ids=token_ids,
            logprobs=logprobs,
        )

    def _trim_eos(self, ids: list[int]) -> list[int]:
        """Drop padding after EOS; keep the EOS token itself, as vLLM reports it."""
        eos = self.model.generation_config.eos_token_id
        eos_ids = set(eos if isinstance(eos, list) else [eos])
        for i, t in enumerate(ids):
            if t in eos_ids:
                return ids[: i + 1]
        return ids

    def _text(self, ids: list[int], stop: tuple[str, ...]) -> str:
        text: str = self.processor.tokenizer.decode(ids, skip_special_tokens=True)
        cut = min((i for i in (text.find(st) for st in stop) if i >= 0), default=-1)
        return text[:cut] if cut >= 0 else text  # like vLLM: the stop string is not output

    async def generate(self, request: Request) -> Completion:
        """Generate in the engine's worker thread."""
        if self._pool is None:
            raise EvalkitError("HFEngine is closed")
        loop = asyncio.get_running_loop()
        return await loop.run_in_executor(self._pool, self.generate_sync, request)

    async def close(self) -> None:
        """Stop the worker thread and drop the model."""
        pool, self._pool = self._pool, None
        if pool is not None:
            await asyncio.to_thread(pool.shutdown, True)
        self.model = None
