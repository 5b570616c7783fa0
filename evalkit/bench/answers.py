"""Parsers of a row's options and answer: option letters, wrapped solutions, targets."""

from __future__ import annotations

import json
import re
from typing import Any

from evalkit.sample import MAX_OPTIONS, OPTION_LETTERS

# "A. text", "A: text", "(A) text", "A) text", "[A] text": the prefixes releases use.
_OPTION_PREFIX = re.compile(
    r"^\s*(?:\(([A-Z])\)|\[([A-Z])\]|([A-Z])\s*[.:)\uff0e\uff1a])\s?(.*)$", re.S
)


def split_option(text: str) -> tuple[str | None, str]:
    """``"B. Art Deco"`` -> ``("B", "Art Deco")``; no letter prefix -> ``(None, text)``."""
    m = _OPTION_PREFIX.match(text)
    if not m:
        return None, text.strip()
    letter = m.group(1) or m.group(2) or m.group(3)
    return letter, m.group(4).strip()


NO_OPTION = "@"
"""The target of a row whose answer is none of its options, where the official code keeps
such rows (MLVU's qa_template: ``chr(ord('A') + -1)``): no reply letter equals it."""


def parse_options(raw: Any, *, keep_prefixes: bool = False) -> list[str]:
    """Option texts in letter order, prefixes stripped (``keep_prefixes``: as written).

    Releases sometimes list lettered options out of order (LongVideo-Reason has
    ``["D. ...", "A. ...", ...]`` while the answer letter refers to the label), so when
    every option carries a distinct letter A.. the list is re-ordered by letter.
    Letters run A-Z (Video-MMMU has 11-option questions, A-K). Raises ValueError naming
    the fault when the letters are inconsistent (a repeated letter, a gap, or a mix of
    lettered and unlettered options); loaders turn that into an invalid row.
    """
    if raw is None:
        return []
    if hasattr(raw, "tolist"):  # numpy arrays from parquet
        raw = raw.tolist()
    if isinstance(raw, str):
        # One string with an "A. ..." line per option (Video-MME-v2's test.parquet).
        lines = [x for x in raw.split("\n") if x.strip()]
        _check_count(len(lines))
        if len(lines) < 2 or any(split_option(x)[0] is None for x in lines):
            raise ValueError(f"options string {raw[:40]!r} is not one 'A. ...' line per option")
        raw = lines
    if isinstance(raw, dict):  # {"A": text, ...} (MMVU's choices)
        _check_count(len(raw))
        keys = sorted(raw)
        if keys != list(OPTION_LETTERS[: len(keys)]):
            raise ValueError(f"option keys {keys} are not letters A..")
        return [str(raw[k]).strip() for k in keys]
    _check_count(len(raw))
    items = [str(x) for x in raw]
    if keep_prefixes:  # the official code sends these texts verbatim: so do we
        return [x.strip() for x in items]
    parsed = [split_option(x) for x in items]
    letters = [p[0] for p in parsed]
    if all(letter is None for letter in letters):
        return [p[1] for p in parsed]
    if any(letter is None for letter in letters):
        bare = [items[i] for i, x in enumerate(letters) if x is None][:2]
        raise ValueError(f"some options carry a letter prefix and some do not (e.g. {bare})")
    expected = list(OPTION_LETTERS[: len(items)])
    repeated = sorted({x for x in letters if letters.count(x) > 1})  # type: ignore[type-var]
    if repeated:
        raise ValueError(f"option letters {letters} repeat {', '.join(repeated)}")  # type: ignore[arg-type]
    if sorted(letters) != expected:  # type: ignore[type-var]
        missing = [x for x in expected if x not in letters]
        raise ValueError(
            f"option letters {letters} are not {expected[0]}..{expected[-1]} "
            f"(missing {', '.join(missing)})"
        )
    by_letter = dict(zip(letters, (p[1] for p in parsed), strict=True))
    return [by_letter[x] for x in expected]


def _check_count(n: int) -> None:
    if n > MAX_OPTIONS:
        raise ValueError(f"{n} options: at most {MAX_OPTIONS}, one per letter A-Z")


def split_question_options(question: str) -> tuple[str, list[str]]:
    """Cut trailing option lines (``(A) text``, ``A. text``) off a question.

    LVBench, MotionBench and TempCompass write the options into the question text.
    """
    lines = question.rstrip().split("\n")
    opts: list[tuple[str, str]] = []
    while lines:
        letter, text = split_option(lines[-1])
        if letter is None:
            break
        opts.insert(0, (letter, text))
        lines.pop()
        if letter == "A":
            # the first option: a line above it ("Q: ...", "I. Intro") is question text,
            # even when it happens to look lettered now that letters run to Z
            break
    letters = [x[0] for x in opts]
    if not opts or letters != list(OPTION_LETTERS[: len(opts)]):
        raise ValueError("no 'A. ...' / '(A) ...' option lines at the end of the question")
    return "\n".join(lines).strip(), [x[1] for x in opts]


_LETTER = re.compile(r"^\s*[\(\[]?([A-Z])[\)\].:]?\s*$")


def parse_letter(raw: Any, n_options: int) -> str:
    """Normalise a written answer letter (``"C"``, ``"(C)"``, ``"C."``) and check its range."""
    m = _LETTER.match(str(raw))
    if not m:
        letter, _ = split_option(str(raw))
        if letter is None:
            raise ValueError(f"answer {raw!r} is not an option letter")
    else:
        letter = m.group(1)
    if n_options and OPTION_LETTERS.index(letter) >= n_options:
        raise ValueError(f"answer {letter!r} is beyond the {n_options} options")
    return letter


_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S)
_THINK = re.compile(r"<think>(.*?)</think>", re.S)


def unwrap_solution(raw: Any) -> str:
    """The answer inside a solution string.

    ``<answer>X</answer>`` -> ``X``. Some files wrap it otherwise: EasyVideoR1's
    Charades-STA rows read ``<think>{"time": [...]}</think><[PLHD..]>`` (the answer is the
    JSON inside the think tags), and caption rows carry the bare text.
    """
    text = "" if raw is None else str(raw)
    m = _ANSWER.search(text)
    if m:
        return m.group(1).strip()
    m = _THINK.search(text)
    if m and m.group(1).strip():
        return m.group(1).strip()
    return text.strip()


def maybe_json(text: str) -> Any:
    """``text`` decoded as JSON when it is a JSON object or list, else unchanged."""
    t = text.strip()
    if t[:1] in "[{":
        try:
            return json.loads(t)
        except json.JSONDecodeError:
            return text
    return text


def to_number(text: Any) -> float | int:
    """A numeric answer (``"58"`` -> 58, ``"2.1"`` -> 2.1); ValueError otherwise."""
    if isinstance(text, bool):
        raise ValueError(f"{text!r} is not a number")
    if isinstance(text, int | float):
        return text
    s = str(text).strip()
    try:
        return int(s)
    except ValueError:
        return float(s)


# Target parsers of the task types (``evalkit.tasks``: ``TaskType.target``): a target
# written as text in a data file -> the value the task type's scorer compares against.


def choice_target(answer: str, n_options: int) -> str:
    """A multiple-choice target: its option letter, checked against the options."""
    return parse_letter(answer, n_options)


def number_target(answer: str, n_options: int = 0) -> float | int:
    """A numeric target (counting, regression)."""
    return to_number(answer)


def yes_no_target(answer: str, n_options: int = 0) -> str:
    """A Yes/No target (``yes``/``true`` -> ``"Yes"``, ``no``/``false`` -> ``"No"``)."""
    low = answer.strip().lower()
    if low not in ("yes", "no", "true", "false"):
        raise ValueError(f"{answer!r} is not yes/no")
    return "Yes" if low in ("yes", "true") else "No"


def grounding_target(answer: str, n_options: int = 0) -> Any:
    """A grounding target: JSON (a span, boxes, or both)."""
    value = maybe_json(answer)
    if isinstance(value, str):
        raise ValueError(f"grounding answer {answer[:60]!r} is not JSON")
    return value


def temporal_target(answer: str, n_options: int = 0) -> Any:
    """A temporal-grounding target; Charades-STA rows wrap the span: {"time": [s, e], ...}."""
    value = grounding_target(answer)
    return value.get("time", value) if isinstance(value, dict) else value
