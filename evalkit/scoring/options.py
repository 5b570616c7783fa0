"""Which option a reply picks: the letter that a model's answer names, read like a person.

Video-LLMs answer a multiple-choice question with anything from "C" to a page that walks
through every option, argues some away and concludes. ``letter`` reads a reply in order
of how explicit it is, and stops at the first reading that decides:

1. the whole reply is a label: "C", "(c)", "**C.**", "Option 3", "Caption B";
2. the whole reply is one option's text;
3. a verdict: the LAST letter the reply concludes on ("the best option is A", "Therefore,
   option B is the most accurate", "most likely B", "C is correct"), never one it rules
   out ("this rules out option A", "A is wrong", "not B");
4. a line that is only a label ("B" and then "Explanation: ..."), or a first line
   "C. the dog" that the rest explains;
5. a refusal ("I cannot determine ...") picks nothing;
6. the one letter named and never ruled out; in a list that walks through the options,
   the one option not ruled out; then the one option text named and not ruled out;
   letters named as alternatives ("either B or C", "both A and B are possible") commit
   to none, and no option text is read after them.

"A" and "I" count as letters when they stand as an answer ("is A.", "Caption A", "(I)"),
not as English words ("A dog runs", "I think"). Options echoed back as a list ("A. red
car" / "B. blue car") are not an answer. Letters go as far as the sample has options.
Every function here is total: unreadable input gives None, never an exception.
"""

from __future__ import annotations

import re
import unicodedata
from dataclasses import dataclass
from functools import lru_cache

from evalkit.sample import OPTION_LETTERS
from evalkit.scoring.cues import (
    ALTERNATIVE,
    BOTH,
    BREAK,
    HEDGE_OR,
    IT_IS,
    JOINED,
    LINE_NEG,
    LINE_POS,
    NEG_POST,
    NEG_PRE,
    POS_POST,
    POS_PRE,
    REFUSAL,
)

# Words that name an option slot: "option B", "Caption 2", "选项C".
_LABEL = r"(?:option|choice|caption|sentence|answer|letter|candidate|statement|description)s?"
_TEX_TEXT = re.compile(r"\\(?:text|textbf|mathrm|mathbf)\{([^{}]*)\}")
_MARKUP = re.compile(r"\*+|__+|`+|\$+|^[ \t]*(?:#{1,6}|>|[-•])[ \t]+", re.M)

_WHOLE = re.compile(
    rf"(?P<label>(?i:(?:(?:the|my)\s+)?(?:final\s+|correct\s+|best\s+|right\s+)?{_LABEL}"
    r"\s*(?:is\s*)?[:#]?\s*)|选项\s*|答案\s*[:：是]?\s*)?"
    r"[\"'“‘]?[(\[]?\s*(?P<l>[A-Za-z]|\d{1,2})\s*[)\]]?[\"'”’]?\s*[.。!:]?"
)
_LINE_LABEL = re.compile(
    rf"[ \t]*(?P<label>(?i:{_LABEL})\s*|选项\s*)?[(\[]?(?P<l>[A-Za-z]|\d{{1,2}})"
    r"(?:[)\]]\s*[.:]?|\s*[.:：]|\s+[-–—]|\s+\([^)\n]{1,60}\)\s*[.:：-])[ \t]*\S"
)
_MENTION = re.compile(
    rf"(?P<label>(?i:\b{_LABEL})\s*[:#]?\s*|选项\s*)?"
    r"(?<![A-Za-z0-9’])(?<![A-Za-z]\.)(?P<open>[(\[])?(?P<l>[A-Za-z]|\d{1,2})(?P<close>[)\]])?"
    # not "I'd", "B-roll", "U.S."; "'C'" and "option A's" are letters
    r"(?![A-Za-z0-9’-]|'(?!s\b)[A-Za-z]|\.[A-Za-z0-9])"
)
# After "A"/"I", words that make it a letter ("A is wrong", "I matches") rather than
# the article or the pronoun ("A dog", "I would").
_LETTER_VERBS = frozenset(
    {"is", "was", "seems", "appears", "matches", "describes", "shows", "depicts", "fits"}
    | {"best", "correctly", "accurately", "or", "vs", "versus", "isn't", "wasn't", "does"}
    | {"doesn't", "has", "remains", "because", "mentions", "says", "states"}
)
_A_VERBS = _LETTER_VERBS | {"and", "would", "could", "can", "cannot", "can't", "also", "only"}
_A_VERBS |= {"must", "should", "might", "may", "since"}
_I_VERBS = _LETTER_VERBS
_NEXT_WORD = re.compile(r"[ \t]+([A-Za-z']+)")

# Far beyond any real reply; keeps hostile text cheap (the start and the end both matter).
_MAX_CHARS = 20_000


@dataclass(frozen=True)
class _Mention:
    letter: str
    start: int
    end: int
    verdict: int  # 1 concluded on, -1 ruled out, 0 named only
    listed: bool  # the label of a line in a list of options


def letter(
    span: str, options: list[str], letters: list[str], marked: bool = False
) -> tuple[str | None, str]:
    """The option letter a reply names, and the reading that found it ("" if none).

    ``marked``: the span followed an explicit answer marker ("the answer is ..."), so a
    letter it opens with is the answer. Readings: letter | option_word | option_text |
    verdict | bare_line | elimination | lone_letter; refusal and ambiguous give None.
    """
    letters = list(letters) if letters else list(OPTION_LETTERS)
    s = _clean(str(span))
    if not s:
        return None, ""
    whole = _whole(s, letters)
    if whole:
        return whole
    exact = _exact_text(s, options, letters)
    if exact:
        return exact, "option_text"
    listing = _list_lines(s, letters)
    mentions = _mentions(s, letters, listing, marked)
    concluded = [m.letter for m in mentions if m.verdict > 0]
    if concluded:
        return concluded[-1], "verdict"
    lines = _line_answer(s, letters, listing)
    if lines:
        return lines
    if REFUSAL.search(s):
        return None, "refusal"
    return _standing(s, options, letters, mentions, listing)


def _clean(s: str) -> str:
    if not s.isascii():
        s = unicodedata.normalize("NFKC", s)  # full-width "（Ｃ）" -> "(C)"
    if len(s) > _MAX_CHARS:
        s = s[: _MAX_CHARS // 4] + "\n" + s[-(_MAX_CHARS * 3 // 4) :]
    s = _TEX_TEXT.sub(r"\1", s)
    return _MARKUP.sub("", s).strip()


def _to_letter(raw: str, labelled: bool, letters: list[str]) -> str | None:
    """A matched letter or number as an option letter, if the question has it."""
    if raw.isdigit():  # "Option 2": only a label makes a number an option
        i = int(raw)
        return letters[i - 1] if labelled and 1 <= i <= len(letters) else None
    up = raw.upper()
    return up if up in letters else None


def _whole(s: str, letters: list[str]) -> tuple[str, str] | None:
    m = _WHOLE.fullmatch(s)
    if not m:
        return None
    got = _to_letter(m.group("l"), bool(m.group("label")), letters)
    if got is None:
        return None
    return got, "option_word" if m.group("label") else "letter"


_NON_WORD = re.compile(r"[\s\W_]+")


def _norm(s: str) -> str:
    return _NON_WORD.sub(" ", s.lower()).strip()


@lru_cache(maxsize=4096)
def _option_norm(option: str) -> str:
    """An option's text cleaned as replies are ("m³" -> "m3", "$^\\circ$" -> "^\\circ")."""
    return _norm(_clean(option))


def _exact_text(s: str, options: list[str], letters: list[str]) -> str | None:
    norm = _norm(s)
    hits = [
        letters[i]
        for i, o in enumerate(options[: len(letters)])
        if norm and _option_norm(str(o)) == norm
    ]
    return hits[0] if len(hits) == 1 else None


def _list_lines(s: str, letters: list[str]) -> dict[int, tuple[str, str]]:
    """Lines labelled with a letter, by start offset -> (letter, rest of line), when the
    reply lists two or more different options (an echo or a walk-through); else {}."""
    found: dict[int, tuple[str, str]] = {}
    pos = 0
    for line in s.split("\n"):
        m = _LINE_LABEL.match(line)
        if m and (m.group("label") or m.group("l").isupper()):
            got = _to_letter(m.group("l"), bool(m.group("label")), letters)
            if got:
                found[pos] = (got, line[m.end() - 1 :])
        pos += len(line) + 1
    return found if len({v[0] for v in found.values()}) >= 2 else {}


def _is_word(s: str, m: re.Match[str]) -> bool:
    """True when an unlabelled "A" or "I" is the English article or pronoun."""
    got = m.group("l")
    if got not in "AI" or m.group("open") or m.group("close"):
        return False
    label = (m.group("label") or "").strip().lower()
    if label and not label.startswith("answer"):
        return False
    nxt = _NEXT_WORD.match(s, m.end())
    if nxt is None:  # followed by punctuation or the end: "is A." "A, C"
        return False
    return nxt.group(1).lower() not in (_A_VERBS if got == "A" else _I_VERBS)


def _clause(pre: str) -> str:
    end = 0
    for br in BREAK.finditer(pre):
        end = br.end()
    return pre[end:]


def _verdict(s: str, start: int, end: int, lead: bool) -> int:
    """+1 concluded on, -1 ruled out, 0 only named, for the text at s[start:end]."""
    pre, post = s[max(0, start - 90) : start], s[end : end + 70]
    if NEG_POST.match(post) or NEG_PRE.search(_clause(pre)):
        return -1
    if JOINED.match(post):
        return 0
    # the longest cue ("in conclusion, it must be") fits in 48 characters
    if lead or POS_POST.match(post) or POS_PRE.search(pre, max(0, len(pre) - 48)):
        return 1
    return 0


def _mentions(
    s: str, letters: list[str], listing: dict[int, tuple[str, str]], marked: bool
) -> list[_Mention]:
    out: list[_Mention] = []
    line_start = 0
    for m in _MENTION.finditer(s):
        labelled = bool(m.group("label"))
        raw = m.group("l")
        if (not labelled and not raw.isupper()) or _is_word(s, m):
            continue
        got = _to_letter(raw, labelled, letters)
        if got is None:
            continue
        start = m.start()
        line_start = s.rfind("\n", 0, start) + 1
        entry = listing.get(line_start)
        is_label = entry is not None and entry[0] == got and not s[line_start:start].strip(" \t([")
        if is_label:
            rest = entry[1] if entry else ""
            verdict = -1 if LINE_NEG.search(rest) else (1 if LINE_POS.search(rest) else 0)
        else:
            lead = marked and not out and not s[:start].strip(" \t(:")
            verdict = _verdict(s, start, m.end(), lead)
        out.append(_Mention(got, start, m.end(), verdict, is_label))
        if len(out) >= 200:
            break
    return out


def _line_answer(
    s: str, letters: list[str], listing: dict[int, tuple[str, str]]
) -> tuple[str, str] | None:
    """A line that is only a label ("B" then an explanation), or a first line "C. text"."""
    lines = [ln.strip() for ln in s.split("\n") if ln.strip()]
    # a label alone is short: "B", "**Answer:** (C)", "Final answer: option 3"
    bare = {w[0] for w in (_whole(ln, letters) for ln in lines if len(ln) <= 32) if w}
    if len(bare) == 1:
        return next(iter(bare)), "bare_line"
    if listing or not lines:
        return None
    m = _LINE_LABEL.match(lines[0])
    if m and (m.group("label") or m.group("l").isupper()):
        got = _to_letter(m.group("l"), bool(m.group("label")), letters)
        joined = JOINED.match(lines[0], m.end("l"))  # "(A) and (C)"
        if got and not joined and not NEG_POST.match(lines[0], m.end() - 1):
            return got, "letter"
    return None


def _standing(
    s: str,
    options: list[str],
    letters: list[str],
    mentions: list[_Mention],
    listing: dict[int, tuple[str, str]],
) -> tuple[str | None, str]:
    """No verdict: the one letter named and never ruled out, else the one option text."""
    ruled_out = {m.letter for m in mentions if m.verdict < 0}
    named = {m.letter for m in mentions if m.verdict == 0 and not m.listed} - ruled_out
    if len(named) == 1:
        return next(iter(named)), "lone_letter"
    if len(named) > 1 and _hedged(s, mentions):
        return None, "ambiguous"  # "either B or C; ...": no option text decides it either
    listed = {m.letter for m in mentions if m.listed}
    if not named and ruled_out and len(listed - ruled_out) == 1:
        return next(iter(listed - ruled_out)), "elimination"
    by_text = _by_option_text(s, options, letters, listing)
    if by_text:
        return by_text, "option_text"
    return None, "ambiguous" if len(named) > 1 else ""


def _hedged(s: str, mentions: list[_Mention]) -> bool:
    """True when two letters are named as alternatives ("either A or B", "both A and C")."""
    for m in mentions:
        if m.verdict or m.listed:
            continue
        if HEDGE_OR.match(s, m.end):
            return True
        if JOINED.match(s, m.end) and BOTH.search(s, max(0, m.start - 24), m.start):
            return True
    return False


_NUMBER_WORDS = (  # noqa: SIM905 (a list of 21 words reads better as one string)
    "zero one two three four five six seven eight nine ten eleven twelve thirteen fourteen "
    "fifteen sixteen seventeen eighteen nineteen twenty"
).split()


@lru_cache(maxsize=4096)
def _option_pattern(text: str) -> re.Pattern[str] | None:
    words = re.findall(r"\w+", _clean(text).lower())
    if not words:
        return None
    if len(words) == 1 and words[0].isdigit() and int(words[0]) < len(_NUMBER_WORDS):
        # a count written out: "There are two people" names option "2"
        return re.compile(
            rf"(?<![a-z0-9.])(?:{words[0]}|{_NUMBER_WORDS[int(words[0])]})(?![a-z0-9])"
        )
    # "time-lapse" also matches "time lapse"; ASCII edges only, so CJK text still matches
    return re.compile(r"(?<![a-z0-9])" + r"[\W_]+".join(map(re.escape, words)) + r"(?![a-z0-9])")


def _by_option_text(
    s: str, options: list[str], letters: list[str], listing: dict[int, tuple[str, str]]
) -> str | None:
    """The one option whose text the reply names without ruling it out (longest wins
    over a shorter option inside it: "red car" over "car")."""
    low = s.lower()
    hits: list[tuple[int, int, int]] = []  # (start, end, option index)
    for i, text in enumerate(options[: len(letters)]):
        pat = _option_pattern(str(text))
        for m in pat.finditer(low) if pat else ():
            if s.rfind("\n", 0, m.start()) + 1 not in listing:
                hits.append((m.start(), m.end(), i))
        if len(hits) > 200:  # a reply that names options hundreds of times names none
            return None
    kept: dict[int, bool] = {}  # option index -> some mention concludes on it
    for a, b, i in hits:
        if any(a2 <= a and b <= b2 and (b2 - a2) > (b - a) for a2, b2, _ in hits):
            continue  # "car" inside "red car"
        verdict = _verdict(s, a, b, False)
        if verdict >= 0:
            said = verdict > 0 or bool(IT_IS.search(s, max(0, a - 24), a))
            said = said and not ALTERNATIVE.match(s, b)
            kept[i] = kept.get(i, False) or said
    if len(kept) == 1:
        return letters[next(iter(kept))]
    concluded = [i for i, said in kept.items() if said]
    # "either morning or evening ... it is evening": the one concluded on
    return letters[concluded[0]] if len(concluded) == 1 else None
