"""LLM-as-judge: any evalkit Engine grades free-form answers against a reference.

Design: the judge is ASYNC at heart (``await judge.ajudge(sample, prediction)``), since
engines are async. The registered ``llm_judge`` scorer is the sync wrapper the router
needs: it submits the coroutine to the engine's own event loop (``loop=``, e.g. the
pipeline's) from the calling thread and waits, or, without a loop, to a private
background loop. Calling the sync path from ON the engine's loop would deadlock and is
refused — use ``evalkit.scoring.ascore`` there. With no judge configured
(``configure_judge``) the scorer returns ``Score(None)``: not scored, never 0.

Verdicts are cached on disk by sha256(judge model + rendered prompt): one JSON file per
verdict, written to a temporary name then renamed, so a crash never leaves half a file.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import os
import re
import tempfile
import threading
from collections.abc import Coroutine
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.engines.base import Engine, Request, SamplingParams
from evalkit.sample import Sample
from evalkit.scoring.extract import final_span
from evalkit.scoring.router import scorer
from evalkit.scoring.types import Score

_VERDICT = re.compile(r"verdict\s*[:=]\s*\**\s*(\d+(?:\.\d+)?)", re.I)


def parse_verdict(text: str, graded: bool) -> float | None:
    """The verdict in [0, 1] from a judgement ("VERDICT: 1", or 0-10 when graded)."""
    found = _VERDICT.findall(text)
    if not found:
        return None
    raw = float(found[-1])
    value = raw / 10 if graded else raw
    return value if 0.0 <= value <= 1.0 else None


@dataclass
class LLMJudge:
    """An Engine that grades answers; ``model`` names it in the verdict cache key."""

    engine: Engine
    model: str
    cache_dir: Path | None = None
    graded: bool = False
    template: str = "judge.jinja"
    loop: asyncio.AbstractEventLoop | None = None
    timeout_s: float = 300.0
    sampling: SamplingParams = field(default_factory=lambda: SamplingParams(max_tokens=256))
    _own_loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def prompt(self, sample: Sample, prediction: str) -> str:
        """The judge prompt for one answer."""
        from evalkit.prompts import render_template

        return render_template(
            self.template,
            question=sample.question,
            reference=sample.target,
            prediction=prediction,
            graded=self.graded,
        )

    def _key(self, prompt: str) -> str:
        return hashlib.sha256(f"{self.model}\0{prompt}".encode()).hexdigest()

    def _cached(self, key: str) -> dict[str, Any] | None:
        if self.cache_dir is None:
            return None
        path = self.cache_dir / key[:2] / f"{key}.json"
        try:
            got = json.loads(path.read_text())
        except (OSError, ValueError):
            return None  # absent or damaged: judge again and overwrite
        return got if isinstance(got, dict) else None

    def _store(self, key: str, record: dict[str, Any]) -> None:
        if self.cache_dir is None:
            return
        folder = self.cache_dir / key[:2]
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "w") as f:
            json.dump(record, f)
        os.replace(tmp, folder / f"{key}.json")

    async def ajudge(self, sample: Sample, prediction: str) -> Score:
        """Grade one answer (async); engine failures give Score(None), not 0."""
        answer = final_span(prediction).text
        prompt = self.prompt(sample, answer)
        key = self._key(prompt)
        record = self._cached(key)
        cached = record is not None
        if record is None:
            try:
                completion = await self.engine.generate(
                    Request(id=f"judge-{key[:16]}", text=prompt, sampling=self.sampling)
                )
            except Exception as exc:
                return Score(None, answer, f"judge failed: {type(exc).__name__}: {exc}")
            record = {"judgement": completion.text, "model": self.model}
            if parse_verdict(completion.text, self.graded) is not None:
                self._store(key, record)  # unparsable verdicts are not cached
        judgement = str(record.get("judgement", ""))
        verdict = parse_verdict(judgement, self.graded)
        meta = {"judgement": judgement, "judge_model": self.model, "cached": cached}
        meta["format"] = 1.0 if answer else 0.0
        if verdict is None:
            return Score(None, answer, "judge gave no parsable verdict", meta)
        return Score(verdict, answer, f"judge {self.model}: {verdict:g}", meta)

    def judge(self, sample: Sample, prediction: str) -> Score:
        """Sync wrapper: run ``ajudge`` on the engine's loop (or a private one) and wait."""
        return self._run(self.ajudge(sample, prediction))

    def _run(self, coro: Coroutine[Any, Any, Score]) -> Score:
        loop = self.loop or self._private_loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError("LLMJudge.judge called on its own event loop; use ascore()")
        return asyncio.run_coroutine_threadsafe(coro, loop).result(self.timeout_s)

    def _private_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._own_loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, daemon=True, name="judge").start()
                self._own_loop = loop
            return self._own_loop


_JUDGE: list[LLMJudge | None] = [None]


def configure_judge(judge: LLMJudge | None) -> None:
    """Set (or clear, with None) the judge that the ``llm_judge`` scorer uses."""
    _JUDGE[0] = judge


def current_judge() -> LLMJudge | None:
    """The configured judge, if any."""
    return _JUDGE[0]


# Rule: LLM-as-a-judge with a reference answer (Zheng et al. 2023, MT-Bench "reference-
# guided grading"; Video-ChatGPT / MSVD-QA GPT-assisted evaluation: yes/no + score).
@scorer("llm_judge", "judge", "gpt_eval", "llm-judge")
def llm_judge(prediction: str, target: Any, sample: Sample) -> Score:
    """The configured judge's verdict; Score(None) when no judge is configured."""
    judge = current_judge()
    if judge is None:
        return Score(None, final_span(prediction).text, "not scored: no judge configured")
    try:
        return judge.judge(sample, prediction)
    except Exception as exc:  # timeouts, a closed loop: not the answer's fault
        return Score(None, None, f"judge failed: {type(exc).__name__}: {exc}")
