"""MVBench's official answer check (OpenGVLab/Ask-Anything, video_chat2/mvbench.ipynb).

The notebook opens the assistant turn with ``Best option:(`` (``answer_prompt``, the
spec's ``assistant_prefix``); the model generates from ``inputs_embeds``, so ``answer``
decodes the continuation alone, which is what this rule is given
(``evalkit.scoring.prefill``). ``infer_mvbench`` keeps that continuation's first line
behind its own ``return_prompt='('`` (the prefix's last character, put back by the
notebook, hence by this rule; not the whole prefix) and compares it with the ground
truth ``(X) option text`` in ``check_ans``: the first space-separated token of the
prediction, lower-cased and with dots removed, must be a
SUBSTRING of ``(x)``, or ``(x)`` a substring of that token. Hence its quirks: an empty
reply becomes ``(``, a substring of every ``(x)``, and counts as right; so do ``a``,
``a.``, ``a)`` and ``B and C`` when the answer is B (only the first token is read).
"""

from __future__ import annotations

from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import meta, need_exact_gold_letter
from evalkit.scoring.types import Score

SOURCE = "OpenGVLab/Ask-Anything video_chat2/mvbench.ipynb check_ans (with infer_mvbench, answer)"


def official_prediction(reply: str) -> str:
    """The string the notebook scores: ``(`` + the first line of the continuation.

    ``answer`` cuts the decoded text at ``###`` and after the last ``Assistant:`` and
    strips it; ``infer_mvbench`` keeps the first line and prefixes ``return_prompt``.
    """
    text = reply.split("###")[0].split("Assistant:")[-1].strip()
    return "(" + text.strip().split("\n")[0]


@rule("mvbench", "multiple_choice", source=SOURCE, gameable=True)
def mvbench(prediction: str, target: Any, sample: Sample) -> Score:
    """Right when the first token of ``(``+continuation and ``(x)`` contain one another."""
    gold = need_exact_gold_letter(target, sample)
    pred_option = official_prediction(prediction).lower().split(" ")[0]
    gt_option = f"({gold.lower()})"
    ok = pred_option.replace(".", "") in gt_option or gt_option in pred_option
    why = f"first token {pred_option!r} {'matches' if ok else 'does not match'} {gt_option!r}"
    return Score(1.0 if ok else 0.0, pred_option, why, meta(gold, pred_option != "("))
