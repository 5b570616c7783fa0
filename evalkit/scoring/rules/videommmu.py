"""Video-MMMU's official answer extraction (EvolvingLMMs-Lab/VideoMMMU, lmms_eval/tasks/
videommmu/utils.py: ``videoperception_process_results`` with the MMMU helpers
``parse_multi_choice_response`` / ``eval_multi_choice`` and ``parse_open_response`` /
``eval_open``).

Multiple choice: strip , . ! ? ; : ' off the ends (one character kind after another),
pad with spaces, then collect letters written "X." or "X:" (both scans), else "(X)", else
"X " (a letter followed by a space); with none and more than five words, options whose
text appears in the reply. Several candidates: the one whose marker (of the first kind
that produced candidates) occurs last. None: no answer (wrong).

Open questions: MMMU's key-phrase parse. The lower-cased reply is cut at newlines; from
each line the text after the indicator ("is ", "so ", "answer ", ..., "=" on the last
line) that leaves the shortest tail is kept (an empty tail restarts the search, as the
official loop's ``if not shortest_key_response`` does), plus every number in it; numbers are rounded
to 2 decimals. Correct if a number equals the normalised answer, or the answer text is a
substring of a kept string.

An empty reply is "API Error" there and ``videoperception_aggregate_results`` drops it
from the denominator: here it is not scored (never 0, never 1).
"""

from __future__ import annotations

import re
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.rules import rule
from evalkit.scoring.rules._options import lenient_gold_letter
from evalkit.scoring.rules._reasoning import letter_verdict, not_counted
from evalkit.scoring.types import Score

_SOURCE = "EvolvingLMMs-Lab/VideoMMMU lmms_eval/tasks/videommmu/utils.py"
_DROPPED = ("", "API Error")  # parsed to "API Error", filtered out before the mean
_MARKERS = (("{}.", "period"), ("{}:", "colon"))


def _candidates(text: str, letters: list[str], options: list[str]) -> tuple[list[str], str]:
    """Candidate letters and the kind of marker that produced them."""
    found: list[str] = []
    kind = ""
    for marker, name in _MARKERS:  # both scans run; the period kind wins the tie-break
        hits = [x for x in letters if marker.format(x) in text]
        found += hits
        kind = kind or (name if hits else "")
    if not found:
        found, kind = [x for x in letters if f"({x})" in text], "bracket"
    if not found:
        found, kind = [x for x in letters if f"{x} " in text], "space"
    if not found and len(text.split()) > 5:
        low = text.lower()
        found, kind = (
            [x for x, o in zip(letters, options, strict=False) if o.lower() in low],
            "text",
        )
    return found, kind


def mmmu_choice(reply: str, letters: list[str], options: list[str]) -> tuple[str | None, str]:
    """The letter MMMU's ``parse_multi_choice_response`` picks, and how (None = not found)."""
    text = reply
    for ch in ",.!?;:'":
        text = text.strip(ch)
    text = f" {text} "
    found, kind = _candidates(text, letters, options)
    if not found:
        return None, "no candidate"
    if len(found) == 1:
        return found[0], kind
    marker = {"period": "{}.", "colon": "{}:", "bracket": "({})", "space": " {} "}.get(kind)
    if marker is None:  # option texts: the one whose text occurs last
        text_of = dict(zip(letters, options, strict=False))
        pos = [text.lower().rfind(text_of[x].lower()) for x in found]
    else:
        pos = [text.rfind(marker.format(x)) for x in found]
    return found[pos.index(max(pos))], f"{kind}/last of {len(found)}"


_INDICATORS = (
    "could be ", "so ", "is ", "thus ", "therefore ", "final ", "answer ", "result ",
    "are ", "in total ", "total ", "identify ", "recognize ", "calculated as ",
    "counted as ", "measured as ", "observed as ", "concluded as ", "found to be ",
    "equals ", "determined to be ", "number of ", "value is ", "adds up to ", "have ", "has ",
)  # fmt: skip
_TRIVIAL = {":", ",", ".", "!", "?", ";", "'"}
_NUM_COMMAS = re.compile(r"-?\b\d{1,3}(?:,\d{3})+\b")
# MMMU's number patterns, with a ``(?<!\d)`` guard before each part that starts with a
# digit: unguarded, a run of digits costs time quadratic in its length (8k digits, 4 s).
# No match starts inside a digit run (from the run's start the same match exists and is
# found first; none ends inside a run), so ``findall`` returns the same
# (tests/test_scoring_linear_rules.py checks both on the same inputs).
_NUM_SCI = re.compile(r"-?(?<!\d)\d+(?:\.\d+)?[eE][+-]?\d+")
_NUM_SIMPLE = re.compile(r"-?(?:(?<!\d)\d+\.\d+|\.\d+|(?<!\d)\d+\b)(?![eE][+-]?\d+)(?![,\d])")


def _key_phrases(reply: str) -> list[str]:
    """Per line, the tail after the indicator leaving the shortest one, as MMMU's loop
    keeps it: ``if not shortest`` restarts it, so an empty tail (a line ending in an
    indicator and a space) is replaced by the next indicator's tail, however long."""
    text = reply.strip().strip(".").lower()
    # MMMU also splits at ". " before a capital, which never matches lower-cased text.
    lines = text.split("\n")
    keys: list[str] = []
    for i, line in enumerate(lines):
        indicators = _INDICATORS + (("=",) if i == len(lines) - 1 else ())
        shortest = ""
        for tail in (line.split(ind)[-1].strip() for ind in indicators if ind in line):
            if not shortest or len(tail) < len(shortest):
                shortest = tail
        if shortest and shortest not in _TRIVIAL:
            keys.append(shortest)
    return keys or [text]


def _normalise(value: str) -> list[Any]:
    """MMMU ``normalize_str``: a number rounded to 2 places, else lower-cased text."""
    value = value.strip()
    try:
        return [round(float(value.replace(",", "")), 2)]
    except ValueError:
        pass
    value = value.lower()
    return [" " + value, value + " "] if len(value) == 1 else [value]


def mmmu_open_predictions(reply: str) -> list[Any]:
    """MMMU ``parse_open_response``: key phrases, the numbers in them, normalised."""
    keys = _key_phrases(reply)
    found = list(keys)
    for key in keys:
        found += _NUM_COMMAS.findall(key) + _NUM_SCI.findall(key) + _NUM_SIMPLE.findall(key)
    return list(dict.fromkeys(x for item in found for x in _normalise(item)))


def mmmu_open_correct(gold: str, predictions: list[Any]) -> bool:
    """MMMU ``eval_open``: a number equal to the answer, or the answer inside a string."""
    answers = _normalise(gold)
    for pred in predictions:
        if isinstance(pred, str):
            if any(isinstance(a, str) and a in pred for a in answers):
                return True
        elif pred in answers:
            return True
    return False


@rule(
    "videommmu", "multiple_choice", source=f"{_SOURCE} parse_multi_choice_response", gameable=True
)
def videommmu_choice(prediction: str, target: Any, sample: Sample) -> Score:
    """Video-MMMU multiple choice: MMMU's marker scan, last marker wins; empty = not counted."""
    if prediction in _DROPPED:
        return not_counted("empty reply: Video-MMMU's aggregate drops it ('API Error')")
    got, how = mmmu_choice(prediction, sample.letters, sample.options)
    return letter_verdict(got, lenient_gold_letter(target, sample), how)


@rule("videommmu", "math", source=f"{_SOURCE} parse_open_response / eval_open", gameable=True)
def videommmu_open(prediction: str, target: Any, sample: Sample) -> Score:
    """Video-MMMU open question: MMMU's key-phrase parse and eval_open; empty = not counted."""
    if prediction in _DROPPED:
        return not_counted("empty reply: Video-MMMU's aggregate drops it ('API Error')")
    preds = mmmu_open_predictions(prediction)
    ok = mmmu_open_correct(str(target), preds)
    meta = {"format": 1.0, "target": str(target), "parsed": [str(p) for p in preds][:20]}
    return Score(1.0 if ok else 0.0, preds[0] if preds else None, f"parsed {preds[:5]}", meta)
