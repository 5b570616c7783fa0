"""Free text: open-ended answers by ROUGE, OCR transcriptions by word error rate.

Both scorers give exactly the numbers of their reference libraries (rouge-score's
``RougeScorer(["rouge1", "rouge2", "rougeL"], use_stemmer=True)`` and jiwer's ``wer`` /
``cer``) without their per-call overhead; tests/test_scoring_speed_equivalence.py
checks the equality on random and hand-picked texts.
"""

from __future__ import annotations

import re
from collections import Counter
from functools import lru_cache
from itertools import pairwise
from typing import Any, NamedTuple

from evalkit.sample import Sample
from evalkit.scoring.extract import final_span
from evalkit.scoring.types import Score


class _StemmedTokenizer:
    """rouge-score's own tokenizer and Porter stemmer, with the stemmer memoised.

    Same tokens as ``RougeScorer(use_stemmer=True)`` (it calls the same function); only
    repeated words skip the stemmer, which dominates ROUGE's cost on short answers.
    """

    def __init__(self) -> None:
        from nltk.stem import porter

        self.stem = lru_cache(maxsize=1 << 16)(porter.PorterStemmer().stem)

    def tokenize(self, text: str) -> list[str]:
        from rouge_score import tokenize

        tokens: list[str] = tokenize.tokenize(text, self)
        return tokens


class _Grams(NamedTuple):
    # One text's tokens as ROUGE needs them; n-gram counts are exact integers, so
    # counting them here instead of in rouge_scorer._create_ngrams changes no number.
    tokens: tuple[str, ...]
    unigrams: Counter[str]
    bigrams: Counter[tuple[str, str]]


@lru_cache(maxsize=1)
def _tokenizer() -> _StemmedTokenizer:
    return _StemmedTokenizer()


def _grams(text: str) -> _Grams:
    tokens = tuple(_tokenizer().tokenize(text))
    return _Grams(tokens, Counter(tokens), Counter(pairwise(tokens)))


# References repeat (every rollout of a prompt, every model on a benchmark): their
# tokens, stems and n-grams are computed once.
_reference_grams = lru_cache(maxsize=4096)(_grams)


def _lcs_length(a: tuple[str, ...], b: tuple[str, ...]) -> int:
    """Length of the longest common subsequence of two token sequences (exact).

    Bit-parallel dynamic programming (Allison & Dix 1986; Hyyrö 2004): one bit per token
    of ``a``, one big-integer step per token of ``b`` — the same number as rouge-score's
    O(len(a)·len(b)) table, computed without a Python loop over the table.
    """
    masks: dict[str, int] = {}
    for i, tok in enumerate(a):
        masks[tok] = masks.get(tok, 0) | (1 << i)
    full = (1 << len(a)) - 1
    v = full
    for tok in b:
        u = v & masks.get(tok, 0)
        v = ((v + u) | (v - u)) & full
    return len(a) - v.bit_count()


def _overlap(a: Counter[Any], b: Counter[Any]) -> int:
    """Clipped n-gram matches: the sum over n-grams of min(count in a, count in b)."""
    if len(a) > len(b):
        a, b = b, a
    return sum(min(n, b[g]) for g, n in a.items() if g in b)


def _rouge_f1(ref: _Grams, hyp: _Grams) -> dict[str, float]:
    """ROUGE-1/2/L F1 exactly as rouge_scorer.RougeScorer.score(ref, hyp) computes them."""
    from rouge_score.scoring import fmeasure

    parts: dict[str, float] = {}
    for name, r, h, n in (
        ("rouge1", ref.unigrams, hyp.unigrams, 1),
        ("rouge2", ref.bigrams, hyp.bigrams, 2),
    ):
        # rouge_scorer._score_ngrams: the same integers, the same two divisions
        overlap = _overlap(r, h)
        precision = overlap / max(len(hyp.tokens) - n + 1, 1)
        recall = overlap / max(len(ref.tokens) - n + 1, 1)
        parts[name] = fmeasure(precision, recall)
    if not ref.tokens or not hyp.tokens:  # rouge_scorer._score_lcs returns an int 0 here
        parts["rougeL"] = 0
    else:
        lcs = _lcs_length(ref.tokens, hyp.tokens)
        parts["rougeL"] = fmeasure(lcs / len(hyp.tokens), lcs / len(ref.tokens))
    return parts


def _text_format(span_text: str, marked: bool) -> float:
    return 0.0 if not span_text else (1.0 if marked else 0.5)


# Rule: mean of ROUGE-1/2/L F1 with Porter stemming (rouge-score, Lin 2004), the
# open-ended reward of Video-R1 / EasyVideoR1 (compute_rouge_score averages the three).
def open_ended(prediction: str, target: Any, sample: Sample) -> Score:
    """Mean of ROUGE-1, ROUGE-2 and ROUGE-L F1 between the answer and the reference."""
    span = final_span(prediction)
    meta: dict[str, Any] = {"format": _text_format(span.text, span.marked)}
    refs = target if isinstance(target, list) else [target]
    refs = [str(r) for r in refs if r is not None and str(r).strip()]
    if not span.text or not refs:
        return Score(0.0, span.text, "empty answer or reference", meta)
    hyp = _grams(span.text[:20_000])  # ROUGE-L grows with the length; no reference is this long
    best, best_parts = 0.0, {}
    for ref in refs:  # several references: the best match counts
        parts = _rouge_f1(_reference_grams(ref), hyp)
        value = sum(parts.values()) / 3
        if value >= best:
            best, best_parts = value, parts
    meta.update(best_parts)
    return Score(min(1.0, best), span.text, f"ROUGE mean F1 {best:.3f} ({span.method})", meta)


_SPACES = re.compile(r"\s+")


def _norm_ocr(s: str) -> str:
    return _SPACES.sub(" ", s).strip()


def _edit_rate(ref: list[str] | str, hyp: list[str] | str) -> float:
    """Levenshtein distance / reference length: jiwer's (S + D + I) / (H + S + D).

    Words are mapped to integers first (as jiwer does) so that equal ids mean equal
    words — no reliance on hashes. An optimal alignment's S + D + I is the distance
    and H + S + D the reference length, so the float is jiwer's to the last bit.
    """
    from rapidfuzz.distance import Levenshtein

    if isinstance(ref, list):
        ids: dict[str, int] = {}
        ref = [ids.setdefault(w, len(ids)) for w in ref]  # type: ignore[misc]
        hyp = [ids.setdefault(w, len(ids)) for w in hyp]  # type: ignore[misc]
    return float(Levenshtein.distance(ref, hyp)) / float(len(ref))


# Rule: 1 - WER (Levenshtein over words, as jiwer.wer), clipped at 0, with exact match
# recorded — the OCR reward of EasyVideoR1 / OCRBench-style word accuracy. CER (as
# jiwer.cer) is recorded too since WER is coarse for scripts without spaces.
def ocr(prediction: str, target: Any, sample: Sample) -> Score:
    """max(0, 1 - WER) between the transcribed text and the reference text."""
    span = final_span(prediction)
    hyp, ref = _norm_ocr(span.text), _norm_ocr(str(target if target is not None else ""))
    exact = hyp == ref
    meta: dict[str, Any] = {"format": _text_format(hyp, span.marked), "exact_match": exact}
    if not ref:
        return Score(1.0 if exact else 0.0, hyp, "empty reference", meta)
    if not hyp:
        meta.update(wer=1.0, cer=1.0)
        return Score(0.0, hyp, "empty transcription", meta)
    # after _norm_ocr words are separated by exactly one space: jiwer's word split
    wer = _edit_rate(ref.split(" "), hyp.split(" "))
    meta.update(wer=wer, cer=_edit_rate(ref, hyp))
    return Score(max(0.0, 1.0 - wer), hyp, f"WER {wer:.3f} ({span.method})", meta)
