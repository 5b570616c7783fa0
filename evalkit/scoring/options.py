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
   the one option not ruled out; then the one option text named and not ruled out.

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

# A clause ends at sentence punctuation or a contrast ("..., but B").
_BREAK = re.compile(
    r"[.;!?。；,，](?:\s|$)|[\n;。；]|\b(?:but|however|whereas|while|although|though|yet)\b", re.I
)
_NEG_PRE = re.compile(
    r"\b(?:not|never|neither|nor|no\s+longer|rules?\s+out|ruled\s+out|ruling\s+out|eliminat\w*"
    r"|exclud\w*|rather\s+than|instead\s+of|unlike|incorrect|wrong|cannot|against|except)\b"
    r"|n't\b|不是|排除|而非",
    re.I,
)
_ASIDE = r"\s*[)\]]?\s*(?:\([^)\n]{0,60}\)\s*)?"  # "Option A (sunny) is unlikely"
_NEG_POST = re.compile(
    _ASIDE + r"(?:"
    r"(?:is|are|was|seems|appears|would\s+be|can\s+be|could\s+be|must\s+be|should\s+be)?\s*"
    r"(?:also\s+|clearly\s+|definitely\s+|thus\s+|therefore\s+)?"
    r"(?:wrong|incorrect|inaccurate|false\b|unlikely|impossible|ruled\s+out|eliminated|excluded"
    r"|invalid|out\s+of\s+the\s+question)"
    r"|(?:is|was|seems)?\s*(?:not|n't)\s+(?:correct|right|accurate|true|possible|valid|likely"
    r"|the\s+(?:correct|right|best|answer|case)|an?\s+(?:option|match)|supported|consistent|it\b)"
    r"|(?:does\s+not|doesn't|did\s+not|didn't)\s+(?:match|fit|show|describe|happen|apply|align)"
    r"|(?:cannot|can't|can\s+not)\s+be\b|fails\b|contradicts\b"
    r"|是错|错误|不正确|不对|不符合|可以排除)",
    re.I,
)
_POS_PRE = re.compile(
    r"(?:\b(?:answer|option|choice|caption|sentence|pick|guess|selection|match|one)\s+"
    r"(?:here\s+|then\s+|therefore\s+)?(?:is|would\s+be|should\s+be|will\s+be|must\s+be"
    r"|seems\s+to\s+be|appears\s+to\s+be)\s*[:=]?"
    r"|\banswer\s*[:=]"
    r"|\b(?:i|we)(?:'d|'ll|\s+would|\s+will|\s+should|\s+must|\s+can)?\s+(?:choose|select|pick"
    r"|go\s+with|opt\s+for|guess|say|answer|think|believe)(?:\s+(?:that|it(?:'s|\s+is)"
    r"|the\s+answer\s+is))?"
    r"|\b(?:therefore|thus|hence|so|consequently|accordingly|in\s+conclusion|in\s+summary"
    r"|to\s+conclude|overall|finally|ultimately)\s*[,:]?(?:\s*(?:it|this)(?:'s|\s+is"
    r"|\s+must\s+be|\s+should\s+be))?"
    r"|\bi\.\s*e\.\s*,?|\bthat\s+is\s*,|\bnamely\s*,?"
    r"|\b(?:most\s+likely|likely|probably|presumably|definitely|clearly)\s*[,:]?"
    r"(?:\s*(?:it|this)(?:'s|\s+is))?"
    r"|答案(?:应该)?(?:是|为|选)?\s*[:：]?|应该?选(?:择)?|我选(?:择)?|选择)\s*(?:the\s+)?$",
    re.I,
)
_POS_POST = re.compile(
    _ASIDE + r"(?:"
    r"(?:is|seems|appears|would\s+be|must\s+be|should\s+be|remains)\s+(?:to\s+be\s+)?"
    r"(?:the\s+|also\s+|clearly\s+|indeed\s+|definitely\s+)*"
    r"(?:correct|right\b|best|(?:more|most)\s+(?:accurate|appropriate|likely|plausible|reasonable"
    r"|suitable|fitting|consistent)|answer\b|accurate|true\b|the\s+one\b|a\s+match|consistent)"
    r"|(?:best|correctly|accurately|perfectly|exactly)\s+(?:describes|matches|fits|captures"
    r"|reflects|answers|depicts)"
    r"|(?:matches|fits)\s+(?:the\s+)?(?:video|description|best|perfectly|exactly|what)"
    r"|是正确|正确|最符合|最准确|符合)",
    re.I,
)
# "A and C", "A or B", "A/B": a set of letters, not a choice of one.
_JOINED = re.compile(
    r"\s*[)\]]?\s*(?:,|and\b|or\b|&|/|和|或)\s*(?:(?i:option|choice)\s*)?[(\[]?[A-Z](?![A-Za-z])"
)
_LINE_NEG = re.compile(
    r"\b(?:incorrect|not|no|wrong|false|inaccurate|inconsistent|unlikely|contradicts)\b"
    r"|n't\b|✗|❌",
    re.I,
)
_LINE_POS = re.compile(r"\b(?:correct|right|matches|true|accurate|consistent|best)\b|✓|✅", re.I)
_REFUSAL = re.compile(
    r"\b(?:cannot|can't|can\s+not|unable\s+to|not\s+able\s+to|impossible\s+to|not\s+possible\s+to)"
    r"\s+(?:be\s+)?(?:determine|determined|tell|answer|say|know|identify|see|view|watch|access"
    r"|infer|confirm|decide|select|choose)"
    r"|\bnone\s+of\s+the\s+(?:options|choices|above|given|provided|answers|captions)"
    r"|\bno\s+(?:option|choice|answer)\s+(?:is|fits|matches)"
    r"|\b(?:i'm|i\s+am)\s+sorry|\bi\s+apologi[sz]e"
    r"|\bnot\s+enough\s+(?:information|context|detail)|\binsufficient\s+(?:information|evidence)"
    r"|\bdon't\s+have\s+(?:access|enough)|无法(?:确定|判断|回答)|不确定",
    re.I,
)
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
    if _REFUSAL.search(s):
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
    for br in _BREAK.finditer(pre):
        end = br.end()
    return pre[end:]


def _verdict(s: str, start: int, end: int, lead: bool) -> int:
    """+1 concluded on, -1 ruled out, 0 only named, for the text at s[start:end]."""
    pre, post = s[max(0, start - 90) : start], s[end : end + 70]
    if _NEG_POST.match(post) or _NEG_PRE.search(_clause(pre)):
        return -1
    if _JOINED.match(post):
        return 0
    # the longest cue ("in conclusion, it must be") fits in 48 characters
    if lead or _POS_POST.match(post) or _POS_PRE.search(pre, max(0, len(pre) - 48)):
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
            verdict = -1 if _LINE_NEG.search(rest) else (1 if _LINE_POS.search(rest) else 0)
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
        joined = _JOINED.match(lines[0], m.end("l"))  # "(A) and (C)"
        if got and not joined and not _NEG_POST.match(lines[0], m.end() - 1):
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
    listed = {m.letter for m in mentions if m.listed}
    if not named and ruled_out and len(listed - ruled_out) == 1:
        return next(iter(listed - ruled_out)), "elimination"
    by_text = _by_option_text(s, options, letters, listing)
    if by_text:
        return by_text, "option_text"
    return None, "ambiguous" if len(named) > 1 else ""


@lru_cache(maxsize=4096)
def _option_pattern(text: str) -> re.Pattern[str] | None:
    words = re.findall(r"\w+", _clean(text).lower())
    if not words:
        return None
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
    kept = {
        i
        for a, b, i in hits
        if not any(a2 <= a and b <= b2 and (b2 - a2) > (b - a) for a2, b2, _ in hits)
        and _verdict(s, a, b, False) >= 0
    }
    if len(kept) == 1:
        return letters[next(iter(kept))]
    return None
