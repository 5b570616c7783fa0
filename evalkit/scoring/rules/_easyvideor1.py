"""EasyVideoR1's answer extraction and IoU helpers, written from its evaluation script.

Source: cyuQ1n/EasyVideoR1, eval/code/AsyncLLMEngine_eval_videobench_qwen3vl_multi_task.py
(functions ``extract_between``, ``extract_answer``, ``normalize_number``, ``iou_1d``,
``iou_2d``, ``mean_iou_over_intersection``, ``mean_relative_accuracy``). The behaviour is
reproduced step by step, oddities included; each is named where it happens.
"""

from __future__ import annotations

import json
import re
from typing import Any

import numpy as np

from evalkit.scoring.extract import search_closed

OPTION_SET = "ABCDEFGHIJ"
GROUNDING = ("temporal grounding", "spatial-temporal grounding")

# Its letter class is upper case only, but most patterns are searched with IGNORECASE, so
# "the answer is a cat" yields "A" (kept: that is what the script does).
_L = "[A-J]"
_LEAD = r"(?:Therefore|So|Thus|Hence|Finally)[,\s]*"
_WHICH = r"(?:the\s+)?(?:final\s+|best\s+|correct\s+)?answer\s+is[:\s]+"
_FINAL_LETTER = (
    re.compile(_LEAD + _WHICH + f"({_L})\\b", re.I),
    re.compile(_WHICH + f"({_L})\\b", re.I),
    re.compile(f"答案[是为：:]\\s*({_L})\\b", re.I),
)
_FINAL_TEXT = re.compile(_LEAD + _WHICH + "(.+)", re.I | re.S)
_AFTER_THINK = re.compile(r"</think>\s*(.*?)$", re.S | re.I)
_LEADING_LETTER = re.compile(f"^({_L})(?:\\s*[.。\\):]|$|\\s)")
_ANSWER_IS = re.compile(f"answer\\s+is[:\\s]+({_L})\\b", re.I)
_CHOOSE = re.compile(f"(?:I\\s+)?(?:choose|select|pick)\\s+(?:option\\s+)?({_L})\\b", re.I)
_LINE_LETTER = re.compile(f"^({_L})\\s*[.):\\s。]?\\s*$")
_LINE_END_LETTER = re.compile(f"\\b({_L})\\s*[.)]?\\s*$")  # no IGNORECASE here
_OPEN_THINK = re.compile("<think>", re.I)
_CLOSE_THINK = re.compile("</think>", re.I)

# The script's lazy regexes (<tag>\s*(.*?)\s*</tag>, <think>.*?</think>, \{.*\}) rescan
# the rest of the reply from every opening that has no closing after it: quadratic on a
# degenerate reply that repeats "<think>". The scans below find the same matches in one
# pass: the leftmost opening and the first closing after it (none after it means none
# after any later opening either).


def extract_between(text: str, tag: str) -> str:
    """The first ``<tag>...</tag>`` body, stripped ("" if none; tags are case-sensitive)."""
    start = text.find(f"<{tag}>")
    end = text.find(f"</{tag}>", start + len(tag) + 2) if start != -1 else -1
    return text[start + len(tag) + 2 : end].strip() if end != -1 else ""


def strip_think_blocks(text: str) -> str:
    """``re.sub(r"<think>.*?</think>", "", text, flags=DOTALL | IGNORECASE)``."""
    out, pos = [], 0
    while (o := _OPEN_THINK.search(text, pos)) and (c := _CLOSE_THINK.search(text, o.end())):
        out.append(text[pos : o.start()])
        pos = c.end()
    out.append(text[pos:])
    return "".join(out)


def first_to_last_brace(text: str) -> str | None:
    """The script's greedy brace search: the first "{" to the last "}" after it."""
    start, end = text.find("{"), text.rfind("}")
    return text[start : end + 1] if start != -1 and end > start else None


def _grounding_answer(s: str) -> str:
    # <answer> body; else the first {...} inside <think> (even when a later JSON follows
    # </think>); else the greedy {...} of the text without think blocks; else that text.
    ans = extract_between(s, "answer")
    if ans:
        return ans
    think = extract_between(s, "think")
    found = first_to_last_brace(think) if think else None
    if found is not None:
        return found
    cleaned = strip_think_blocks(s).strip()
    found = first_to_last_brace(cleaned)
    if found is not None:
        return found
    return cleaned if cleaned else s.strip()


def _after_think_letter(s: str) -> str:
    m = _AFTER_THINK.search(s)
    after = m.group(1).strip() if m else ""
    if not after:
        return ""
    if len(after) == 1 and after.upper() in OPTION_SET:
        return after.upper()
    lead = _LEADING_LETTER.match(after)
    if lead:
        return lead.group(1).upper()
    said = _ANSWER_IS.search(after)
    return said.group(1).upper() if said else ""


def _last_lines_letter(s: str) -> str:
    for line in reversed(s.strip().split("\n")[-5:]):
        line = line.strip()
        if len(line) == 1 and line.upper() in OPTION_SET:
            return line.upper()
        m = _LINE_LETTER.match(line)
        if m:
            return m.group(1).upper()
        if len(line) < 30:
            m = _LINE_END_LETTER.search(line)
            if m:
                return m.group(1).upper()
    return ""


def extract_answer(s: str, problem_type: str) -> str:
    """The answer string EasyVideoR1 takes from ``s`` for ``problem_type`` ("" if none).

    Every problem type but the grounding ones walks the same ladder of letter patterns,
    so a numeric or yes/no reply can come back as an option letter (the script's quirk).
    """
    if problem_type in GROUNDING:
        return _grounding_answer(s)
    mc = problem_type == "multiple choice"
    ans = extract_between(s, "answer")
    if ans and not mc:
        return ans
    if ans and len(ans) <= 2 and ans.strip().rstrip(".").upper() in OPTION_SET:
        # a substring test, as in the script: "AB" passes, and "." becomes "" (which
        # reward_fn then replaces by the whole reply)
        return ans.strip().rstrip(".").upper()
    for pattern in _FINAL_LETTER:
        m = pattern.search(s)
        if m:
            return m.group(1).upper()
    if not mc:
        m = _FINAL_TEXT.search(s)
        if m:
            return m.group(1).strip()
    got = _after_think_letter(s)
    if got:
        return got
    m = _CHOOSE.search(s)
    if m:
        return m.group(1).upper()
    got = _last_lines_letter(s)
    if got:
        return got
    if not mc:
        cleaned = strip_think_blocks(s).strip()
        return cleaned if cleaned else s.strip()
    return ""


def normalize_number(text: str) -> float | None:
    """Leading non-numeric and trailing non-digit/dot characters cut, commas dropped."""
    cleaned = re.sub(r"^[^\d\-+.]*", "", text.strip())
    cleaned = re.sub(r"[^\d.]*$", "", cleaned)
    try:
        return float(cleaned.replace(",", ""))
    except ValueError:
        return None


def _numbers(x: Any, n: int) -> list[float] | None:
    # its _is_list_of_numbers: a JSON list of exactly n float()-able items (strings too)
    if not isinstance(x, list) or len(x) != n:
        return None
    try:
        return [float(v) for v in x]
    except (TypeError, ValueError):
        return None


def iou_1d(pred: Any, gt: Any) -> float:
    """Span IoU with the hull as union; reversed or zero-length spans score 0."""
    p, g = _numbers(pred, 2), _numbers(gt, 2)
    if p is None or g is None:
        return 0.0
    inter = max(0.0, min(p[1], g[1]) - max(p[0], g[0]))
    union = max(p[1], g[1]) - min(p[0], g[0])
    return inter / union if union > 1e-12 else 0.0


def iou_2d(box1: Any, box2: Any) -> float:
    """Box IoU; a box with x2 < x1 or y2 < y1 has area 0 (so scores 0), no reordering."""
    a, b = _numbers(box1, 4), _numbers(box2, 4)
    if a is None or b is None:
        return 0.0
    iw = max(0.0, min(a[2], b[2]) - max(a[0], b[0]))
    ih = max(0.0, min(a[3], b[3]) - max(a[1], b[1]))
    inter = iw * ih
    area_a = max(0.0, a[2] - a[0]) * max(0.0, a[3] - a[1])
    area_b = max(0.0, b[2] - b[0]) * max(0.0, b[3] - b[1])
    union = area_a + area_b - inter
    return inter / union if union > 1e-12 else 0.0


def mean_iou_over_intersection(pred: Any, gt: Any) -> tuple[float, list[str]]:
    """Mean box IoU over the predicted keys also in the target (exact string keys)."""
    if not isinstance(pred, dict) or not isinstance(gt, dict):
        return 0.0, []
    common = [k for k in pred if k in gt]
    if not common:
        return 0.0, []
    return sum(iou_2d(pred[k], gt[k]) for k in common) / len(common), common


# torch.arange(0.5, 0.95 + 0.025, 0.05, dtype=float32): start + i * step rounded to float32
_MRA_THRESHOLDS = np.array([0.5 + 0.05 * i for i in range(10)], dtype=np.float32)


def mean_relative_accuracy(pred: float, target: float) -> float:
    """MRA in float32 as its torch code: mean of |p - t| / (|t| + 1e-8) < 1 - θ."""
    with np.errstate(all="ignore"):
        p, t = np.float32(pred), np.float32(target)
        rel = np.abs(p - t) / (np.abs(t) + np.float32(1e-8))
        hits = rel < (np.float32(1.0) - _MRA_THRESHOLDS)
    return float(hits.astype(np.float32).mean())


def loads(text: str) -> Any:
    """``json.loads`` or None (the script turns any failure into a 0 score)."""
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return None


# --- the training reward (examples/unified_rl/reward_function/utils.py) ---------------------

_REWARD_ANSWER = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
_REWARD_CLOSE = re.compile(r"</answer>", re.I)
_FENCE = re.compile(r"```(?:json)?\s*([\s\S]*?)\s*```")


_WS_RUN = re.compile(r"(\s+)")


def normalize_response(text: str) -> str:
    r"""Its ``normalize_response``: spaces around ``<``, ``>`` and ``/`` removed.

    It is ``re.sub(r"\s*(<|>|/)\s*", r"\1", text)``, which takes time quadratic in a run
    of whitespace that no delimiter ends (every start rescans the run: 40k spaces, over a
    minute). What it does is drop each whitespace run that touches a delimiter, so this
    does that in one pass, with the same text out (tests/test_scoring_linear_rules.py runs
    both on the same inputs).
    """
    if "<" not in text and ">" not in text and "/" not in text:
        return text  # no delimiter: the pattern matches nothing
    parts = _WS_RUN.split(text)  # non-space, space run, non-space, ..., non-space
    for k in range(1, len(parts), 2):
        before, after = parts[k - 1], parts[k + 1]
        if (before and before[-1] in "<>/") or (after and after[0] in "<>/"):
            parts[k] = ""
    return "".join(parts)


def last_boxed(text: str) -> str:
    """The body of the last balanced ``\\boxed{...}`` ("" if none)."""
    found, i = "", 0
    while i < len(text):
        if not text.startswith("\\boxed{", i):
            i += 1
            continue
        i += 7
        start, depth = i, 1
        while i < len(text) and depth > 0:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            found = text[start : i - 1]
    return found


def reward_answer(text: str) -> str:
    """Its ``extract_answer``: the ``<answer>`` body, else the last boxed, else all text."""
    m = search_closed(_REWARD_ANSWER, text, _REWARD_CLOSE)  # = _REWARD_ANSWER.search(text)
    if m:
        return m.group(1).strip()
    return last_boxed(text) or text.strip()


def _last_json_object(text: str) -> Any:
    # brace-depth scan; every balanced {...} that parses to a dict is a candidate
    found, i = None, 0
    while i < len(text):
        if text[i] != "{":
            i += 1
            continue
        start, depth = i, 1
        i += 1
        while i < len(text) and depth > 0:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        if depth == 0:
            got = loads(text[start:i])
            found = got if isinstance(got, dict) else found
    return found


_FAILED = object()


def _parse(text: str) -> Any:
    try:
        return json.loads(text)
    except (ValueError, RecursionError):
        return _FAILED


def json_from_text(text: str) -> Any:
    """Its ``extract_json_from_text``: the whole text as JSON (any type), else the first
    fenced block that parses, else the last balanced ``{...}`` that is a JSON object."""
    if not text:
        return None
    for candidate in (text.strip(), *(b.strip() for b in _FENCE.findall(text))):
        got = _parse(candidate)
        if got is not _FAILED:
            return got  # "null" returns None here, as it does there
    return _last_json_object(text)


def word_error_rate(reference: str, hypothesis: str) -> float:
    """Its ``wer``: word edit distance over max(1, reference words)."""
    ref, hyp = reference.split(), hypothesis.split()
    row = list(range(len(hyp) + 1))
    for i, r in enumerate(ref, 1):
        prev, row[0] = row[0], i
        for j, h in enumerate(hyp, 1):
            cur = min(row[j] + 1, row[j - 1] + 1, prev + (r != h))
            prev, row[j] = row[j], cur
    return row[len(hyp)] / max(1, len(ref))
