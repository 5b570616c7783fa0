"""Each shipped benchmark end to end on a tiny official-layout copy: load -> score
hand-written predictions -> the OFFICIAL aggregate equals the hand-computed value."""

from __future__ import annotations

from pathlib import Path

import pytest

from evalkit.bench.aggregate import AggregateResult, Scored, aggregate
from evalkit.bench.loader import load
from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample
from tests.fixtures.bench import official


def score_letter(sample: Sample, prediction: str) -> float:
    """Exact letter match (the multiple-choice scorer's job, reduced to its core)."""
    return float(prediction.strip().upper() == str(sample.target))


def run(name: str, root: Path, predictions: dict[str, str]) -> tuple[list[Sample], AggregateResult]:
    spec = get_benchmark(name)
    samples = load(spec, root)
    assert sorted(s.id for s in samples) == sorted(predictions), "fixture ids changed"
    scored = [Scored(s, score_letter(s, predictions[s.id])) for s in samples]
    return samples, aggregate(spec, scored)


def test_videomme_overall_and_duration_breakdown(tmp_path: Path) -> None:
    root = official.videomme(tmp_path)
    preds = {"001-1": "A", "001-2": "C", "002-1": "C", "002-2": "D", "003-1": "B", "003-2": "B"}
    samples, res = run("Video-MME", root, preds)
    assert res.overall == pytest.approx(400 / 6)
    assert res.breakdowns["duration"] == pytest.approx(
        {"short": 50.0, "medium": 100.0, "long": 50.0}
    )
    assert res.breakdowns["domain"] == pytest.approx({"Knowledge": 50.0, "Sports": 100.0})
    assert res.breakdowns["task"] == pytest.approx(
        {"Counting Problem": 200 / 3, "OCR Problems": 200 / 3}
    )
    first = next(s for s in samples if s.id == "001-1")
    assert first.options == ["one 001-1", "two 001-1", "three 001-1", "four 001-1"]
    assert first.media[0].path.endswith("data/vidA.mp4")
    assert (res.n, res.n_scored, res.n_unscored) == (6, 6, 0)


def test_videomme_subtitles_variant_attaches_the_srt_where_one_exists(tmp_path: Path) -> None:
    root = official.videomme(tmp_path)
    spec = get_benchmark("video-mme:with_subtitles")
    samples = {s.id: s for s in load(spec, root)}
    assert samples["001-1"].fields["subtitle_path"].endswith("subtitle/vidA.srt")
    assert "subtitle_path" not in samples["002-1"].fields
    assert spec.prompt.template == "multiple_choice_subtitles"
