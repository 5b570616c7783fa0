"""Free text: open-ended answers by ROUGE, OCR transcriptions by word error rate."""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from typing import Any

from evalkit.sample import Sample
from evalkit.scoring.extract import final_span
from evalkit.scoring.router import scorer
from evalkit.scoring.types import Score

_local = threading.local()  # one RougeScorer per thread: building it loads the stemmer


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


def _rouge() -> Any:
    sc = getattr(_local, "rouge", None)
    if sc is None:
        from rouge_score import rouge_scorer

        sc = _local.rouge = rouge_scorer.RougeScorer(
            ["rouge1", "rouge2", "rougeL"], tokenizer=_StemmedTokenizer()
        )
    return sc


def _text_format(span_text: str, marked: bool) -> float:
    return 0.0 if not span_text else (1.0 if marked else 0.5)


# Rule: mean of ROUGE-1/2/L F1 with Porter stemming (rouge-score, Lin 2004), the
# open-ended reward of Video-R1 / EasyVideoR1 (compute_rouge_score averages the three).
@scorer("open_ended", "open-ended", "open", "free_form", "caption", "rouge")
def open_ended(prediction: str, target: Any, sample: Sample) -> Score:
    """Mean of ROUGE-1, ROUGE-2 and ROUGE-L F1 between the answer and the reference."""
    span = final_span(prediction)
    meta: dict[str, Any] = {"format": _text_format(span.text, span.marked)}
    refs = target if isinstance(target, list) else [target]
    refs = [str(r) for r in refs if r is not None and str(r).strip()]
    if not span.text or not refs:
        return Score(0.0, span.text, "empty answer or reference", meta)
    text = span.text[:20_000]  # ROUGE-L is quadratic; no reference is this long
    best, best_parts = 0.0, {}
    for ref in refs:  # several references: the best match counts
        parts = {k: v.fmeasure for k, v in _rouge().score(ref, text).items()}
        value = sum(parts.values()) / 3
        if value >= best:
            best, best_parts = value, parts
    meta.update(best_parts)
    return Score(min(1.0, best), span.text, f"ROUGE mean F1 {best:.3f} ({span.method})", meta)


def _norm_ocr(s: str) -> str:
    return re.sub(r"\s+", " ", s).strip()


# Rule: 1 - WER (jiwer; Levenshtein over words), clipped at 0, with exact match recorded —
# the OCR reward of EasyVideoR1 / OCRBench-style word accuracy. CER is recorded too since
# WER is coarse for scripts without spaces.
@scorer("ocr", "OCR", "text_recognition")
def ocr(prediction: str, target: Any, sample: Sample) -> Score:
    """max(0, 1 - WER) between the transcribed text and the reference text."""
    import jiwer

    span = final_span(prediction)
    hyp, ref = _norm_ocr(span.text), _norm_ocr(str(target if target is not None else ""))
    exact = hyp == ref
    meta: dict[str, Any] = {"format": _text_format(hyp, span.marked), "exact_match": exact}
    if not ref:
        return Score(1.0 if exact else 0.0, hyp, "empty reference", meta)
    if not hyp:
        meta.update(wer=1.0, cer=1.0)
        return Score(0.0, hyp, "empty transcription", meta)
    wer = float(jiwer.wer(ref, hyp))
    meta.update(wer=wer, cer=float(jiwer.cer(ref, hyp)))
    return Score(max(0.0, 1.0 - wer), hyp, f"WER {wer:.3f} ({span.method})", meta)
