"""Code answers: Python run against tests, SVG rendered and compared, HTML compared by structure.

Targets (assumed shapes): ``code_python`` — a test snippet (asserts) or a list of them, or
``{"tests": [...]}``; ``code_svg`` — the reference SVG source; ``code_html`` — the
reference HTML source. Python and SVG run only inside ``evalkit.scoring.sandbox``;
HTML is parsed in-process with the standard library's tokenizer (parsing runs no code).
"""

from __future__ import annotations

import ast
import difflib
import re
import sys
import threading
from html import unescape
from html.parser import HTMLParser
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.extract import code_block, final_span
from evalkit.scoring.sandbox import Limits, RunResult, run_job
from evalkit.scoring.types import Score

MAX_CODE_CHARS = 100_000


def _code(prediction: str, languages: tuple[str, ...]) -> tuple[str, dict[str, Any], str]:
    span = final_span(prediction)
    body, how = code_block(span.text if span.text else prediction, languages)
    body = body[:MAX_CODE_CHARS]
    fmt = 0.0 if not body.strip() else (1.0 if how.startswith("fence") or span.marked else 0.5)
    return body, {"format": fmt, "extraction": f"{span.method}/{how}"}, how


def _tests(target: Any, sample: Sample) -> list[str]:
    if isinstance(target, dict):
        target = target.get("tests", [])
    if target is None:
        target = sample.fields.get("tests", [])
    tests = [target] if isinstance(target, str) else list(target)
    return [str(t) for t in tests if str(t).strip()]


# Rule: functional correctness — the fraction of the sample's tests that pass
# (HumanEval / MBPP pass@1 with one sample, Chen et al. 2021).
def code_python(prediction: str, target: Any, sample: Sample) -> Score:
    """Fraction of the sample's tests passing when run with the answer's code (sandboxed)."""
    code, meta, _ = _code(prediction, ("python", "py", "python3"))
    tests = _tests(target, sample)
    if not code.strip():
        return Score(0.0, None, "no code found", meta)
    if not tests:
        return Score(0.0, None, "sample has no tests", meta)
    error = syntax_error(code)
    if error is not None:  # the sandbox would load nothing: every test fails
        meta.update(passed=[False] * len(tests), program_error=error)
        how = meta["extraction"]
        why = f"0/{len(tests)} tests passed: the code does not parse (code via {how})"
        return Score(0.0, f"0/{len(tests)} tests", why, meta)
    limits = Limits()
    run = run_job({"kind": "python", "code": code, "tests": tests}, limits)
    meta.update(timed_out=run.timed_out, returncode=run.returncode, wall_s=run.wall_s)
    meta.update(output_exceeded=run.output_exceeded, output_bytes=run.output_total)
    if run.result is None:
        return Score(0.0, None, f"code {_no_verdict(run, limits)}", meta)
    passed = [bool(p) for p in run.result.get("passed", [])]
    meta.update(passed=passed, program_error=run.result.get("error"))
    value = sum(passed) / len(tests)
    why = f"{sum(passed)}/{len(tests)} tests passed in the sandbox (code via {meta['extraction']})"
    return Score(value, f"{sum(passed)}/{len(tests)} tests", why, meta)


def syntax_error(code: str) -> str | None:
    """The error the sandbox's load of ``code`` would end in when its parser refuses it, in
    the verdict's words (``"SyntaxError: invalid syntax (<solution>, line 1)"``); None
    when it parses, or when only the sandbox can tell.

    Parsing runs none of the answer's code and CPython's parser bounds its own depth, so it
    is done here: a reply that is not Python (most degenerate ones) costs its parse, not a
    sandbox start (~90 ms: processes, namespaces, the jail). The same interpreter parses
    the same text under the same name as the sandbox's ``compile``, so the message is the
    one the sandbox would return (the answer runs there under the stock int/str digit
    limit, so a literal over it is refused alike, unless this process changed its limit).
    Left to the sandbox: errors of the later compile stages ("'return' outside function").
    """
    try:
        compile(code, "<solution>", "exec", ast.PyCF_ONLY_AST, dont_inherit=True)
    except SyntaxError as exc:
        message = str(exc)
        if "Exceeds the limit" in message and not _stock_digit_limit():
            return None
        return f"{type(exc).__name__}: {message[:500]}"[:500]  # as the sandbox's link says it
    except Exception:  # MemoryError, RecursionError, ValueError (null bytes): the sandbox's
        return None
    return None


def _stock_digit_limit() -> bool:
    return sys.get_int_max_str_digits() == sys.int_info.default_max_str_digits


def _no_verdict(run: RunResult, limits: Limits) -> str:
    """Why a sandboxed run gave no verdict, for the score's explanation."""
    if run.output_exceeded:
        return f"wrote more than {limits.output_bytes} bytes of output and was stopped"
    if run.timed_out:
        return f"timed out after {limits.wall_s:g} s"
    return "crashed the sandbox before the tests ran"


# Rule: rendering similarity, in the spirit of StarVector / VGBench SVG evaluation
# (compare the candidate's rendering with the reference's pixel by pixel): here
# 1 - MAE / MAE(blank canvas, reference), so a blank or broken drawing scores 0.
def code_svg(prediction: str, target: Any, sample: Sample) -> Score:
    """Pixel similarity of the rendered answer SVG with the rendered reference SVG."""
    code, meta, _ = _code(prediction, ("svg", "xml", "html"))
    start, end = code.find("<svg"), code.rfind("</svg>")
    if start == -1 or end == -1:
        meta["format"] = 0.0
        return Score(0.0, None, "no <svg> element found", meta)
    svg = code[start : end + 6]
    job = {"kind": "svg", "candidate": svg, "reference": str(target), "size": 128}
    limits = Limits(cpu_s=10, wall_s=20, memory_mb=2048)
    run = run_job(job, limits)
    meta.update(timed_out=run.timed_out, wall_s=run.wall_s)
    if run.result is None:
        why = _no_verdict(run, limits)
        return Score(0.0, None, f"rendering failed ({why}): {run.stderr[-300:]}", meta)
    value = float(run.result.get("similarity", 0.0))
    meta.update(mae=run.result.get("mae"), program_error=run.result.get("error"))
    why = f"pixel similarity {value:.3f} (svg via {meta['extraction']})"
    return Score(min(1.0, max(0.0, value)), "svg", why, meta)


class _Structure(HTMLParser):
    # The element skeleton: "<tag attr-names>" / "</tag>" tokens plus text words.
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tokens: list[str] = []
        self.words: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        names = sorted(a for a, _ in attrs if a not in ("style",))
        self.tokens.append(f"<{tag} {' '.join(names)}>")

    def handle_endtag(self, tag: str) -> None:
        self.tokens.append(f"</{tag}>")

    def handle_data(self, data: str) -> None:
        self.words.extend(data.split())


# Fast path for plain, well-formed markup. html.parser is exact but costs ~20 us per
# small document in Python-level bookkeeping; a document made only of the constructs
# below is read by one regex instead, with html.parser's results: tag and attribute
# names lower-cased, "<x/>" read as a start and an end tag, text between tags
# unescaped as one piece, a "<" that opens no markup as a text piece of its own (as
# html.parser hands it over: "a<1" is three words), doctype and comments skipped. Anything
# else (a "<" opening broken markup, unusual names or quoting, script/style and other
# raw-text elements) takes the html.parser path; tests/test_scoring_speed_equivalence.py
# checks both agree.
_WS = "[ \\t\\n\\r\\f]"  # html.parser's own whitespace set, not Unicode \s
_VALUE = f"""(?:{_WS}*={_WS}*(?:"[^"<>]*"|'[^'<>]*'|[-a-zA-Z0-9_.:]+(?={_WS}|>)))"""
_NAME = "[a-zA-Z_:][-a-zA-Z0-9_:.]*"
_PIECE = re.compile(  # group 1: the whole piece
    f"(([^<]+|<(?![a-zA-Z/!?]))"  # text; a "<" opening nothing is a text piece of its own
    f"|<([a-zA-Z][a-zA-Z0-9]*)((?:{_WS}+{_NAME}{_VALUE}?)*){_WS}*(/?)>"  # start tag
    f"|</([a-zA-Z][a-zA-Z0-9]*){_WS}*>"  # end tag
    f"|<![dD][oO][cC][tT][yY][pP][eE][^<>]*>"  # declaration
    f"|<!--(?!-?>)(?:[^-<>]|-(?!-))*-->)"  # comment without "--", "<" or ">" inside
)
_ATTR_NAME = re.compile(f"{_WS}+({_NAME}){_VALUE}?")
# Elements whose content html.parser (in some Python version) reads as raw text; the
# fast path leaves them to html.parser, except a title or textarea holding plain text.
_RAW_TEXT = frozenset(
    ["script", "style", "xmp", "iframe", "noembed", "noframes", "noscript", "plaintext"]
)
_RCDATA = frozenset(("title", "textarea"))


def _fast_structure(html: str) -> tuple[list[str], list[str]] | None:
    """(tags, words) as _Structure finds them, or None when html is not plain markup."""
    tokens: list[str] = []
    words: list[str] = []
    covered = 0
    rcdata: str | None = None  # inside <title>/<textarea>: only text, then its end tag
    # Pieces never overlap, so they cover the document exactly when their lengths add
    # up to its length; anything no alternative reads leaves a gap.
    for whole, text, tag, attrs, slash, end in _PIECE.findall(html):
        covered += len(whole)
        if text:
            words.extend((unescape(text) if "&" in text else text).split())
            continue
        if rcdata is not None and end.lower() != rcdata:
            return None
        rcdata = None
        if tag:
            tag = tag.lower()
            if tag in _RAW_TEXT or (tag in _RCDATA and slash):
                return None
            rcdata = tag if tag in _RCDATA else None
            names = [n.lower() for n in _ATTR_NAME.findall(attrs)] if attrs else []
            names = sorted(n for n in names if n != "style")
            tokens.append(f"<{tag} {' '.join(names)}>")
            if slash:
                tokens.append(f"</{tag}>")
        elif end:
            tokens.append(f"</{end.lower()}>")
    if covered != len(html) or rcdata is not None:
        return None
    return tokens, words


def _parsed_structure(html: str) -> tuple[list[str], list[str]]:
    parser = _Structure()
    try:
        parser.feed(html)
        parser.close()
    except Exception:  # the tokenizer is lenient; this is for truly odd input
        pass
    return parser.tokens, parser.words


def html_structure(html: str) -> tuple[list[str], list[str]]:
    """(tag tokens, text words) of an HTML document; tolerant of broken markup."""
    html = html[:MAX_CODE_CHARS]
    found = _fast_structure(html)
    tokens, words = found if found is not None else _parsed_structure(html)
    return tokens[:2000], words[:4000]


_local = threading.local()
# (tags matcher, words matcher, whether the reference has any words)
_Matchers = tuple[difflib.SequenceMatcher[str], difflib.SequenceMatcher[str], bool]


def _reference_matchers(ref_html: str) -> _Matchers:
    """Matchers for (tags, words) with the reference parsed and indexed once.

    A reference is scored against many answers (rollouts, models). difflib indexes the
    second sequence once (``set_seq2``) and ``set_seq1`` resets all per-answer state,
    so reusing a matcher gives the fresh matcher's ratio. Per thread: a matcher holds
    the answer being compared.
    """
    cache: dict[str, _Matchers] | None
    cache = getattr(_local, "matchers", None)
    if cache is None:
        cache = _local.matchers = {}
    found = cache.get(ref_html)
    if found is None:
        if len(cache) >= 256:
            cache.clear()
        tags, words = html_structure(ref_html)
        found = cache[ref_html] = (
            difflib.SequenceMatcher(None, [], tags, autojunk=False),
            difflib.SequenceMatcher(None, [], words, autojunk=False),
            bool(words),
        )
    return found


# Rule: structural similarity of the DOM skeleton (tag + attribute-name sequence),
# as in Design2Code's block/structure matching (Si et al. 2024), weighted 0.8, plus
# 0.2 for the visible text — a sequence-matching ratio for each.
def code_html(prediction: str, target: Any, sample: Sample) -> Score:
    """0.8 · tag-structure similarity + 0.2 · text similarity to the reference HTML."""
    code, meta, _ = _code(prediction, ("html", "htm"))
    tags, words = html_structure(code)
    if not tags:
        meta["format"] = 0.0
        return Score(0.0, None, "no HTML elements found", meta)
    tag_matcher, word_matcher, ref_has_words = _reference_matchers(str(target))
    tag_matcher.set_seq1(tags)
    word_matcher.set_seq1(words)
    structure, text = tag_matcher.ratio(), word_matcher.ratio()
    if not words and not ref_has_words:
        text = 1.0
    value = 0.8 * structure + 0.2 * text
    meta.update(structure=structure, text=text)
    why = f"structure {structure:.3f}, text {text:.3f} (html via {meta['extraction']})"
    return Score(min(1.0, value), f"{len(tags)} tags", why, meta)
