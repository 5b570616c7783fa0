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

from evalkit.scoring.options import letter

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
    r"(?:\b(?:the\s+)?(?:final|best|correct|right)?\s*answer\s*(?:is\b|:|would be|should be)"
    r"|答案(?:是|为|：|:))\s*[:：]?",
    re.I,
)
# "which answer is correct" asks; it does not answer.
_ASKING = re.compile(r"\b(?:which|what|whose|whether)(?:\s+\w+)?\s*$", re.I)
# A model that keeps going after its answer invents the next turn ("Question: ...
# Answer: Yes", "Human: ..."): that text is not its answer to this question. A turn
# starts a line or follows a finished sentence.
_TURN = re.compile(
    r"(?i:question(?:[ \t]*\d+)?|human|user|q|instruction)\**[ \t]*[:：]"
    r"|<\|(?:im_start|im_end|endoftext|eot_id)\|>"
)
_TURN_START = re.compile(r"(?:\n|[.!?。][ \t]+)[ \t]*(?:#+[ \t]*)?\**$")


_BOXED = re.compile(r"\\boxed\s*\{")
_BRACE = re.compile(r"[{}]")


def boxed(text: str) -> str | None:
    r"""Content of the last ``\boxed{...}`` whose braces close (balanced), or None."""
    opens = [m.end() - 1 for m in _BOXED.finditer(text)]
    if not opens:
        return None
    # Match every brace once (a stack, one pass): linear even for "\boxed{" * 20000.
    closing: dict[int, int] = {}
    stack: list[int] = []
    for m in _BRACE.finditer(text, opens[0]):
        if m.group() == "{":
            stack.append(m.start())
        elif stack:
            closing[stack.pop()] = m.start()
    for i in reversed(opens):
        if i in closing:
            return text[i + 1 : closing[i]]
    return None


def reply_body(prediction: str) -> str:
    """The reply after its thinking, up to an invented continuation ("Question: ...").

    Empty for an unfinished ``<think>``: a thought cut short is not an answer.
    """
    text = prediction if isinstance(prediction, str) else str(prediction)
    cut, end = _body(text)
    if not end and _THINK_OPEN.search(text):
        return ""
    return cut[end:].strip()


def final_span(prediction: str) -> Span:
    """The final answer span of a prediction, trying explicit markers before fallbacks.

    The last ``<answer>`` tag wins, then the last ``\\boxed{}``, then the LAST "the answer
    is" (a reply that changes its mind ends on its answer), then the reply itself.
    """
    text = prediction if isinstance(prediction, str) else str(prediction)
    cut, end = _body(text)
    tags = _ANSWER_TAG.findall(cut)
    if tags and tags[-1].strip():
        inner = tags[-1].strip()
        inside = boxed(inner)  # "<answer>\boxed{3}</answer>" is still the answer 3
        return Span(inside.strip() if inside is not None else inner, "answer_tag")
    if not end and _THINK_OPEN.search(text):
        return Span("", "empty")  # an unfinished thought: nothing after it to take
    method = "after_think" if end else "raw"
    text = cut[end:].strip()
    box = boxed(text)
    if box is not None and box.strip():
        return Span(box.strip(), "boxed")
    for m in reversed(list(_ANSWER_IS.finditer(text))):
        if _ASKING.search(text, max(0, m.start() - 24), m.start()):
            continue
        tail = _first_sentence(text[m.end() :].lstrip(" \t\n*_:：#>"))
        if tail:
            return Span(tail, "answer_is")
    return Span(text, method if text else "empty")


def _body(text: str) -> tuple[str, int]:
    """``text`` up to an invented continuation, and where its thinking ends (0: none)."""
    end = text.rfind("</think>") + 8
    if end == 7:  # not found; "</THINK>" is rare, so the regex runs only then
        last = None
        for last in _THINK_END.finditer(text):  # noqa: B007
            pass
        end = last.end() if last else 0
    for m in _TURN.finditer(text, end):
        at = m.start()
        turn = m.group().startswith("<|") or _TURN_START.search(text, max(end, at - 16), at)
        if turn and text[end:at].strip():  # a question restated first is not a new turn
            return text[:at], end
    return text, end


def _first_sentence(text: str) -> str:
    # "The answer is B. Because ..." -> "B"; keep decimals like "3.5" intact.
    m = re.match(r"(.+?)(?:\.(?:\s|$)|。|\n|$)", text, re.S)
    return (m.group(1) if m else text).strip()


__all__ = [
    "MARKED",
    "Span",
    "boxed",
    "code_block",
    "final_span",
    "format_level",
    "json_object",
    "letter",
    "reply_body",
]

# --- JSON and code ---------------------------------------------------------------------

_FENCE = re.compile(r"```[ \t]*([A-Za-z0-9_+-]*)[^\n]*\n(.*?)(?:```|$)", re.S)


def search_closed(pattern: re.Pattern[str], text: str, closing: re.Pattern[str]) -> Any:
    """``pattern.search(text)`` for a pattern whose every match ends with ``closing``
    (``<answer>(.*?)</answer>``), in linear time.

    No match can end past the last ``closing``, so the search stops there; unbounded, each
    start after it (``<answer>`` repeated, never closed) rescans the rest of the text.
    """
    end = -1
    for m in closing.finditer(text):
        end = m.end()
    return None if end < 0 else pattern.search(text, 0, end)


def fences(text: str) -> list[tuple[str, str]]:
    """``_FENCE.findall(text)``: (language, body) of each fenced block, in linear time.

    ``findall`` itself tries every backtick after the last newline, each scanning to the
    end of the text for a newline it cannot find (20k fences, seconds). Only those starts
    fail (any earlier one reaches a newline), so starts are tried up to there only.
    """
    last_newline = text.rfind("\n")
    found: list[tuple[str, str]] = []
    i = text.find("```")
    while i != -1 and i + 3 <= last_newline:
        m = _FENCE.match(text, i)
        if m is None:
            i = text.find("```", i + 1)
            continue
        found.append((m.group(1), m.group(2)))
        i = text.find("```", m.end())
    return found


def json_object(text: str) -> Any:
    """The last JSON object or array in ``text`` (``` fences allowed), or None."""
    for lang, body in reversed(fences(text)):
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
    blocks = fences(text)
    for lang, body in reversed(blocks):
        if lang.lower() in languages:
            return body, "fence_" + lang.lower()
    if blocks:
        return blocks[-1][1], "fence"
    return text.strip(), "raw"
