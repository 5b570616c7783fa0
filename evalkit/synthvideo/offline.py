"""Offline (teacher) trajectories for SynthVideo-train: per-item reasoning, a share wrong.

Mix-policy training puts one offline trajectory in each group. A constant template
("The answer is X.") lets a policy learn to copy a fixed string; these trajectories differ
per item instead: the reasoning names the item's own objects (from the row's ``params``
and question) in one of several phrasings, and a seeded, exact share of them (30% by
default) reaches a WRONG answer, as an imperfect teacher would. Which items are wrong and
which phrasing each gets depend only on ``seed`` and the item ids.

The text is in the trainer's thinking format, ``<think>...</think><answer>X</answer>``.
"""

from __future__ import annotations

import json
import os
import random
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from evalkit.synthvideo.generate import read_rows, to_unified

FAMILIES = ("moving_shape", "yes_no", "flash_count")
"""The families :func:`wrong_answer` has a rule for (choice, yes/no, count): the ones with
offline trajectories."""

WRONG_SHARE = 0.3
"""Share of offline trajectories that end in a wrong answer (an imperfect teacher)."""

_OPENERS = (
    "I look at the {thing} in each frame.",
    "I watch the {thing} from start to end.",
    "The clip shows the {thing}.",
    "I follow the {thing} over time.",
)
_CLOSERS = ("So the answer is {answer}.", "I pick {answer}.", "That gives {answer}.")


def _thing(row: dict[str, Any]) -> str:
    """The object the reasoning talks about (the row's own, so texts differ per item)."""
    params = row.get("params") or {}
    for key in ("mover", "target", "lamp"):
        if key in params:
            return str(params[key]) + (" light" if key == "lamp" else "")
    return "scene"


def wrong_answer(row: dict[str, Any], rng: random.Random) -> str:
    """A plausible but wrong answer for ``row`` (another letter, the other yes/no, k +- 1)."""
    answer = row["answer"]
    if row.get("options"):
        letters = [chr(ord("A") + i) for i in range(len(row["options"]))]
        return rng.choice([x for x in letters if x != answer])
    if answer in ("yes", "no"):
        return "no" if answer == "yes" else "yes"
    if isinstance(answer, int):
        return str(answer + 1 if answer <= 1 or rng.random() < 0.5 else answer - 1)
    raise ValueError(
        f"SynthVideo row {row.get('id')!r} (family {row.get('family')!r}): no wrong-answer rule "
        f"for this answer type; use the {', '.join(FAMILIES)} families"
    )


def trajectory(row: dict[str, Any], rng: random.Random, wrong: bool) -> str:
    """One item's trajectory: reasoning about its own objects, then the (possibly wrong)
    answer in ``<answer>`` tags."""
    answer = wrong_answer(row, rng) if wrong else str(row["answer"])
    opener = rng.choice(_OPENERS).format(thing=_thing(row))
    closer = rng.choice(_CLOSERS).format(answer=answer)
    return f"<think>{opener} {closer}</think><answer>{answer}</answer>"


def wrong_ids(ids: Sequence[str], share: float, seed: int) -> set[str]:
    """Exactly ``round(share * len(ids))`` ids, drawn with ``seed``."""
    if not 0.0 <= share <= 1.0:
        raise ValueError(f"wrong share must be within [0, 1], got {share}")
    order = sorted(ids)
    random.Random(f"offline-wrong/{seed}").shuffle(order)
    return set(order[: round(share * len(order))])


def offline_rows(
    rows: Sequence[dict[str, Any]], share: float = WRONG_SHARE, seed: int = 0
) -> list[dict[str, Any]]:
    """Rows in the unified schema, each with ``offline_output`` and ``offline_correct``."""
    wrong = wrong_ids([r["id"] for r in rows], share, seed)
    out = []
    for row in rows:
        rng = random.Random(f"offline/{seed}/{row['id']}")
        unified = to_unified(row)
        unified["offline_output"] = trajectory(row, rng, row["id"] in wrong)
        unified["offline_correct"] = row["id"] not in wrong
        out.append(unified)
    return out


def write_offline(
    annotation: str | os.PathLike[str], share: float = WRONG_SHARE, seed: int = 0
) -> Path:
    """``synthvideo_<split>.offline.jsonl`` beside ``annotation``: the trainer's input rows
    (unified schema, video paths relative to that folder, ``offline_output`` set)."""
    src = Path(annotation)
    dst = src.with_name(src.name.replace(".jsonl", ".offline.jsonl"))
    rows = offline_rows(read_rows(src), share, seed)
    tmp = dst.with_name(f".{dst.name}.part")
    tmp.write_text("".join(json.dumps(r, sort_keys=True) + "\n" for r in rows), encoding="utf-8")
    os.replace(tmp, dst)
    return dst
