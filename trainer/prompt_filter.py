"""Overlong prompts are left out before training instead of ending the run mid-way.

As verl's ``data.filter_overlong_prompts``: every prompt is tokenised once at startup
(visual tokens included, through the same processor the actor uses) and the ones longer
than ``data.max_prompt_tokens`` are dropped, with a warning naming them; their count goes
into the metrics (``data/filtered_overlong``).
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from typing import TypeVar

from evalkit.errors import DataError

log = logging.getLogger(__name__)
T = TypeVar("T")
SHOWN_IDS = 20
"""Ids named in the warning (the rest are counted)."""


def drop_overlong(
    items: Sequence[T],
    count_tokens: Callable[[T], int],
    limit: int,
    item_id: Callable[[T], str],
    what: str = "training",
) -> tuple[list[T], list[str]]:
    """(items whose prompt fits ``limit`` tokens, ids of the others); none left raises."""
    kept: list[T] = []
    dropped: list[str] = []
    for item in items:
        if count_tokens(item) <= limit:
            kept.append(item)
        else:
            dropped.append(item_id(item))
    if dropped:
        shown = ", ".join(dropped[:SHOWN_IDS]) + (" ..." if len(dropped) > SHOWN_IDS else "")
        log.warning(
            "%d %s prompt(s) over data.max_prompt_tokens=%d left out: %s",
            len(dropped),
            what,
            limit,
            shown,
        )
    if not kept:
        raise DataError(
            f"every {what} prompt exceeds data.max_prompt_tokens={limit} (visual tokens "
            "included); raise the limit or lower the media budgets (video_max_pixels, ...)"
        )
    return kept, dropped
