"""TempCompass's official rule-based answer matching (llyx97/TempCompass).

Each format has its own script: ``eval_multi-choice.py`` (main), ``eval_yes_no.py``
(``extract_pred``) and ``eval_caption_matching.py`` (``eval_rule``). Every one first
applies hand-written matching rules to the reply (``</s>`` removed, stripped); when none
applies it asks gpt-3.5-turbo-1106 to rate the reply, or, with ``--disable_llm``, counts it
wrong. These rules are that ``--disable_llm`` path: an unmatched reply scores 0 with
``metadata["match_success"] = False`` (the official match-rate), never a judge's verdict.

Caption matching lists its options as ``Caption A: ..``, ``Sentence B: ..`` or
``Option 2: ..`` lines and the rule reads those labels; the adapter keeps the original
lines and answer in ``fields["option_lines"]`` / ``fields["answer_line"]``.
"""

from __future__ import annotations

from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._mc_b import meta, need_gold_letter, option_text, yes_no_target
from evalkit.scoring.types import Score

REPO = "llyx97/TempCompass"


def _clean(reply: str) -> str:
    return reply.replace("</s>", "").strip()


def _multi_choice(pred: str, answer: str) -> int | None:
    """eval_multi-choice.py main: 1/0 from the hand-written rules, None = no rule matched."""
    if pred == answer:
        return 1
    if pred in ("A", "B", "C", "D"):
        return int(pred == answer[0])
    if any(pred.startswith(p) for p in ("A.", "B.", "C.", "D.")):
        return int(pred.split(".")[0] == answer[0])
    if any(pred.startswith(p) for p in ("A)", "B)", "C)", "D)")):
        return int(pred.split(")")[0] == answer[0])
    return None


def caption_match(pred: str, lines: list[str], answer: str) -> int | None:
    """eval_caption_matching.py eval_rule: 1/0, None = "fail" (no option recognised).

    The reply must equal a whole option line, an option sentence (also after ``) ``), or
    an option label with or without its word (``Caption A`` / ``A``, dots ignored); later
    kinds override earlier ones, and the recognised piece is compared with the answer
    line, its label, its sentence and its bare label.
    """
    sents = [line.split(": ")[1] for line in lines]
    heads = [line.split(": ")[0] for line in lines]
    bare = [
        h.replace("Sentence ", "").replace("Option ", "").replace("Caption ", "") for h in heads
    ]
    got = None
    for line in lines:
        if line == pred:
            got = line
    for sent in sents:
        if sent == pred or (") " in pred and sent == pred.split(") ")[1]):
            got = sent
    for ind in heads + bare:
        if ind == pred or ind == pred.replace(".", ""):
            got = ind
    if got is None:
        return None
    head = answer.split(": ")[0]
    right = (answer, answer.split(":")[0], answer.split(": ")[1], head.split()[1])
    return int(got in right)


def _caption_lines(sample: Sample) -> tuple[list[str], str] | None:
    lines = sample.fields.get("option_lines")
    answer = sample.fields.get("answer_line")
    if isinstance(lines, list | tuple) and answer:
        return [str(x) for x in lines], str(answer)
    return None


@rule(
    "tempcompass",
    "multiple_choice",
    source=f"{REPO} eval_multi-choice.py main; eval_caption_matching.py eval_rule (--disable_llm)",
)
def tempcompass_choice(prediction: str, target: Any, sample: Sample) -> Score:
    """Multi-choice (exact answer, bare letter, ``A.``/``A)``) or caption matching (labels)."""
    pred = _clean(prediction)
    caption = _caption_lines(sample)
    if caption is not None:
        lines, answer = caption
        got = caption_match(pred, lines, answer)
        gold: Any = answer
    else:
        letter = need_gold_letter(target, sample)
        answer = str(sample.fields.get("answer_line") or f"{letter}. {option_text(sample, letter)}")
        got = _multi_choice(pred, answer)
        gold = letter
    if got is None:
        why = "no matching rule applies (the official script would ask its LLM; disabled: 0)"
        return Score(0.0, None, why, meta(gold, False, match_success=False))
    return Score(
        float(got), pred, f"rule match against {answer!r}", meta(gold, True, match_success=True)
    )


@rule("tempcompass", "boolean", source=f"{REPO} eval_yes_no.py extract_pred (--disable_llm)")
def tempcompass_yes_no(prediction: str, target: Any, sample: Sample) -> Score:
    """``yes`` / ``no`` when the lower-cased reply STARTS with it (``not sure`` reads no)."""
    pred = _clean(prediction).lower()
    got = "yes" if pred.startswith("yes") else "no" if pred.startswith("no") else None
    # The release writes "yes" / "no"; other spellings of a target (True, "Yes") map onto them.
    gold = (yes_no_target(target) or str(target)).lower()
    if got is None:
        why = "reply starts with neither yes nor no (official: LLM fallback; disabled: 0)"
        return Score(0.0, None, why, meta(gold, False, match_success=False))
    ok = got == gold
    return Score(1.0 if ok else 0.0, got, f"{got} vs {gold}", meta(gold, True, match_success=True))
