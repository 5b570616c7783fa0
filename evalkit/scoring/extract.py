"""Answer extraction shared by every scorer: find the final answer in messy model output.

The span is found first (``final_span``), then each scorer parses what it needs from it
(a letter, a number, a JSON object, a code block). Every function here is total: it
returns None (or an empty span) on anything it cannot read, and never raises.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from typing import Any

# How sure we are that the span is the model's intended final answer. Explicit markers
# (an <answer> tag, \boxed{}, "the answer is") count as a well-formed answer for the
# format reward; a bare reply counts half.
MARKED = ("answer_tag", "boxed", "answer_is")


@dataclass(frozen=True)
class Span:
    """The part of a prediction taken as its final answer, and how it was found."""

    text: str
    method: str  # answer_tag | boxed | answer_is | after_think | raw | empty

    @property
    def marked(self) -> bool:
        """True when an explicit answer marker delimited the span."""
        return self.method in MARKED


def format_level(span: Span, parsed: bool) -> float:
    """Format score: 1 = marked and parsable, 0.5 = parsable but unmarked, 0 = unparsable."""
    if not parsed:
        return 0.0
    return 1.0 if span.marked else 0.5


_ANSWER_TAG = re.compile(r"<answer>(.*?)(?:</answer>|$)", re.S | re.I)
_THINK_END = re.compile(r"</think>", re.I)
_THINK_OPEN = re.compile(r"<think>", re.I)
# "The final answer is: (B)", "the correct answer is B", "Answer: B", Chinese "答案是 B".
_ANSWER_IS = re.compile(
    r"(?:\b(?:the\s+)?(?:final|best|correct|right)?\s*answer\s*(?:is|:|would be|should be)"
    r"|答案(?:是|为|：|:))\s*[:：]?\s*(.+)",
    re.I | re.S,
)


def boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` (braces balanced), or None."""
    start = text.rfind("\\boxed")
    while start != -1:
        i = text.find("{", start)
        if i != -1 and text[start + 6 : i].strip() == "":
            depth = 0
            for j in range(i, len(text)):
                if text[j] == "{":
                    depth += 1
                elif text[j] == "}":
                    depth -= 1
                    if depth == 0:
                        return text[i + 1 : j]
        start = text.rfind("\\boxed", 0, start)
    return None


def final_span(prediction: str) -> Span:
    """The final answer span of a prediction, trying explicit markers before fallbacks."""
    text = prediction if isinstance(prediction, str) else str(prediction)
    tags = _ANSWER_TAG.findall(text)
    if tags and tags[-1].strip():
        inner = tags[-1].strip()
        inside = boxed(inner)  # "<answer>\boxed{3}</answer>" is still the answer 3
        return Span(inside.strip() if inside is not None else inner, "answer_tag")
    method = "raw"
    ends = list(_THINK_END.finditer(text))
    if ends:
        text, method = text[ends[-1].end() :], "after_think"
    elif _THINK_OPEN.search(text):
        # An unfinished thought is not an answer: nothing after it to take.
        return Span("", "empty")
    box = boxed(text)
    if box is not None and box.strip():
        return Span(box.strip(), "boxed")
    said = list(_ANSWER_IS.finditer(text))
    if said:
        tail = said[-1].group(1).strip()
        if tail:
            return Span(_first_sentence(tail), "answer_is")
    text = text.strip()
    return Span(text, method if text else "empty")


def _first_sentence(text: str) -> str:
    # "The answer is B. Because ..." -> "B"; keep decimals like "3.5" intact.
    m = re.match(r"(.+?)(?:\.(?:\s|$)|\n|$)", text, re.S)
    return (m.group(1) if m else text).strip()


# --- letters ---------------------------------------------------------------------------

_PAREN_LETTER = re.compile(r"^\(?\s*([A-J])\s*(?:\)|[.:\]](?!\d)|$)")
_OPTION_WORD = re.compile(r"\b(?:option|choice)\s*\(?([A-J])\)?\b", re.I)
_LONE_LETTER = re.compile(r"(?<![A-Za-z0-9'])\(?([A-J])\)?(?![A-Za-z0-9'])")


def _norm_text(s: str) -> str:
    return re.sub(r"[\s\W_]+", " ", s.lower()).strip()


def letter(span: str, options: list[str], letters: list[str]) -> tuple[str | None, str]:
    """The option letter a span names, and the rule that found it ("" if none/ambiguous).

    Order: a span that is just a letter ("C", "(C)", "C."); a leading "C. text"; "option C";
    the option text itself; a single lone capital letter within range. Several distinct
    letters are ambiguous and give None.
    """
    s = span.strip()
    if not s:
        return None, ""
    valid = set(letters) if letters else set("ABCDEFGHIJ")
    m = _PAREN_LETTER.match(s)
    bare = s.strip("().:] ")
    if m and m.group(1) in valid:  # "C", "(C)", "C.", "C) the dog"
        return m.group(1), "letter"
    if len(bare) == 1 and bare.upper() in valid:  # a lone lowercase "c"
        return bare.upper(), "letter"
    m = _OPTION_WORD.search(s)
    if m and m.group(1).upper() in valid:
        return m.group(1).upper(), "option_word"
    by_text = _by_option_text(s, options, letters)
    if by_text:
        return by_text, "option_text"
    found = {x for x in _LONE_LETTER.findall(s) if x in valid}
    # "I" and "A" are also English words; only trust them when nothing else is there.
    if len(found) == 1:
        only = next(iter(found))
        if only not in "AI" or len(s) <= 3:
            return only, "lone_letter"
    return None, "ambiguous" if len(found) > 1 else ""


def _by_option_text(s: str, options: list[str], letters: list[str]) -> str | None:
    norm = _norm_text(s)
    if not norm or not options:
        return None
    texts = [_norm_text(o) for o in options]
    exact = [letters[i] for i, t in enumerate(texts) if t and t == norm]
    if len(exact) == 1:
        return exact[0]
    contained = [letters[i] for i, t in enumerate(texts) if t and f" {t} " in f" {norm} "]
    # Prefer the longest contained option ("red car" over "car"); ties are ambiguous.
    if contained:
        longest = max(len(texts[letters.index(c)]) for c in contained)
        best = [c for c in contained if len(texts[letters.index(c)]) == longest]
        if len(best) == 1:
            return best[0]
    return None


# --- JSON and code ---------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|$)", re.S)


def json_object(text: str) -> Any:
    """The last JSON object or array in ``text`` (``` fences allowed), or None."""
    for lang, body in reversed(_FENCE.findall(text)):
        if lang.lower() in ("json", ""):
            value = _loads(body)
            if value is not None:
                return value
    value = _loads(text)
    if value is not None:
        return value
    # Scan bracket pairs from the end; a budget of attempts keeps hostile text cheap.
    budget = 32
    for open_ch, close_ch in (("{", "}"), ("[", "]")):
        end = text.rfind(close_ch)
        while end != -1 and budget > 0:
            start = text.rfind(open_ch, 0, end)
            while start != -1 and budget > 0:
                budget -= 1
                value = _loads(text[start : end + 1])
                if value is not None:
                    return value
                start = text.rfind(open_ch, 0, start)
            end = text.rfind(close_ch, 0, end)
    return None


def _loads(s: str) -> Any:
    s = s.strip()
    if not s or s[0] not in "{[":
        return None
    try:
        return json.loads(s)
    except (ValueError, RecursionError):
        try:  # models often emit Python literals: single quotes
            return json.loads(s.replace("'", '"'))
        except (ValueError, RecursionError):
            return None


def code_block(text: str, languages: tuple[str, ...] = ()) -> tuple[str, str]:
    """The last fenced code block (preferring ``languages``) and how it was found."""
    blocks = _FENCE.findall(text)
    for lang, body in reversed(blocks):
        if lang.lower() in languages:
            return body, "fence_" + lang.lower()
    if blocks:
        return blocks[-1][1], "fence"
    return text.strip(), "raw"
