"""The vLLM backends on the tiny Qwen-VL model, on CPU (heavy: each engine start ~15-60 s).

Prefix caching is off here so that every prompt token is prefilled and counted.
"""

from __future__ import annotations

import asyncio
import contextlib
import math
import os
from collections.abc import Iterator
from dataclasses import replace
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("vllm")

from evalkit.engines.base import Completion, Request, SamplingParams
from evalkit.engines.hf_engine import HFConfig, HFEngine
from evalkit.engines.vllm_engine import (
    VLLMBatchEngine,
    VLLMConfig,
    VLLMEngine,
)
from evalkit.errors import EvalkitError
from evalkit.tiny_checkpoint import build_tiny_model
from tests._engine_env import apply_engine_env, make_frames

pytestmark = pytest.mark.heavy

CHUNK = 32  # max_num_batched_tokens: far below one video prompt (~105 tokens)


@pytest.fixture(scope="module")
def engine_env() -> Iterator[None]:
    with pytest.MonkeyPatch.context() as mp:
        apply_engine_env(mp)
        yield


@pytest.fixture(scope="module")
def tiny(tmp_path_factory: pytest.TempPathFactory, engine_env: None) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("tiny") / "q25", "qwen2_5_vl", seed=0)


def _config(model: Path, **kw: Any) -> VLLMConfig:
    return VLLMConfig(
        model=str(model),
        dtype="float32",
        enforce_eager=True,
        max_num_batched_tokens=CHUNK,
        max_num_seqs=8,
        max_model_len=2048,
        enable_prefix_caching=False,
        **kw,
    )


@pytest.fixture(scope="module")
def engine(tiny: Path) -> Iterator[tuple[VLLMEngine, asyncio.AbstractEventLoop]]:
    loop = asyncio.new_event_loop()  # AsyncLLM binds its output loop to one event loop
    eng = VLLMEngine(_config(tiny, record_steps=True))
    try:
        yield eng, loop
    finally:
        loop.run_until_complete(eng.close())
        loop.close()


def _requests(n: int, t: int = 4, h: int = 112, w: int = 168, tokens: int = 8) -> list[Request]:
    # Parity limit (CPU_STACK.md): HF and vLLM give the text after a video the same M-RoPE
    # positions only while the video's temporal positions (grid_t x tokens_per_second x
    # seconds per grid = 2 x 2 x 1 here) stay within its spatial ones (H/28 = 4); T=8
    # frames already diverge after a few tokens on the tiny model.
    return [
        Request(
            id=f"q{i}",
            text=f"What happens in clip {i}? Answer briefly.",
            videos=[make_frames(t, h, w, seed=100 + i)],
            sampling=SamplingParams(max_tokens=tokens),
        )
        for i in range(n)
    ]


def _gather(loop: asyncio.AbstractEventLoop, eng: Any, reqs: list[Request]) -> list[Completion]:
    async def go() -> list[Completion]:
        return list(await asyncio.gather(*(eng.generate(r) for r in reqs)))

    return loop.run_until_complete(go())


def _children() -> set[int]:
    """This process's descendants in its own session: an engine's processes. (Sandboxes an
    earlier test in this process started ahead for code answers have sessions of their own
    and wait for their next job: they are not the engine's.)"""
    import psutil

    own, out = os.getsid(0), set()
    for p in psutil.Process().children(recursive=True):
        with contextlib.suppress(OSError):
            if os.getsid(p.pid) == own:
                out.add(p.pid)
    return out


def _engine_procs(pids: set[int], wait_s: float = 30.0) -> list[str]:
    """Command lines of those processes still alive after ``wait_s`` (zombies count as gone;
    multiprocessing's resource tracker and fork server may outlive an engine: the server that
    evalkit's decoding processes fork from lives as long as the process; vLLM's may not)."""
    import psutil

    procs = []
    for pid in pids:
        try:
            procs.append(psutil.Process(pid))
        except psutil.NoSuchProcess:
            continue
    _gone, alive = psutil.wait_procs(procs, timeout=wait_s)
    out = []
    for p in alive:
        try:
            if p.status() == psutil.STATUS_ZOMBIE:
                continue
            cmd = " ".join(p.cmdline()) or p.name()
        except psutil.NoSuchProcess:
            continue
        if (
            "multiprocessing.resource_tracker" not in cmd
            and "multiprocessing.forkserver" not in cmd
        ):
            out.append(cmd)
    return out


def test_a_video_prompt_is_prefilled_in_several_chunks(engine: Any) -> None:
    eng, loop = engine
    eng.steps.clear()
    (comp,) = _gather(loop, eng, _requests(1))
    assert comp.prompt_tokens > 3 * CHUNK, comp.prompt_tokens
    prefill = [s.prefill_tokens for s in eng.steps if s.prefill_tokens]
    assert len(prefill) >= math.ceil(comp.prompt_tokens / CHUNK)
    assert max(prefill) <= CHUNK
    assert sum(prefill) == comp.prompt_tokens
    assert comp.output_tokens == 8 and len(comp.token_ids[0]) == 8


def test_concurrent_requests_interleave_prefill_with_decode(engine: Any) -> None:
    eng, loop = engine
    eng.steps.clear()
    reqs = _requests(16)
    comps = _gather(loop, eng, reqs)
    assert [c.request_id for c in comps] == [r.id for r in reqs]
    for c in comps:
        t = c.timings
        assert t.first_token is not None and t.finished is not None
        assert t.submitted <= t.first_token <= t.finished
        assert c.output_tokens == 8 and c.prompt_tokens > CHUNK
    # Chunked prefill: some steps carry a new request's prefill chunk AND old decodes.
    assert any(s.prefill_tokens and s.decode_tokens for s in eng.steps)
    assert all(s.prefill_tokens + s.decode_tokens <= CHUNK for s in eng.steps)


def test_greedy_tokens_match_transformers(engine: Any, tiny: Path) -> None:
    eng, loop = engine
    reqs = _requests(3, tokens=12)
    hf = HFEngine(HFConfig(model=str(tiny)))
    expected = [hf.generate_sync(r) for r in reqs]
    got = _gather(loop, eng, reqs)
    assert [c.prompt_tokens for c in got] == [c.prompt_tokens for c in expected]
    assert [c.token_ids for c in got] == [c.token_ids for c in expected]
    # vLLM's incremental detokenizer holds back a trailing incomplete UTF-8 sequence (the
    # byte-level tiny model emits such fragments); everything before it must agree.
    assert [c.text for c in got] == [c.text.rstrip("\ufffd") for c in expected]


def test_image_and_video_in_marked_order_match_transformers(engine: Any, tiny: Path) -> None:
    eng, loop = engine
    req = Request(
        id="mixed",
        text="Look at <image> and then at <video> What changed?",
        videos=[make_frames(4, 112, 168, seed=7)],
        images=[make_frames(1, 56, 84, seed=8).array[0]],
        sampling=SamplingParams(max_tokens=10),
    )
    hf = HFEngine(HFConfig(model=str(tiny)))
    prompt = hf.prompt(req)
    assert prompt.index("<|image_pad|>") < prompt.index("<|video_pad|>")
    assert prompt == eng.prompt(req)
    expected = hf.generate_sync(req)
    (got,) = _gather(loop, eng, [req])
    assert got.prompt_tokens == expected.prompt_tokens
    assert got.token_ids == expected.token_ids


def test_a_refused_request_names_itself_and_the_engine_lives_on(engine: Any) -> None:
    eng, loop = engine
    too_long = Request(id="long-1", text="word " * 3000, sampling=SamplingParams(max_tokens=2))
    with pytest.raises(EvalkitError, match="long-1"):
        _gather(loop, eng, [too_long])
    (ok,) = _gather(loop, eng, _requests(1, tokens=2))
    assert ok.output_tokens == 2


def test_a_request_for_n_samples_returns_all_n(engine: Any) -> None:
    """Streamed parallel sampling yields one child per message; all n must come back."""
    eng, loop = engine
    (req,) = _requests(1, tokens=6)
    req = replace(req, sampling=SamplingParams(n=4, max_tokens=6, temperature=1.0))
    (got,) = _gather(loop, eng, [req])
    assert len(got.texts) == 4
    assert got.token_ids is not None and [len(t) for t in got.token_ids] == [6] * 4
    assert got.output_tokens == 24
    assert len({tuple(t) for t in got.token_ids}) > 1  # sampled, not one copy four times


def _asked_timeouts(core: Any) -> list[float | None]:
    """Record the timeout each ``core.shutdown`` call is given (it still shuts down)."""
    asked: list[float | None] = []
    real = core.shutdown

    def shutdown(timeout: float | None = None) -> None:
        asked.append(timeout)
        real(timeout=timeout)

    core.shutdown = shutdown
    return asked


def test_close_releases_engine_processes(engine: Any) -> None:
    eng, loop = engine
    before = _children()
    assert before, "vLLM runs its engine core in child processes"
    asked = _asked_timeouts(eng._engine)
    loop.run_until_complete(eng.close())
    assert not _engine_procs(before)
    # vLLM's own grace before it kills its processes: ours, not its default 5 s
    assert asked == [eng.config.close_grace_s]


def test_vanilla_batch_engine_on_qwen3_vl_matches_transformers(
    tmp_path_factory: pytest.TempPathFactory, engine_env: None
) -> None:
    model = build_tiny_model(tmp_path_factory.mktemp("tiny3") / "q3", "qwen3_vl", seed=0)
    reqs = _requests(4, t=4, h=128, w=192, tokens=10)
    hf = HFEngine(HFConfig(model=str(model)))
    expected = [hf.generate_sync(r) for r in reqs]
    before = _children()
    batch = VLLMBatchEngine(_config(model))
    try:
        started = _children() - before
        got = batch.generate_batch_sync(reqs)
        assert [c.token_ids for c in got] == [c.token_ids for c in expected]
        assert all(c.timings.finished is not None for c in got)
        one = asyncio.run(batch.generate(reqs[0]))
        assert one.token_ids == expected[0].token_ids
        asked = _asked_timeouts(batch._llm.llm_engine.engine_core)
    finally:
        asyncio.run(batch.close())
    assert not _engine_procs(started)
    assert asked == [batch.config.close_grace_s]
