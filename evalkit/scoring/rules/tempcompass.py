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

``tempcompass+judge`` is the scripts' default path: the same rules, and for a reply no
rule matches, gpt-3.5-turbo-1106 asked with the scripts' own prompt (``JUDGE_PROMPTS``,
verbatim) and rated by ``llm_output_to_rating`` (``evalkit.scoring.judge_fallback``). The
authors sample the judge at temperature 1.0 (top_p 1, presence_penalty 1, max_tokens 128)
and retry up to 10 times on a reply naming neither verdict, then rate 0; evalkit asks the
configured judge with its own decoding, once, and rates such a reply 0.
"""

from __future__ import annotations

from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.judge_fallback import JudgeFallback, judge_rule
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import meta, need_exact_gold_letter, option_text, yes_no_target
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
        letter = need_exact_gold_letter(target, sample)
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


# The judge prompts of the default (LLM) path, verbatim: prompt_templates.py of
# llyx97/TempCompass at e1b463166400633e6061962d890a9ae85db29f70 (the ``\`` line
# continuations of its triple-quoted strings joined), and the f-string each eval script
# builds from them (eval_multi-choice.py, eval_yes_no.py, eval_caption_matching.py main).
JUDGE_PROMPTS = {
    "multi-choice": (  # multi_choice_evaluation_prompt
        "\nYou will receive a multi-choice question, the ground-truth answer and the prediction "
        "from a question answering (QA) model. Your task is to determine whether QA model "
        "prediction is correct, based on the question and ground-truth answer. If the "
        'prediction is correct, respond "Correct". If the prediction is incorrect, respond '
        '"Incorrect".\n'
    ),
    "yes_no": (  # yes_no_evaluation_prompt
        "\nYou will receive a Yes/No question, the ground-truth answer and the prediction from "
        "a question answering (QA) model. Your task is to determine whether QA model "
        "prediction is correct, based on the question and ground-truth answer. If the "
        'prediction is correct, respond "Correct". If the prediction is incorrect, respond '
        '"Incorrect".\n'
    ),
    "caption_matching": (  # caption_matching_evaluation_prompt
        "\nYou will receive a caption matching question, the ground-truth answer and the "
        "prediction from a question answering (QA) model. Your task is to determine whether QA "
        "model prediction is correct, based on the question and ground-truth answer. If the "
        'prediction is correct, respond "Correct". If the prediction is incorrect, respond '
        '"Incorrect".\n'
    ),
}
_HEADS = {
    "multi-choice": "Multi-Choice Question",
    "yes_no": "Yes/No Question",
    "caption_matching": "Caption Matching Question",
}
# utils/eval_utils.py get_llm_output: the system prompt when the scripts pass none
JUDGE_SYSTEM = "You are an AI assistant for question answering."


def _format(sample: Sample) -> str:
    if _caption_lines(sample) is not None:
        return "caption_matching"
    return "yes_no" if sample.task_type == "boolean" else "multi-choice"


def judge_prompt(sample: Sample, prediction: str) -> str:
    """The eval script's prompt: base prompt, the released question, its answer, the reply."""
    fmt = _format(sample)
    question = str(sample.fields.get("released_question") or sample.question)
    answer = str(sample.fields.get("answer_line") or sample.target)
    return (
        f"{JUDGE_PROMPTS[fmt]}\n{_HEADS[fmt]}:\n{question}\nGround-Truth Answer: {answer}\n"
        f"Model Prediction: {_clean(prediction)}"
    )


def judge_rating(reply: str) -> float | None:
    """utils/eval_utils.py llm_output_to_rating (None where its assert fails)."""
    if "Correct" not in reply and "Incorrect" not in reply:
        return None
    if reply.startswith("Correct"):
        return 1.0
    if reply.startswith("Incorrect"):
        return 0.0
    return 1.0 if "Incorrect" not in reply else 0.0


JUDGE = JudgeFallback(
    base="tempcompass",
    prompt=judge_prompt,
    parse=lambda text: judge_rating(text.strip()),  # get_llm_output strips the content
    undecided=lambda s: s.metadata.get("match_success") is False,
    unreadable=0.0,  # get_eval_result: after its retries, rating 0
    system=JUDGE_SYSTEM,
    max_tokens=128,
)
judge_rule(
    "tempcompass+judge",
    "multiple_choice",
    "boolean",
    fallback=JUDGE,
    source=f"{REPO} eval_multi-choice.py, eval_yes_no.py, eval_caption_matching.py main "
    "(LLM path); prompt_templates.py; utils/eval_utils.py get_eval_result",
)
