"""SynthVideo: determinism, ids, the spec through the registry and loader, scoring, CLI."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalkit.bench.aggregations import Scored, aggregate
from evalkit.bench.loader import load
from evalkit.bench.registry import get_benchmark
from evalkit.prompts import render
from evalkit.sample import Sample
from evalkit.scoring import canonical_task_type, score
from evalkit.synthvideo import FAMILIES, generate, make_row, read_rows
from evalkit.synthvideo.scene import Canvas

CANVAS = Canvas(224, 168, 4.0)
TASK_TYPES = {
    "moving_shape": "multiple_choice",
    "flash_count": "numerical",
    "appearance": "temporal_grounding",
    "location": "spatial_grounding",
    "tracking": "spatiotemporal_grounding",
    "word": "ocr",
    "equation": "math",
    "yes_no": "boolean",
}


@pytest.fixture(scope="module")
def root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("synthvideo")
    generate(out, 2, "test", seed=0)
    generate(out, 1, "train", seed=0)
    return out


def test_one_family_per_task_type_evalkit_scores() -> None:
    assert {name: FAMILIES.get(name).task_type for name in FAMILIES} == TASK_TYPES
    for task_type in TASK_TYPES.values():
        assert canonical_task_type(task_type) == task_type


def test_same_seed_gives_byte_identical_annotations_and_identical_frames(tmp_path: Path) -> None:
    a = generate(tmp_path / "a", 1, "test", seed=5, families=["tracking", "word"])
    b = generate(tmp_path / "b", 1, "test", seed=5, families=["tracking", "word"])
    assert a.read_bytes() == b.read_bytes()
    from tests.test_synthvideo_pixels import decode

    for row in read_rows(a):
        assert np.array_equal(decode(a.parent / row["video"]), decode(b.parent / row["video"]))


def test_frames_are_a_function_of_seed_split_family_and_index() -> None:
    for name in FAMILIES:
        row1, f1 = make_row(name, "test", 3, 0, CANVAS)
        row2, f2 = make_row(name, "test", 3, 0, CANVAS)
        assert row1 == row2 and np.array_equal(f1, f2), name


def _content(rows: list[dict[str, Any]]) -> list[str]:
    return [json.dumps([r["question"], r["options"], r["answer"]]) for r in rows]


def _rows_of(split: str, seed: int) -> list[dict[str, Any]]:
    return [make_row(f, split, i, seed, CANVAS)[0] for f in FAMILIES for i in range(2)]


def test_different_seed_or_split_gives_different_questions() -> None:
    base, other_seed, train = _rows_of("test", 0), _rows_of("test", 1), _rows_of("train", 0)
    assert _content(base) != _content(other_seed)
    # Independent streams: at most a chance coincidence between the splits, row by row.
    same = sum(a == b for a, b in zip(_content(base), _content(train), strict=True))
    assert same <= 2
    assert {r["split"] for r in train} == {"train"}


def test_more_samples_leave_the_first_ones_unchanged() -> None:
    short = [make_row("moving_shape", "test", i, 9, CANVAS)[0] for i in range(2)]
    long = [make_row("moving_shape", "test", i, 9, CANVAS)[0] for i in range(4)]
    assert long[:2] == short


def test_ids_are_stable_unique_and_name_family_split_index(root: Path) -> None:
    rows = read_rows(root / "synthvideo_test.jsonl")
    ids = [r["id"] for r in rows]
    assert len(set(ids)) == len(ids) == 2 * len(FAMILIES)
    assert "moving_shape-test-0001" in ids and "yes_no-test-0000" in ids
    for r in rows:
        assert r["video"] == f"videos/{r['id']}.mp4" and (root / r["video"]).is_file()
        assert 4.0 <= r["duration"] <= 8.0 and r["num_frames"] == round(r["duration"] * r["fps"])


def test_bad_arguments_fail_before_writing(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="split"):
        generate(tmp_path / "x", 1, "dev")
    with pytest.raises(ValueError, match="even"):
        generate(tmp_path / "x", 1, width=225)
    with pytest.raises(KeyError, match="did you mean 'word'"):
        generate(tmp_path / "x", 1, families=["words"])
    assert not (tmp_path / "x" / "synthvideo_test.jsonl").exists()


# --- the spec --------------------------------------------------------------------------


def _truth(sample: Sample) -> str:
    """The ground truth written the way a perfect model would answer."""
    t = sample.target
    kind = canonical_task_type(sample.task_type)
    if kind == "spatial_grounding":
        return json.dumps({"bbox_2d": t})
    if kind in ("temporal_grounding", "spatiotemporal_grounding"):
        return json.dumps(t)
    return str(t)


def test_spec_loads_from_the_registry_with_a_train_variant() -> None:
    spec = get_benchmark("synthvideo")
    assert spec.name == "SynthVideo" and spec.references == []
    assert sorted(spec.task_types) == sorted(TASK_TYPES.values())
    assert spec.frames.max_pixels >= 224 * 168 and spec.frames.max_frames == 16
    assert get_benchmark("SynthVideo:train").files[0].path == "synthvideo_train.jsonl"


def test_every_row_becomes_a_sample_the_scorer_gives_full_marks(root: Path) -> None:
    samples = load(get_benchmark("SynthVideo"), root)
    assert len(samples) == 2 * len(FAMILIES)
    for s in samples:
        assert s.task_type == TASK_TYPES[s.fields["family"]]
        assert s.media[0].kind == "video" and Path(s.media[0].path).is_file()
        assert render(s, "plain") and render(s, "thinking")
        got = score(s, _truth(s))
        assert got.value == pytest.approx(1.0), (s.id, got.explanation)
        if s.task_type == "multiple_choice":
            assert 4 <= len(s.options) <= 6 and s.target in s.letters


def _wrong(sample: Sample) -> str:
    t = sample.target
    kind = canonical_task_type(sample.task_type)
    if kind == "multiple_choice":
        return next(letter for letter in sample.letters if letter != t)
    if kind == "boolean":
        return "no" if t == "yes" else "yes"
    if kind in ("numerical", "math"):
        return str(int(t) + 1)
    if kind == "ocr":
        return "NOTHING"
    if kind == "temporal_grounding":
        return json.dumps([t[1] + 1, t[1] + 2])
    if kind == "spatial_grounding":
        return json.dumps({"bbox_2d": [0, 0, 2, 2]})
    return json.dumps({"time": [t["time"][1] + 1, t["time"][1] + 2], "boxes": {}})


def test_a_wrong_answer_scores_below_full_marks(root: Path) -> None:
    for s in load(get_benchmark("SynthVideo"), root):
        assert score(s, _wrong(s)).value < 0.5, s.id


def test_train_variant_loads_the_train_split(root: Path) -> None:
    samples = load(get_benchmark("SynthVideo:train"), root)
    assert len(samples) == len(FAMILIES)
    assert all("-train-" in s.id for s in samples)


def test_aggregate_is_the_macro_mean_over_families_with_breakdowns(root: Path) -> None:
    spec = get_benchmark("SynthVideo")
    samples = load(spec, root)
    # Perfect on everything except one family: the overall is 7/8, whatever the counts.
    scored = [Scored(s, 0.0 if s.fields["family"] == "word" else 1.0) for s in samples]
    scored += [Scored(s, 1.0) for s in samples if s.fields["family"] == "yes_no"] * 3
    result = aggregate(spec, scored)
    assert result.overall == pytest.approx(100 * 7 / 8)
    assert set(result.breakdowns["family"]) == set(FAMILIES)
    assert result.breakdowns["family"]["word"] == 0.0
    assert "kind" in result.breakdowns and result.metrics["pooled"] != result.overall


def test_cli_writes_the_split_the_spec_reads(tmp_path: Path, capsys) -> None:
    from evalkit.cli.main import main

    rc = main(["synth", "--out", str(tmp_path), "--split", "test", "--n", "1", "--seed", "3"])
    assert rc == 0
    assert "8 questions" in capsys.readouterr().out
    assert len(load(get_benchmark("SynthVideo"), tmp_path)) == len(FAMILIES)
    assert main(["synth", "--out", str(tmp_path), "--families", "nope"]) == 2


def test_unified_export_loads_as_the_same_questions(root: Path) -> None:
    from evalkit.bench.unified import load_unified
    from evalkit.synthvideo import write_unified

    by_id = {s.id: s for s in load(get_benchmark("SynthVideo"), root)}
    unified = load_unified(write_unified(root / "synthvideo_test.jsonl"))
    assert len(unified) == len(by_id)
    for u in unified:
        s = by_id[u.id.removeprefix("SynthVideo/")]
        assert (u.task_type, u.question, u.options) == (s.task_type, s.question, s.options)
        assert u.media == s.media
        assert score(u, _truth(s)).value == pytest.approx(1.0), u.id


@pytest.mark.parametrize(("width", "height", "fps"), [(112, 84, 2.0), (448, 336, 8.0)])
def test_every_family_draws_at_other_sizes_and_rates(width: int, height: int, fps: float) -> None:
    canvas = Canvas(width, height, fps)
    for name in FAMILIES:
        row, frames = make_row(name, "test", 0, 0, canvas)
        assert frames.shape == (row["num_frames"], height, width, 3) and frames.dtype == np.uint8
        assert 4.0 <= row["duration"] <= 8.0
