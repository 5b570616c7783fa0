"""Extraction patterns rewritten to run in linear time give exactly what the official
(super-linear) patterns give, on the same inputs: hand-picked, random over the
characters the patterns care about. Their speed on 64k-character degenerate replies is
``perf/scoring.py``'s ``worst_rule_ms_64k`` (no timing assert here).

The originals are kept here, verbatim from the rule modules before the rewrite (their
own sources are named there: EasyVideoR1 utils.py ``normalize_response``, lmms-eval's
charades_sta utils.py, MMMU's ``extract_numbers``), as the oracles.
"""

from __future__ import annotations

import random
import re

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from evalkit.scoring.extract import _FENCE, fences
from evalkit.scoring.rules import _easyvideor1, _reasoning, charadessta, videommmu

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

ORIGINAL = {
    "normalize": re.compile(r"\s*(<|>|/)\s*"),
    "range": re.compile(r"(\d+(?:\.\d+)?)\s*[–-]\s*(\d+(?:\.\d+)?)"),
    "range_s": re.compile(r"(\d+(?:\.\d+)?)\s*s?\s*[–-]\s*(\d+(?:\.\d+)?)\s*s?"),
    "num_sci": re.compile(r"-?\d+(?:\.\d+)?[eE][+-]?\d+"),
    "num_simple": re.compile(r"-?(?:\d+\.\d+|\.\d+|\d+\b)(?![eE][+-]?\d+)(?![,\d])"),
}
NOW = {
    "range": charadessta._RANGE,
    "range_s": charadessta._RANGE_S,
    "num_sci": videommmu._NUM_SCI,
    "num_simple": videommmu._NUM_SIMPLE,
}
# the characters each pattern turns on, plus a few others and odd whitespace
ALPHABET = {
    "normalize": " \t\n\u00a0\u2003\x1c<>/ab",
    "range": "0123456789.-– s\nx",
    "range_s": "0123456789.-– s\nx",
    "num_sci": "0123456789.-+eE ,x",
    "num_simple": "0123456789.-+eE ,x_",
    "fence": "`` \t\na1_+-.{}",
}
HAND = [
    "",
    "< < x",
    "a  /  b \n> c",
    " <",
    "1.2.3-4",
    "12 - 30 s",
    "1-2.x 3.5–4s",
    "0.5 to 7",
    "1.5,",
    "1,234.5",
    "-12.5e-3 and 7e2",
    "1.1.1.1e5",
    "```python\nx=1\n```",
    "``` \n",
    "```a\nb```c```\n```",
    "x```\n```",
]


def _random_texts(chars: str, n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choice(chars) for _ in range(rnd.randint(0, 60))) for _ in range(n)]


def _normalize_original(text: str) -> str:
    return ORIGINAL["normalize"].sub(r"\1", text)


@pytest.mark.parametrize("name", sorted(NOW))
def test_a_guarded_pattern_finds_what_the_original_finds(name: str) -> None:
    for text in HAND + _random_texts(ALPHABET[name], 3000, seed=len(name)):
        assert NOW[name].findall(text) == ORIGINAL[name].findall(text), repr(text)


@pytest.mark.parametrize("name", sorted(NOW))
@SETTINGS
@given(data=st.data())
def test_a_guarded_pattern_matches_the_original_on_generated_text(name: str, data) -> None:
    text = data.draw(st.text(alphabet=ALPHABET[name], max_size=80))
    assert NOW[name].findall(text) == ORIGINAL[name].findall(text)


def test_the_normalize_scan_gives_the_official_sub() -> None:
    for text in HAND + _random_texts(ALPHABET["normalize"], 3000, seed=1):
        assert _easyvideor1.normalize_response(text) == _normalize_original(text), repr(text)


@SETTINGS
@given(st.text(alphabet=st.sampled_from(ALPHABET["normalize"]) | st.characters(), max_size=80))
def test_the_normalize_scan_gives_the_official_sub_on_generated_text(text: str) -> None:
    assert _easyvideor1.normalize_response(text) == _normalize_original(text)


def test_the_fence_scan_gives_findall() -> None:
    for text in HAND + _random_texts(ALPHABET["fence"], 3000, seed=2):
        assert fences(text) == _FENCE.findall(text), repr(text)


@SETTINGS
@given(st.text(alphabet=ALPHABET["fence"], max_size=80))
def test_the_fence_scan_gives_findall_on_generated_text(text: str) -> None:
    assert fences(text) == _FENCE.findall(text)


def _last_tagged_original(text: str, tag: str) -> str | None:
    found = re.findall(rf"<{tag}>\s*(.*?)\s*</{tag}>", text, re.DOTALL)
    return found[-1].strip() if found else None


TAG_PIECES = ["<answer>", "</answer>", "<ans", "wer>", " ", "\n", "\u2003", "A", "b c"]


def test_the_tag_scan_gives_the_official_findall() -> None:
    rnd = random.Random(3)
    texts = HAND + [
        "".join(rnd.choice(TAG_PIECES) for _ in range(rnd.randint(0, 12))) for _ in range(4000)
    ]
    for text in texts:
        assert _reasoning.last_tagged(text, "answer") == _last_tagged_original(text, "answer"), (
            repr(text)
        )


@SETTINGS
@given(st.lists(st.sampled_from(TAG_PIECES), max_size=16).map("".join))
def test_the_tag_scan_gives_the_official_findall_on_generated_text(text: str) -> None:
    assert _reasoning.last_tagged(text, "answer") == _last_tagged_original(text, "answer")


def test_a_search_bounded_by_the_last_closing_tag_gives_the_search() -> None:
    from evalkit.scoring.extract import search_closed

    pattern = re.compile(r"<answer>(.*?)</answer>", re.S | re.I)
    closing = re.compile(r"</answer>", re.I)
    rnd = random.Random(4)
    pieces = [*TAG_PIECES, "</ANSWER>", "<Answer>"]
    texts = HAND + [
        "".join(rnd.choice(pieces) for _ in range(rnd.randint(0, 12))) for _ in range(4000)
    ]
    for text in texts:
        got, want = search_closed(pattern, text, closing), pattern.search(text)
        assert (got and (got.span(), got.groups())) == (want and (want.span(), want.groups()))


def _extract_time_original(reply: str) -> list[tuple[float, float]]:
    """``charadessta.extract_time`` before it dropped digit-less sentences: every sentence
    is a candidate, the keyword asked of each one."""
    c = charadessta
    text = reply.lower().replace(c._PROMPT_EXAMPLE, "").replace("to", "-")
    sentences = re.split(r"[!?\n]", text)
    candidates = [s for s in sentences if any(k in s for k in c._KEYWORDS)] or sentences
    spans = c._first_ranges(candidates, c._CLOCK_RANGE, c.clock_seconds)
    if not spans:
        spans = c._first_ranges(candidates, ORIGINAL["range"], float)
    if not spans:
        clocks = [c.clock_seconds(t) for s in candidates for t in c._CLOCK_ONE.findall(s)]
        spans = c._pairs(clocks)
    if not spans:
        firsts = [c._NUMBER.findall(s) for s in candidates]
        spans = c._pairs([float(f[0]) for f in firsts if f])
    if not spans:
        spans = c._first_ranges(candidates, ORIGINAL["range_s"], float)
    return [(a, b) if b > a else (b, a) for a, b in spans[:1]]


# digits, clock stamps, dashes, "to", the keywords, the separators, an Arabic-Indic digit
_CHARADES_PIECES = [
    *"0123456789",
    ":", ".", "-", "–", " ", "s", "\n", "!", "?", "x", "to", "start", "ends", "happen",
    "1:05", "0:30", "\u0663", "a specific example is : 20.8 - 30.0 seconds",
]  # fmt: skip


def _charades_texts(n: int, seed: int) -> list[str]:
    rnd = random.Random(seed)
    return ["".join(rnd.choices(_CHARADES_PIECES, k=rnd.randint(0, 30))) for _ in range(n)]


CHARADES_HAND = [
    "",
    "\n" * 50,
    "it starts at 5\nand ends at 9",
    "the event happens\n 3 - 7",
    "no keyword here\n2 to 6\n8 - 9",
    "start\n\n1:05 - 1:30",
    "ends? 4! 6",
    "\u0663 - 5 start",
]


def test_extract_time_tries_only_sentences_with_a_digit_and_finds_the_same_spans() -> None:
    for text in CHARADES_HAND + _charades_texts(4000, seed=7):
        assert charadessta.extract_time(text) == _extract_time_original(text), repr(text)


@SETTINGS
@given(st.lists(st.sampled_from(_CHARADES_PIECES), max_size=40).map("".join))
def test_extract_time_matches_the_traced_parser_on_generated_text(text: str) -> None:
    assert charadessta.extract_time(text) == _extract_time_original(text)
