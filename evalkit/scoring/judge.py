"""LLM-as-judge: any evalkit Engine grades free-form answers against a reference.

Design: the judge is ASYNC at heart (``await judge.ajudge(sample, prediction)``), since
engines are async. The registered ``llm_judge`` scorer is the sync wrapper the router
needs: it submits the coroutine to the engine's own event loop (``loop=``, e.g. the
pipeline's) from the calling thread and waits, or, without a loop, to a private
background loop. Calling the sync path from ON the engine's loop would deadlock and is
refused — use ``evalkit.scoring.ascore`` there. With no judge configured
(``configure_judge``) the scorer returns ``Score(None)``: not scored, never 0.

The same judge also gives VCR-Bench's step-wise CoT figures (``cot_steps``, an extra metric
a sample asks for in ``fields["extra_metrics"]``; rules in the CoT section below).

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
from collections.abc import Awaitable, Callable, Coroutine
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any, TypeVar

from evalkit.engines.base import Engine, Request, SamplingParams
from evalkit.sample import Sample
from evalkit.scoring.extract import final_span
from evalkit.scoring.router import EXTRAS, scorer
from evalkit.scoring.types import Score

_T = TypeVar("_T")

_VERDICT = re.compile(r"verdict\s*[:=]\s*\**\s*(\d+(?:\.\d+)?)", re.I)


def parse_verdict(text: str, graded: bool) -> float | None:
    """The verdict in [0, 1] from a judgement ("VERDICT: 1", or 0-10 when graded)."""
    found = _VERDICT.findall(text)
    if not found:
        return None
    raw = float(found[-1])
    value = raw / 10 if graded else raw
    return value if 0.0 <= value <= 1.0 else None


# --- CoT steps (VCR-Bench's CoT score) ---------------------------------------------------
# Official rule, github.com/zhishuifeiqian/VCR-Bench eval_code/eval.py + prompt.py: the
# GPT-4o judge is asked twice per response. RECALL (``recall``, Recall_Evaluation_Prompt):
# each reference step is typed (video description / logical inference / background
# review) and marked matched or unmatched against the response. PRECISION (``precision``,
# Precision_Evaluation_Prompt): the response is re-split into steps, each typed and
# classed matched / wrong / redundant against the reference. Per sample: recall =
# matched / judged over description + inference steps (background left out); precision =
# matched / (matched + wrong) over the same kinds (redundant and background left out);
# the same per kind ("Video_*" = perception, "logic_*" = reasoning); efficiency =
# non-redundant / all response steps. A figure with no step to count is absent (the
# official ""), never 0. Our prompt (prompts/judge_cot_steps.jinja) asks the same
# questions in our words; kinds are named perception / reasoning / background.
COT_TEMPLATE = "judge_cot_steps.jinja"
COT_KINDS = ("perception", "reasoning", "background")
COT_KEYS = (
    "cot_recall",
    "cot_precision",
    "cot_recall_perception",
    "cot_recall_reasoning",
    "cot_precision_perception",
    "cot_precision_reasoning",
    "cot_efficiency",
)
CotSteps = list[tuple[str, str]]
CotParser = Callable[[str], CotSteps | None]
CotReply = tuple[CotSteps | None, str, str | None]
_SCORED_KINDS = frozenset({"perception", "reasoning"})


def cot_absent() -> dict[str, Any]:
    """Every CoT figure absent (None): not judged, never 0."""
    return dict.fromkeys(COT_KEYS)


def _cot_kind(raw: Any) -> str | None:
    # our names, and the official ones ("Video Description Steps", ...) for old caches
    text = str(raw).lower()
    if "percept" in text or "video" in text:
        return "perception"
    if "reason" in text or "logic" in text:
        return "reasoning"
    return "background" if "background" in text else None


def parse_cot_steps(text: str, verdicts: frozenset[str]) -> CotSteps | None:
    """[(kind, verdict), ...] from a JSON-array reply (bare or fenced); None if unparsable."""
    start, end = text.find("["), text.rfind("]")
    if start < 0 or end <= start:
        return None
    try:
        items = json.loads(text[start : end + 1])
    except ValueError:
        return None
    if not isinstance(items, list) or not items:
        return None
    out: CotSteps = []
    for item in items:
        if not isinstance(item, dict):
            return None
        kind = _cot_kind(item.get("kind", ""))
        verdict = str(item.get("verdict", "")).strip().lower()
        verdict = "matched" if verdict == "match" else verdict
        if kind is None or verdict not in verdicts:
            return None
        out.append((kind, verdict))
    return out


def _recall_steps(text: str) -> CotSteps | None:
    return parse_cot_steps(text, frozenset({"matched", "unmatched"}))


def _precision_steps(text: str) -> CotSteps | None:
    return parse_cot_steps(text, frozenset({"matched", "wrong", "redundant"}))


def _share(items: CotSteps, kinds: frozenset[str], counted: frozenset[str]) -> float | None:
    verdicts = [v for k, v in items if k in kinds and v in counted]
    return sum(v == "matched" for v in verdicts) / len(verdicts) if verdicts else None


def cot_recall(items: CotSteps) -> dict[str, float | None]:
    """Per-sample recall, overall (perception + reasoning) and per kind."""
    both = frozenset({"matched", "unmatched"})
    return {
        "cot_recall": _share(items, _SCORED_KINDS, both),
        "cot_recall_perception": _share(items, frozenset({"perception"}), both),
        "cot_recall_reasoning": _share(items, frozenset({"reasoning"}), both),
    }


def cot_precision(items: CotSteps) -> dict[str, float | None]:
    """Per-sample precision (redundant steps left out), per kind, and efficiency."""
    counted = frozenset({"matched", "wrong"})
    useful = sum(v != "redundant" for _, v in items)
    return {
        "cot_precision": _share(items, _SCORED_KINDS, counted),
        "cot_precision_perception": _share(items, frozenset({"perception"}), counted),
        "cot_precision_reasoning": _share(items, frozenset({"reasoning"}), counted),
        "cot_efficiency": useful / len(items) if items else None,
    }


async def judge_cot_steps(
    ask: Callable[[str, CotParser], Awaitable[CotReply]],
    sample: Sample,
    prediction: str,
    steps: list[str],
) -> dict[str, Any]:
    """Ask the recall and the precision question (concurrently) and compute the figures.

    ``ask(prompt, parser)`` returns (steps or None, reply text, failure reason). A half
    that fails leaves its own figures absent and says why in ``cot_error``.
    """
    from evalkit.prompts import render_template

    options = list(zip(sample.letters, sample.options, strict=True))
    answer = sample.target
    if options and isinstance(answer, str) and answer in sample.letters:
        answer = f"{answer}. {sample.options[sample.letters.index(answer)]}"
    common = {
        "question": sample.question,
        "options": options,
        "answer": answer,
        "steps": steps,
        "response": prediction,
    }
    recall, precision = await asyncio.gather(
        ask(render_template(COT_TEMPLATE, mode="recall", **common), _recall_steps),
        ask(render_template(COT_TEMPLATE, mode="precision", **common), _precision_steps),
    )
    figures = cot_absent()
    errors = []
    for name, (items, text, error), compute in (
        ("recall", recall, cot_recall),
        ("precision", precision, cot_precision),
    ):
        figures[f"cot_{name}_judgement"] = text
        if items is None:
            errors.append(f"{name}: {error}")
            continue
        figures.update(compute(items))
        figures[f"cot_{name}_steps"] = [list(item) for item in items]
    if errors:
        figures["cot_error"] = "; ".join(errors)
    return figures


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
    # a step-by-step JSON verdict list is far longer than one VERDICT line
    cot_sampling: SamplingParams = field(default_factory=lambda: SamplingParams(max_tokens=4096))
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

    async def ajudge_cot(self, sample: Sample, prediction: str, steps: list[str]) -> dict[str, Any]:
        """The CoT-step figures of one response (``judge_cot_steps``; both asks concurrent)."""
        return await judge_cot_steps(self._ask_cot, sample, prediction, steps)

    def judge_cot(self, sample: Sample, prediction: str, steps: list[str]) -> dict[str, Any]:
        """Sync wrapper of ``ajudge_cot`` (same loop rules as ``judge``)."""
        return self._run(self.ajudge_cot(sample, prediction, steps))

    async def _ask_cot(self, prompt: str, parse: CotParser) -> CotReply:
        """(parsed steps or None, the reply text, why it failed or None) for a CoT prompt."""
        key = self._key(prompt)
        record = self._cached(key)
        if record is None:
            try:
                completion = await self.engine.generate(
                    Request(id=f"judge-cot-{key[:16]}", text=prompt, sampling=self.cot_sampling)
                )
            except Exception as exc:
                return None, "", f"judge failed: {type(exc).__name__}: {exc}"
            record = {"judgement": completion.text, "model": self.model}
            if parse(completion.text) is not None:
                self._store(key, record)  # unparsable replies are not cached
        text = str(record.get("judgement", ""))
        items = parse(text)
        return items, text, None if items is not None else "reply is not a JSON step list"

    def _run(self, coro: Coroutine[Any, Any, _T]) -> _T:
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
    if target is None or not str(target).strip():
        # judge.jinja grades against the reference: with none (VideoReasonBench's
        # simulated questions) any verdict would be noise, so the sample is not scored.
        return Score(None, final_span(prediction).text, "not scored: no reference answer")
    try:
        return judge.judge(sample, prediction)
    except Exception as exc:  # timeouts, a closed loop: not the answer's fault
        return Score(None, None, f"judge failed: {type(exc).__name__}: {exc}")


# VCR-Bench's CoT score (eval_code/eval.py ``recall``/``precision``): a secondary metric
# asked for by the sample (``fields["extra_metrics"]``), reference steps in
# ``fields["reasoning"]``. The task scorer's value is kept as it is.
@EXTRAS("cot_steps")
def cot_steps(prediction: str, sample: Sample, primary: Score) -> Score:
    """``primary`` with the judged CoT figures (``COT_KEYS``) added; None when absent."""
    steps = sample.fields.get("reasoning")
    judge = current_judge()
    if not isinstance(steps, list) or not steps:
        figures, why = cot_absent(), "no reference steps"
    elif judge is None:
        figures, why = cot_absent(), "not scored: no judge configured"
    else:
        try:
            figures = judge.judge_cot(sample, prediction, [str(s) for s in steps])
        except Exception as exc:  # timeouts, a closed loop: not the answer's fault
            figures = cot_absent()
            figures["cot_error"] = f"judge failed: {type(exc).__name__}: {exc}"
        why = str(figures.get("cot_error") or "")
    explanation = f"{primary.explanation}; CoT {why or 'judged'}".lstrip("; ")
    if why:
        figures["cot_error"] = why
    return replace(primary, explanation=explanation, metadata={**primary.metadata, **figures})
