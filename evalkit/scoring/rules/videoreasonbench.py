"""VideoReasonBench's official rating (llyx97/video_reason_bench eval_huggingface.py
``evaluate`` / ``evaluate_operation`` with utils/eval_utils.py ``extract_final_answer``).

Every reply is first cut to what follows its FIRST "Final Answer" (after a Kimi
"◁/think▷" block, when there is one): a reply without it, or with nothing after it, is
rated incorrect without asking anyone. Otherwise a question with a reference answer goes
to the judge (here: the configured judge, given the cut text), and a
prediction_operation question (no reference) is rated by having an LLM extract the
proposed operations and replaying them in the benchmark's state simulator. evalkit has no
such simulator, so those replies are "not scored"; without a judge the judged ones are
too. This keeps the judge: the rule only adds the official closed-form first step.
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.types import Score

_THINK_END = "\u25c1/think\u25b7"  # Kimi-VL's end-of-thinking marker
_FINAL = re.compile(r"Final Answer\s*(.*?)\s*$", re.DOTALL)


def final_answer(reply: str) -> str | None:
    """The text after the first "Final Answer" (None when absent or empty), as upstream."""
    if _THINK_END in reply:
        reply = reply.split(_THINK_END)[1]  # the part after the FIRST marker, as upstream
    found = _FINAL.search(reply)
    return found.group(1) or None if found else None


@rule(
    "videoreasonbench",
    "llm_judge",
    source="llyx97/video_reason_bench eval_huggingface.py evaluate / evaluate_operation "
    "(utils/eval_utils.py extract_final_answer)",
)
def videoreasonbench(prediction: str, target: Any, sample: Sample) -> Score:
    """VideoReasonBench: no "Final Answer" = incorrect; else judged (simulated: unscored)."""
    answer = final_answer(prediction or "")
    simulated = bool(sample.fields.get("needs_simulation"))
    if answer is None:
        meta = {"format": 0.0, "extraction": "no Final Answer"}
        return Score(0.0, None, "no text after 'Final Answer': rated incorrect upstream", meta)
    if simulated:
        why = "not scored: rated upstream by simulating the extracted operations"
        return Score(None, answer, why, {"format": 1.0, "extraction": "Final Answer"})
    from evalkit.scoring.judge import current_judge

    judge = current_judge()
    if judge is None:
        return Score(None, answer, "not scored: no judge configured", {"format": 1.0})
    try:
        return judge.judge(sample, answer)
    except Exception as exc:  # timeouts, a closed loop: not the answer's fault
        return Score(None, answer, f"judge failed: {type(exc).__name__}: {exc}")
