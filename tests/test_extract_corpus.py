"""Regression suite: the robust rule against hand-labelled verbose replies of video-LLMs.

tests/data/extract_corpus.jsonl holds replies in the styles real models write (reasoning
then a conclusion, markdown, hedges, refusals, echoed options, invented continuations,
Chinese, think/answer tags, boxed, captions, yes/no variants), each with its options and
the answer a careful reader takes from it (a letter, yes/no, or "none"), grouped by
failure class (``cls``). Run with ``-s`` to see the confusion by class.
"""

from __future__ import annotations

import json
import string
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from evalkit.sample import Sample
from evalkit.scoring import score

CORPUS = Path(__file__).parent / "data" / "extract_corpus.jsonl"
AGREEMENT = 0.99


def _rows() -> list[dict[str, Any]]:
    return [json.loads(line) for line in CORPUS.read_text(encoding="utf-8").splitlines() if line]


def _read(row: dict[str, Any]) -> str:
    """The answer the evalkit rule reads from a row's reply ("none" for no answer)."""
    target = "yes" if row["task"] == "boolean" else "A"
    sample = Sample(
        id=row["id"], task_type=row["task"], question="?", target=target, options=row["options"]
    )
    got = score(sample, row["reply"]).answer
    return "none" if got is None else str(got)


def _report(rows: list[dict[str, Any]], got: list[str]) -> str:
    by_cls: dict[str, list[tuple[dict[str, Any], str]]] = defaultdict(list)
    for row, g in zip(rows, got, strict=True):
        by_cls[row["cls"]].append((row, g))
    lines = [f"{'class':16s} {'n':>4s} {'agree':>6s}  confusion (label->read: count)"]
    for cls, pairs in sorted(by_cls.items()):
        wrong = Counter(f"{r['label']}->{g}" for r, g in pairs if g != r["label"])
        agree = sum(g == r["label"] for r, g in pairs)
        confusion = ", ".join(f"{k}: {v}" for k, v in sorted(wrong.items())) or "-"
        lines.append(f"{cls:16s} {len(pairs):4d} {agree:6d}  {confusion}")
    misses = [
        f"  {r['id']}: label {r['label']}, read {g}: {r['reply'][:90]!r}"
        for r, g in zip(rows, got, strict=True)
        if g != r["label"]
    ]
    return "\n".join(lines + (["misread:", *misses] if misses else []))


def test_corpus_is_large_and_labelled() -> None:
    rows = _rows()
    assert len(rows) >= 150
    assert len({r["id"] for r in rows}) == len(rows)
    for r in rows:
        assert r["task"] in ("multiple_choice", "boolean"), r["id"]
        allowed = {"yes", "no", "none"} if r["task"] == "boolean" else set(string.ascii_uppercase)
        assert r["label"] in allowed | {"none"}, r["id"]


def test_robust_rule_agrees_with_the_labels(monkeypatch: pytest.MonkeyPatch) -> None:
    # Questions may have up to 26 options (A-Z); the loader widens OPTION_LETTERS to match.
    monkeypatch.setattr("evalkit.sample.OPTION_LETTERS", string.ascii_uppercase)
    rows = _rows()
    got = [_read(r) for r in rows]
    report = _report(rows, got)
    print("\n" + report)
    agreement = sum(g == r["label"] for r, g in zip(rows, got, strict=True)) / len(rows)
    assert agreement >= AGREEMENT, f"agreement {agreement:.3f} < {AGREEMENT}\n{report}"
