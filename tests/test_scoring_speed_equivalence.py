"""The fast OCR, open-ended and HTML scorers give exactly the reference numbers.

Oracles: jiwer (WER/CER), rouge-score's own ``RougeScorer(use_stemmer=True)`` and, for
HTML, a copy of the previous html.parser-only implementation kept here for the test.
Equality is exact (``==`` on floats, same types), on random and hand-picked inputs.
"""

from __future__ import annotations

import difflib
from html.parser import HTMLParser
from typing import Any

import jiwer
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from rouge_score import rouge_scorer

from evalkit.scoring import SCORERS
from evalkit.scoring.code import _code, _fast_structure, html_structure
from evalkit.scoring.extract import final_span
from evalkit.scoring.text import _edit_rate, _grams, _lcs_length, _norm_ocr, _rouge_f1
from tests._scoring_helpers import sample

SETTINGS = settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])

# Words that stem, punctuation, digits, case, non-ASCII letters and odd whitespace.
WORDS = [
    "the",
    "a",
    "an",
    "cat",
    "cats",
    "running",
    "runs",
    "ran",
    "run",
    "dog",
    "dogs",
    "is",
    "was",
    "were",
    "field",
    "fields",
    "fly",
    "flies",
    "happily",
    "happy",
    "generously",
    "caresses",
    "ponies",
    "12",
    "3.5",
    "x-ray",
    "RUNNING",
    "Über",
    "café",
    "naïve",
    "😀",
    "don't",
    "it's",
    ",",
    ".",
    "!",
    "?",
    ";",
    "(",
    ")",
    "-",
    "_",
    "/",
    "東京",
    "答案",
    "zz",
    "zzz",
    "abcd",
]
SEPARATORS = [" ", "  ", "\t", "\n", "\u00a0", "\u3000", "\x1c", "", " - "]


def _texts() -> st.SearchStrategy[str]:
    piece = st.one_of(st.sampled_from(WORDS), st.text(max_size=6))
    return st.lists(st.tuples(piece, st.sampled_from(SEPARATORS)), max_size=18).map(
        lambda parts: "".join(w + s for w, s in parts)
    )


HAND_PICKED = [
    ("", ""),
    ("STOP AHEAD 200 FT", "STOP AHEAD 2OO FT"),
    ("STOP AHEAD 200 FT", "stop"),
    ("  a  b ", "a b"),
    ("a man rides a horse", "A man is riding a horse across the field."),
    ("running runs ran", "run run run"),
    ("the the the the", "the"),
    ("東京 タワー", "東京タワー"),
    ("x", "x x x x x x x x x x"),
    ("!!!", "..."),
    ("Über café", "uber cafe"),
    ("word\u00a0word", "word word"),
]

# ---------------------------------------------------------------- OCR (jiwer)


def _ocr_oracle(prediction: str, target: Any) -> tuple[float, dict[str, Any]]:
    # the previous implementation: jiwer on the same normalised strings
    span = final_span(prediction)
    hyp, ref = _norm_ocr(span.text), _norm_ocr(str(target if target is not None else ""))
    exact = hyp == ref
    fmt = 0.0 if not hyp else (1.0 if span.marked else 0.5)
    meta: dict[str, Any] = {"format": fmt, "exact_match": exact}
    if not ref:
        return (1.0 if exact else 0.0), meta
    if not hyp:
        meta.update(wer=1.0, cer=1.0)
        return 0.0, meta
    wer = float(jiwer.wer(ref, hyp))
    meta.update(wer=wer, cer=float(jiwer.cer(ref, hyp)))
    return max(0.0, 1.0 - wer), meta


def _check_ocr(ref: str, pred: str) -> None:
    got = SCORERS.get("ocr")(pred, ref, sample("ocr", ref))
    value, meta = _ocr_oracle(pred, ref)
    assert (got.value, got.metadata) == (value, meta)
    assert [type(v) for v in got.metadata.values()] == [type(v) for v in meta.values()]


@pytest.mark.parametrize(("ref", "pred"), HAND_PICKED + [(b, a) for a, b in HAND_PICKED])
def test_ocr_equals_jiwer_hand_picked(ref: str, pred: str) -> None:
    _check_ocr(ref, pred)
    _check_ocr(ref, f"<think>maybe {ref}?</think><answer>{pred}</answer>")


@SETTINGS
@given(ref=_texts(), pred=_texts())
def test_ocr_equals_jiwer_random(ref: str, pred: str) -> None:
    _check_ocr(ref, pred)


@SETTINGS
@given(ref=st.lists(st.sampled_from("abcab"), min_size=1, max_size=30), data=st.data())
def test_edit_rate_equals_jiwer_on_repetitive_words(ref: list[str], data: Any) -> None:
    # few distinct words: many equally good alignments, the distance must still agree
    hyp = data.draw(st.lists(st.sampled_from("abcd"), min_size=1, max_size=30))
    r, h = " ".join(ref), " ".join(hyp)
    assert _edit_rate(ref, hyp) == jiwer.wer(r, h)
    assert _edit_rate(r, h) == jiwer.cer(r, h)


# ---------------------------------------------------------------- ROUGE (rouge-score)

ROUGE = rouge_scorer.RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)


def _check_rouge(ref: str, pred: str) -> None:
    want = {k: v.fmeasure for k, v in ROUGE.score(ref, pred).items()}
    got = _rouge_f1(_grams(ref), _grams(pred))
    assert list(got.items()) == list(want.items())
    assert [type(v) for v in got.values()] == [type(v) for v in want.values()]
    if pred.strip() and ref.strip():  # the scorer: the mean of the three, same order
        score = SCORERS.get("open_ended")(pred, ref, sample("open_ended", ref))
        assert score.value == min(1.0, sum(want.values()) / 3)


@pytest.mark.parametrize(("ref", "pred"), HAND_PICKED + [(b, a) for a, b in HAND_PICKED])
def test_rouge_equals_rouge_score_hand_picked(ref: str, pred: str) -> None:
    _check_rouge(ref, pred)


@SETTINGS
@given(ref=_texts(), pred=_texts())
def test_rouge_equals_rouge_score_random(ref: str, pred: str) -> None:
    _check_rouge(ref, pred)


def test_open_ended_several_references_equal_rouge_score() -> None:
    refs = ["A man rides a horse.", "Someone is riding a brown horse across a field."]
    pred = "<answer>A man in red rides a brown horse through a field.</answer>"
    got = SCORERS.get("open_ended")(pred, refs, sample("open_ended", refs))
    text = final_span(pred).text
    means = [sum(v.fmeasure for v in ROUGE.score(r, text).values()) / 3 for r in refs]
    assert got.value == max(means)


@SETTINGS
@given(
    a=st.lists(st.sampled_from("abcde"), max_size=80),
    b=st.lists(st.sampled_from("abcdef"), max_size=80),
)
def test_lcs_length_equals_rouge_table(a: list[str], b: list[str]) -> None:
    want = rouge_scorer._lcs_table(a, b)[-1][-1]
    assert _lcs_length(tuple(a), tuple(b)) == want


# ---------------------------------------------------------------- HTML (old implementation)


class _OldStructure(HTMLParser):
    # verbatim logic of the html.parser-only implementation this module replaced
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


def _old_structure(html: str) -> tuple[list[str], list[str]]:
    parser = _OldStructure()
    try:
        parser.feed(html[:100_000])
        parser.close()
    except Exception:
        pass
    return parser.tokens[:2000], parser.words[:4000]


def _old_value(pred_html: str, ref_html: str) -> tuple[float, float | None, float | None]:
    tags, words = _old_structure(pred_html)
    if not tags:
        return 0.0, None, None
    ref_tags, ref_words = _old_structure(ref_html)
    structure = difflib.SequenceMatcher(None, tags, ref_tags, autojunk=False).ratio()
    text = difflib.SequenceMatcher(None, words, ref_words, autojunk=False).ratio()
    if not words and not ref_words:
        text = 1.0
    return min(1.0, 0.8 * structure + 0.2 * text), structure, text


HTML_CORPUS = [
    "<html><body><h1>Hi</h1><ul><li>a</li><li>b</li></ul></body></html>",
    "<!DOCTYPE html>\n<html lang=en><head><title>T</title></head><body></body></html>",
    '<div class="a b" id=x STYLE="color:red" data-k=\'v\'>Tom &amp; Jerry&nbsp;!</div>',
    "<br/><br /><img src=a.png alt='x'/><input disabled>",
    "<P>Upper <B>case</B></P><!-- a comment --><!---->",
    '<a href=foo/>x</a><a href = "y" >z</a>',
    "a < b and c > d",
    "<script>if (a<b) {}</script><style>p{}</style>",
    "<title><b>not a tag</b></title><textarea>x<y</textarea>",
    "<title>a</title><textarea>b &amp; c</textarea><title/><TITLE>x</Title>",
    "<div\x0bclass=a>vertical tab</div><p>\u00a0nbsp\u00a0words</p>",
    "<!-- a -- b --><!--->x<!-- c --->",
    "<div a=\"1\"b='2'>no space</div>&lt;p&gt; &#x41;&#65; &unknown; &amp",
    "<svg viewBox='0 0 1 1'><path d=\"M0 0\"/></svg><math><mi>x</mi></math>",
    "<?php echo 1 ?><![CDATA[x]]></p></  p ></p x>",
    "",
    "text only",
    "<ul>" + "<li class=item>entry</li>" * 300 + "</ul>",
    "x<1 <= 2 << <3 end<",  # a "<" opening no markup: a word of its own, at the end too
    "<p>a <\n<b>c</b> < &amp;<</p>",
    "<" * 5000,  # a degenerate reply: html.parser hands each "<" over on its own
]

_TAGS = [
    "div",
    "p",
    "span",
    "A",
    "li",
    "br",
    "img",
    "title",
    "script",
    "h1",
    "x-y",
    "b2",
    "textarea",
]
_ATTRS = [
    "",
    " class=a",
    ' id="x"',
    " data-v='q'",
    " style='c'",
    " CHECKED",
    " href=a/b",
    " a=1 b=2",
    ' x="a>b"',
    " =x",
    "\tk = 'v'",
    " on:click=go",
]
_TEXTS = ["", "hello", " two words ", "&amp;", "&nbsp;x", "&#65;", "a < b", "> z", "\n", "&zz"]


def _html() -> st.SearchStrategy[str]:
    start = st.builds(
        lambda t, a, s: f"<{t}{a}{s}>",
        st.sampled_from(_TAGS),
        st.sampled_from(_ATTRS),
        st.sampled_from(["", "/", " /", " "]),
    )
    end = st.builds(lambda t, s: f"</{t}{s}>", st.sampled_from(_TAGS), st.sampled_from(["", " "]))
    other = st.sampled_from(
        ["<!DOCTYPE html>", "<!-- c -->", "<!-->", "<!---->", "<", "</>", "<!x>", "<?p?>"]
    )
    piece = st.one_of(start, end, st.sampled_from(_TEXTS), other, st.text(max_size=4))
    return st.lists(piece, max_size=25).map("".join)


@pytest.mark.parametrize("html", HTML_CORPUS)
def test_html_structure_equals_old_corpus(html: str) -> None:
    assert html_structure(html) == _old_structure(html)


@SETTINGS
@given(html=_html())
def test_html_structure_equals_old_random(html: str) -> None:
    assert html_structure(html) == _old_structure(html)


def test_fast_path_is_taken_for_plain_markup() -> None:
    # the speed-up only counts if ordinary documents avoid html.parser
    plain = [HTML_CORPUS[i] for i in (0, 1, 2, 3, 4, 6, 13, 15, 16, 17, 18, 19, 20)]
    for html in plain:
        assert _fast_structure(html) is not None, html
    for html in [HTML_CORPUS[i] for i in (5, 7, 8, 9, 10, 11, 12, 14)]:
        assert _fast_structure(html) is None, html


@SETTINGS
@given(pred=_html(), ref=st.sampled_from(HTML_CORPUS))
def test_code_html_value_equals_old(pred: str, ref: str) -> None:
    fenced = f"```html\n{pred}\n```"
    got = SCORERS.get("code_html")(fenced, ref, sample("code_html", ref))
    body = _code(fenced, ("html", "htm"))[0]  # extraction is unchanged code
    meta = got.metadata
    assert (got.value, meta.get("structure"), meta.get("text")) == _old_value(body, ref)


def test_scorers_agree_across_threads() -> None:
    # the HTML matchers are per thread and the text caches are shared: same numbers
    from concurrent.futures import ThreadPoolExecutor

    jobs = (
        [
            ("code_html", f"```html\n{pred}\n```", ref)
            for pred in HTML_CORPUS
            for ref in HTML_CORPUS[:4]
        ]
        + [("open_ended", a, b) for a, b in HAND_PICKED]
        + [("ocr", a, b) for a, b in HAND_PICKED]
    )

    def run(job: tuple[str, str, str]) -> float | None:
        task, pred, ref = job
        return SCORERS.get(task)(pred, ref, sample(task, ref)).value

    serial = [run(j) for j in jobs]
    with ThreadPoolExecutor(max_workers=4) as pool:
        for _ in range(3):
            assert list(pool.map(run, jobs)) == serial
