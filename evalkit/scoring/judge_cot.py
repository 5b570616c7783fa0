"""VCR-Bench's step-wise CoT figures from an LLM judge (``cot_steps``, an extra metric).

The rule (below) is VCR-Bench's; the judge that answers is ``evalkit.scoring.judge.LLMJudge``.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Awaitable, Callable
from typing import Any

from evalkit.sample import Sample

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
