"""Closed-form answers: multiple choice (a letter) and boolean (yes/no)."""

from __future__ import annotations

import re
import string
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.extract import final_span, format_level, letter, reply_body
from evalkit.scoring.types import Score


def target_letter(target: Any, sample: Sample) -> str:
    """The target's option letter: a letter as given, an option's text mapped to its letter
    (evalkit's reader), else the text upper-cased."""
    t = str(target).strip()
    if len(t) == 1 and t.upper() in (sample.letters or string.ascii_uppercase):
        return t.upper()
    # Some datasets give the option text as target; map it back to its letter.
    got, _ = letter(t, sample.options, sample.letters)
    return got or t.upper()


# Rule (evalkit's robust rule): the option the reply picks, read as a person would
# (evalkit.scoring.options.letter), compared with the target letter. Each benchmark's own
# extraction, quirks included, is a named rule in evalkit.scoring.rules.
def multiple_choice(prediction: str, target: Any, sample: Sample) -> Score:
    """1 if the option letter the reply picks equals the target letter, else 0."""
    span = final_span(prediction)
    got, how = letter(span.text, sample.options, sample.letters, marked=span.marked)
    if got is None and not how and span.method == "answer_is":
        # "The answer is as follows:" then "**B. blue car**": the marker led nowhere
        got, how = letter(reply_body(prediction), sample.options, sample.letters)
    gold = target_letter(target, sample)
    meta = {"format": format_level(span, got is not None), "extraction": how, "target": gold}
    if got is None:
        why = "several option letters" if how == "ambiguous" else "no option letter found"
        return Score(0.0, None, f"{why} ({span.method})", meta)
    value = 1.0 if got == gold else 0.0
    return Score(value, got, f"letter {got} via {span.method}/{how}; target {gold}", meta)


# Words that answer yes/no as the first word of a reply ("Nope, the man ...").
_YES_WORDS = {"yes", "yeah", "yep", "yup", "true", "correct", "right", "是", "是的", "对", "对的"}
_YES_WORDS |= {"正确"}
_NO_WORDS = {"no", "nope", "nah", "false", "incorrect", "wrong", "否", "不是", "错", "错误"}
_NO_WORDS |= {"不对", "不正确", "没有"}
# Inside free text only words that cannot mean anything else ("turns right" is not yes).
_YES_FREE = {"yes", "yeah", "yep", "true", "是", "是的", "正确"}
_NO_FREE = {"no", "nope", "nah", "false", "否", "不是", "错误", "不正确"}
# Letters and digits count only as the whole answer ("1", "n."): inside free text they are
# noise, and a degenerate "0000 0000" must not read as "No".
_YES = _YES_WORDS | {"y", "1", "sure", "certainly", "definitely", "absolutely", "indeed"}
_YES |= {"of course", "i think so", "affirmative"}
_NO = _NO_WORDS | {"n", "0", "negative", "never", "not at all", "i don't think so"}
_WORD = re.compile(r"[a-z]+(?:'[a-z]+)?|[\u4e00-\u9fff]+")
_NO_PHRASE = re.compile(
    r"(?:absolutely|definitely|certainly|of course|surely|clearly|obviously)\s+not\b"
    r"|not\s+(?:at\s+all|really|quite|likely|true|correct)\b|i\s+don'?t\s+think\s+so\b"
    r"|that'?s\s+(?:wrong|incorrect|not\s+(?:right|correct|true))\b|no\s+way\b|never\b|(?:it\s+)?(?:doesn't|does\s+not)\s+(?:appear|seem|look)\s+(?:like\s+it\s+)?so\b"
)
# "Absolutely! The dog catches it." answers; "Certainly! Let me look at the video." is
# politeness before an answer that may never come.
_YES_PHRASE = re.compile(
    r"(?:absolutely|definitely|certainly|of course|indeed|yes)"
    r"(?:\s*[,!]?\s+yes\b|\s*,\s*it\s+(?:is|does|was|did|can|has)\b"
    r"|\s*[.!]+\s+(?!let\b|let's|here|i'll|i\s+will|i\s+can|to\s+answer))|i\s+think\s+so\b"
    r"|(?:that'?s|that\s+is)\s+(?:right|correct|true)\b|(?:it\s+)?(?:appears|seems|looks)\s+(?:like\s+it\s+|to\s+be\s+)?so\b"
)
# Not an answer either way: "No idea.", "Not sure", "There's no way to tell."
_UNSURE = re.compile(
    r"no\s+(?:idea|clue)\b|not\s+sure\b|unsure\b|hard\s+to\s+(?:say|tell)\b"
    r"|i\s+(?:don't|do\s+not)\s+know\b"
)
_CANT_TELL = re.compile(
    r"\b(?:no\s+way\s+to|cannot|can't|can\s+not|unable\s+to|impossible\s+to|not\s+possible\s+to)"
    r"\s+(?:tell|determine|know|say|be\s+sure|confirm)\b"
)


def yes_no(text: str) -> bool | None:
    """True/False for a yes/no answer; None if absent, hedged ("yes and no") or both."""
    t = str(text).strip().lower().rstrip(".!。！").strip()
    if t in _YES:
        return True
    if t in _NO:
        return False
    if _NO_PHRASE.match(t):  # "Absolutely not." before "absolutely" reads as yes
        return False
    if _YES_PHRASE.match(t):
        return True
    if _UNSURE.match(t):
        return None
    words = _WORD.findall(t[:2000])[:40]
    if words and words[0] in _YES_WORDS | _NO_WORDS:  # "Yes, because ..." decides on it
        if {"yes", "no"} <= set(words[:3]):  # "Yes and no", "yes or no?"
            return None
        return words[0] in _YES_WORDS
    if _CANT_TELL.search(t):
        return None
    found = set()
    for i, w in enumerate(words):
        if w in _YES_FREE or w in _NO_FREE:
            if w == "no" and i + 1 < len(words) and words[i + 1] == "doubt":
                continue  # "there is no doubt that ..." affirms
            negated = i > 0 and words[i - 1] == "not"  # "it is not true"
            found.add((w in _YES_FREE) != negated)
    return next(iter(found)) if len(found) == 1 else None


# Rule: normalised yes/no exact match (EasyVideoR1 "boolean" problem type; POPE-style
# yes/no accuracy).
def boolean(prediction: str, target: Any, sample: Sample) -> Score:
    """1 if the yes/no answer matches the target (yes/no/true/false/bool), else 0."""
    span = final_span(prediction)
    got = yes_no(span.text)
    gold = target if isinstance(target, bool) else yes_no(str(target))
    meta = {"format": format_level(span, got is not None), "target": gold}
    if got is None:
        return Score(0.0, None, f"no yes/no answer found ({span.method})", meta)
    answer = "yes" if got else "no"
    value = 1.0 if gold is not None and got == gold else 0.0
    return Score(value, answer, f"{answer} via {span.method}", meta)
