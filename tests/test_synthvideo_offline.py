"""Offline trajectories for SynthVideo-train: per-item text, an exact wrong share, seeded."""

from __future__ import annotations

import random

import pytest

from evalkit.synthvideo.offline import offline_rows, trajectory, wrong_answer, wrong_ids


def _row(i: int, family: str = "yes_no", answer: object = "yes", **extra: object) -> dict:
    base = {
        "id": f"{family}-train-{i:04d}",
        "family": family,
        "kind": "present",
        "task_type": "boolean",
        "question": "Is there a red circle in the video?",
        "options": [],
        "answer": answer,
        "video": f"videos/{family}-train-{i:04d}.mp4",
        "duration": 4.0,
        "width": 224,
        "height": 168,
        "params": {"target": f"red circle {i}"},
    }
    return base | extra


def test_exactly_the_asked_share_of_ids_is_wrong():
    ids = [f"x{i}" for i in range(20)]
    assert len(wrong_ids(ids, 0.3, seed=0)) == 6
    assert wrong_ids(ids, 0.3, seed=0) == wrong_ids(list(reversed(ids)), 0.3, seed=0)
    assert wrong_ids(ids, 0.3, seed=0) != wrong_ids(ids, 0.3, seed=1)


def test_a_share_outside_zero_one_is_refused():
    with pytest.raises(ValueError, match="wrong share"):
        wrong_ids(["a"], 1.5, seed=0)


def test_wrong_rows_end_in_another_answer_and_right_rows_in_the_solution():
    rows = offline_rows([_row(i, answer="yes" if i % 2 else "no") for i in range(10)], 0.3)
    wrong = [r for r in rows if not r["offline_correct"]]
    assert len(wrong) == 3
    for r in rows:
        gold = r["solution"].removeprefix("<answer>").removesuffix("</answer>")
        said = r["offline_output"].split("<answer>")[1].removesuffix("</answer>")
        assert (said == gold) == r["offline_correct"]


def test_texts_differ_per_item_and_name_the_items_own_object():
    rows = offline_rows([_row(i) for i in range(8)], 0.0)
    texts = [r["offline_output"] for r in rows]
    assert len(set(texts)) == 8
    assert all(f"red circle {i}" in t for i, t in enumerate(texts))
    assert all(t.startswith("<think>") and t.endswith("</answer>") for t in texts)


def test_the_same_seed_gives_the_same_trajectories():
    rows = [_row(i) for i in range(5)]
    assert offline_rows(rows, 0.4, seed=3) == offline_rows(rows, 0.4, seed=3)


def test_wrong_answers_per_answer_type():
    rng = random.Random(0)
    mc = _row(0, "moving_shape", "B", options=["red", "blue", "green", "white"])
    assert wrong_answer(mc, rng) in {"A", "C", "D"}
    assert wrong_answer(_row(0, answer="no"), rng) == "yes"
    assert wrong_answer(_row(0, "flash_count", 1), rng) == "2"
    assert wrong_answer(_row(0, "flash_count", 3), rng) in {"2", "4"}


def test_a_family_without_a_wrong_answer_rule_is_named_in_the_error():
    row = _row(0, "tracking", {"time": [0, 1], "boxes": []})
    with pytest.raises(ValueError, match=r"tracking-train-0000.*tracking"):
        trajectory(row, random.Random(0), wrong=True)
