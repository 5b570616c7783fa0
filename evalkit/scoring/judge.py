"""LLM-as-judge: any evalkit Engine grades free-form answers against a reference.

Design: the judge is ASYNC at heart (``await judge.ajudge(sample, prediction)``), since
engines are async; a run awaits it on the pipeline's event loop, many samples at once
(``evalkit.scoring.ascore``). Every judge request goes through the judge's ``JudgeGuard``
(``judge_guard.py``): bounded concurrency, a timeout per attempt, bounded retries and a
circuit breaker, so a silent judge costs about ``timeout x max_failures / concurrency``
per run, not a timeout per sample. The judge is never process-wide: callers pass it in a
``ScoringContext`` (``evalkit.scoring.context``), one per benchmark with that benchmark's
judge prompt (``with_template``). The ``llm_judge`` scorer is the sync path for sync
callers (``score``; the pipeline awaits instead): it is given the context's judge and
submits the coroutine to the engine's own event loop (``loop=``) from the calling thread
and waits, or, without a loop, to a private background loop. Calling the sync path from
ON the engine's loop would deadlock and is refused. Without a judge the scorer returns
``Score(None)``: not scored, never 0; so does a failed or unavailable judge.

The same judge also gives VCR-Bench's step-wise CoT figures (``cot_steps``, an extra metric
a sample asks for in ``fields["extra_metrics"]``; the rule is in ``judge_cot.py``).

Verdicts are cached on disk by sha256(judge model + rendered prompt): one JSON file per
verdict, written atomically (``evalkit.atomic``), so a crash never leaves half a file.
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import re
import threading
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from evalkit.atomic import write_text_atomic
from evalkit.engines.base import Completion, Engine, Request, SamplingParams
from evalkit.sample import Sample
from evalkit.scoring.extract import final_span
from evalkit.scoring.extras import EXTRAS
from evalkit.scoring.judge_cot import (
    COT_KEYS,
    CotParser,
    CotReply,
    cot_absent,
    judge_cot_steps,
    parse_cot_steps,
)
from evalkit.scoring.judge_guard import JUDGE_UNAVAILABLE, JudgeGuard, JudgeUnavailable
from evalkit.scoring.types import Score

_T = TypeVar("_T")
_P = TypeVar("_P")

_VERDICT = re.compile(r"verdict\s*[:=]\s*\**\s*(\d+(?:\.\d+)?)", re.I)

JUDGED_EXTRAS = frozenset({"cot_steps"})
"""Extra metrics that ask the judge (awaited on the loop like a judged answer)."""


def parse_verdict(text: str, graded: bool) -> float | None:
    """The verdict in [0, 1] from a judgement ("VERDICT: 1", or 0-10 when graded)."""
    found = _VERDICT.findall(text)
    if not found:
        return None
    raw = float(found[-1])
    value = raw / 10 if graded else raw
    return value if 0.0 <= value <= 1.0 else None


def judge_status(exc: BaseException) -> str:
    """``unavailable`` (the breaker refused the call) or ``failed`` (the call failed)."""
    return "unavailable" if isinstance(exc, JudgeUnavailable) else "failed"


def _why(exc: BaseException) -> str:
    if isinstance(exc, JudgeUnavailable):
        return str(exc)
    return f"judge failed: {type(exc).__name__}: {exc}"


@dataclass
class LLMJudge:
    """An Engine that grades answers; ``model`` names it in the verdict cache key."""

    engine: Engine
    model: str
    cache_dir: Path | None = None
    graded: bool = False
    template: str = "judge.jinja"
    loop: asyncio.AbstractEventLoop | None = None
    guard: JudgeGuard = field(default_factory=JudgeGuard)
    """Timeout, retries, concurrency and circuit breaker of every judge request."""
    sampling: SamplingParams = field(default_factory=lambda: SamplingParams(max_tokens=256))
    # a step-by-step JSON verdict list is far longer than one VERDICT line
    cot_sampling: SamplingParams = field(default_factory=lambda: SamplingParams(max_tokens=4096))
    _own_loop: asyncio.AbstractEventLoop | None = field(default=None, init=False, repr=False)
    _lock: threading.Lock = field(default_factory=threading.Lock, init=False, repr=False)

    def __post_init__(self) -> None:
        self.guard.name = f"judge {self.model!r}"

    def with_template(self, template: str) -> LLMJudge:
        """This judge asking with another prompt template (one benchmark's); the engine,
        cache and guard (its breaker state included) are shared, nothing is mutated."""
        return replace(self, template=template)

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
        write_text_atomic(folder / f"{key}.json", json.dumps(record))

    async def _generate(self, request: Request) -> Completion:
        """One judge request under the guard (raises ``JudgeUnavailable`` once down)."""
        return await self.guard.call(lambda: self.engine.generate(request))

    async def ajudge(self, sample: Sample, prediction: str) -> Score:
        """Grade one answer (async); a failed or unavailable judge gives Score(None), not 0."""
        answer = final_span(prediction).text
        prompt = self.prompt(sample, answer)
        key = self._key(prompt)
        record = self._cached(key)  # a cached verdict stands even when the judge is down
        meta: dict[str, Any] = {"judge_model": self.model, "cached": record is not None}
        meta["format"] = 1.0 if answer else 0.0
        if record is None:
            request = Request(id=f"judge-{key[:16]}", text=prompt, sampling=self.sampling)
            try:
                completion = await self._generate(request)
            except Exception as exc:
                return Score(None, answer, _why(exc), {**meta, "judge_status": judge_status(exc)})
            record = {"judgement": completion.text, "model": self.model}
            if parse_verdict(completion.text, self.graded) is not None:
                self._store(key, record)  # unparsable verdicts are not cached
        judgement = str(record.get("judgement", ""))
        verdict = parse_verdict(judgement, self.graded)
        meta["judgement"] = judgement
        if verdict is None:
            return Score(None, answer, "judge gave no parsable verdict", meta)
        return Score(verdict, answer, f"judge {self.model}: {verdict:g}", meta)

    async def ascore(self, sample: Sample, prediction: str) -> Score:
        """The ``llm_judge`` verdict of one sample, awaited (no reference: not scored)."""
        return _unjudgeable(sample, prediction) or await self.ajudge(sample, prediction)

    def judge(self, sample: Sample, prediction: str) -> Score:
        """Sync wrapper: run ``ajudge`` on the engine's loop (or a private one) and wait."""
        return self._run(self.ajudge(sample, prediction))

    async def ajudge_cot(self, sample: Sample, prediction: str, steps: list[str]) -> dict[str, Any]:
        """The CoT-step figures of one response (``judge_cot_steps``; both asks concurrent)."""
        figures = await judge_cot_steps(self._ask_cot, sample, prediction, steps)
        error = str(figures.get("cot_error") or "")
        if JUDGE_UNAVAILABLE in error or "judge failed" in error:
            figures["cot_judge_status"] = "unavailable" if JUDGE_UNAVAILABLE in error else "failed"
        return figures

    def judge_cot(self, sample: Sample, prediction: str, steps: list[str]) -> dict[str, Any]:
        """Sync wrapper of ``ajudge_cot`` (same loop rules as ``judge``)."""
        return self._run(self.ajudge_cot(sample, prediction, steps))

    async def aextras(self, sample: Sample, prediction: str, primary: Score) -> Score:
        """``primary`` with the sample's extra metrics added, judged ones awaited here."""
        for name in sample.fields.get("extra_metrics") or ():
            if str(name) == "cot_steps":
                primary = _with_cot(primary, *await self._cot_figures(sample, prediction))
            else:
                primary = EXTRAS.get(str(name))(prediction, sample, primary, self)
        return primary

    async def _cot_figures(self, sample: Sample, prediction: str) -> tuple[dict[str, Any], str]:
        steps = sample.fields.get("reasoning")
        if not isinstance(steps, list) or not steps:
            return cot_absent(), "no reference steps"
        figures = await self.ajudge_cot(sample, prediction, [str(s) for s in steps])
        return figures, str(figures.get("cot_error") or "")

    async def _ask_cot(self, prompt: str, parse: CotParser) -> CotReply:
        """(parsed steps or None, the reply text, why it failed or None) for a CoT prompt."""
        key = self._key(prompt)
        request = Request(id=f"judge-cot-{key[:16]}", text=prompt, sampling=self.cot_sampling)
        items, text, failed = await self._asked(key, request, parse)
        if failed is not None:
            return None, "", failed
        return items, text, None if items is not None else "reply is not a JSON step list"

    async def aask(
        self,
        prompt: str,
        parse: Callable[[str], float | None],
        *,
        system: str | None = None,
        max_tokens: int = 256,
    ) -> tuple[float | None, str, str | None]:
        """A benchmark's own judge prompt, asked as written (cached like every verdict):
        (the verdict ``parse`` reads, the judge's reply, why it failed or None)."""
        key = self._key(f"{system or ''}\0{prompt}")
        sampling = replace(self.sampling, max_tokens=max_tokens)
        request = Request(id=f"judge-{key[:16]}", text=prompt, system=system, sampling=sampling)
        value, text, failed = await self._asked(key, request, parse)
        if failed is not None:
            return None, "", failed
        return value, text, None if value is not None else "no verdict in the judge's reply"

    async def _asked(
        self, key: str, request: Request, parse: Callable[[str], _P | None]
    ) -> tuple[_P | None, str, str | None]:
        """The cached reply to ``request`` under ``key``, or the judge's (cached when
        ``parse`` reads it): (what ``parse`` read, the reply, why asking failed or None)."""
        record = self._cached(key)
        if record is None:
            try:
                completion = await self._generate(request)
            except Exception as exc:
                return None, "", _why(exc)
            record = {"judgement": completion.text, "model": self.model}
            if parse(completion.text) is not None:
                self._store(key, record)  # unparsable replies are not cached
        text = str(record.get("judgement", ""))
        return parse(text), text, None

    def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
        loop = self.loop or self._private_loop()
        try:
            running = asyncio.get_running_loop()
        except RuntimeError:
            running = None
        if running is loop:
            coro.close()
            raise RuntimeError("LLMJudge.judge called on its own event loop; use ascore()")
        # no wait limit here: every request inside is cut by the guard's timeout
        return asyncio.run_coroutine_threadsafe(coro, loop).result()

    def _private_loop(self) -> asyncio.AbstractEventLoop:
        with self._lock:
            if self._own_loop is None:
                loop = asyncio.new_event_loop()
                threading.Thread(target=loop.run_forever, daemon=True, name="judge").start()
                self._own_loop = loop
            return self._own_loop


def _unjudgeable(sample: Sample, prediction: str) -> Score | None:
    """Score(None) for a sample the judge must not grade; None when it can be judged."""
    if sample.target is None or not str(sample.target).strip():
        # judge.jinja grades against the reference: with none (VideoReasonBench's
        # simulated questions) any verdict would be noise, so the sample is not scored.
        return Score(None, final_span(prediction).text, "not scored: no reference answer")
    return None


# Rule: LLM-as-a-judge with a reference answer (Zheng et al. 2023, MT-Bench "reference-
# guided grading"; Video-ChatGPT / MSVD-QA GPT-assisted evaluation: yes/no + score).
def llm_judge(prediction: str, target: Any, sample: Sample, judge: LLMJudge | None = None) -> Score:
    """The judge's verdict (the scoring context's); Score(None) without a judge."""
    if judge is None:
        return Score(None, final_span(prediction).text, "not scored: no judge configured")
    unjudged = _unjudgeable(sample, prediction)
    if unjudged is not None:
        return unjudged
    try:
        return judge.judge(sample, prediction)
    except Exception as exc:  # a closed loop: not the answer's fault
        return Score(None, None, f"judge failed: {type(exc).__name__}: {exc}")


def _with_cot(primary: Score, figures: dict[str, Any], why: str) -> Score:
    """``primary`` with the CoT figures in its metadata and the reason in its explanation."""
    explanation = f"{primary.explanation}; CoT {why or 'judged'}".lstrip("; ")
    if why:
        figures["cot_error"] = why
    return replace(primary, explanation=explanation, metadata={**primary.metadata, **figures})


# VCR-Bench's CoT score (eval_code/eval.py ``recall``/``precision``): a secondary metric
# asked for by the sample (``fields["extra_metrics"]``), reference steps in
# ``fields["reasoning"]``. The task scorer's value is kept as it is.
@EXTRAS("cot_steps")
def cot_steps(prediction: str, sample: Sample, primary: Score, judge: LLMJudge | None) -> Score:
    """``primary`` with the judged CoT figures (``COT_KEYS``) added; None when absent."""
    steps = sample.fields.get("reasoning")
    if not isinstance(steps, list) or not steps:
        figures, why = cot_absent(), "no reference steps"
    elif judge is None:
        figures, why = cot_absent(), "not scored: no judge configured"
    else:
        try:
            figures = judge.judge_cot(sample, prediction, [str(s) for s in steps])
        except Exception as exc:  # a closed loop: not the answer's fault
            figures = cot_absent()
            figures["cot_error"] = f"judge failed: {type(exc).__name__}: {exc}"
        why = str(figures.get("cot_error") or "")
    return _with_cot(primary, figures, why)


__all__ = [
    "COT_KEYS",
    "JUDGED_EXTRAS",
    "JUDGE_UNAVAILABLE",
    "JudgeGuard",
    "JudgeUnavailable",
    "LLMJudge",
    "cot_steps",
    "llm_judge",
    "parse_cot_steps",
    "parse_verdict",
]
