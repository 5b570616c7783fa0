"""DAPO dynamic sampling: keep only groups that carry a learning signal, refill, bounded tries.

A group whose responses all have the same accuracy (all right or all wrong) gets zero
group-relative advantage and only dilutes the batch. :func:`collect_groups` drops such groups
and draws further generation batches through a ``generate_groups()`` callable until the target
number of groups is reached or ``max_tries`` batches were drawn; then training proceeds with
what there is, and the result says so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Generic, TypeVar

log = logging.getLogger(__name__)

G = TypeVar("G")


@dataclass
class DynamicSamplingResult(Generic[G]):
    """The kept groups (at most ``target``) and what it took to get them."""

    groups: list[G]
    target: int
    tries: int
    generated: int
    dropped: int
    surplus: int = 0
    """Kept groups beyond the target, discarded (the last batch overshot)."""
    notes: list[str] = field(default_factory=list)

    @property
    def reached_target(self) -> bool:
        """True when ``target`` groups were collected."""
        return len(self.groups) >= self.target

    def metrics(self) -> dict[str, float]:
        """Numbers worth logging each step."""
        return {
            "dynamic_sampling/tries": float(self.tries),
            "dynamic_sampling/kept": float(len(self.groups)),
            "dynamic_sampling/dropped": float(self.dropped),
            "dynamic_sampling/reached_target": float(self.reached_target),
        }


def has_signal(accuracies: Sequence[float], tol: float = 1e-9) -> bool:
    """True when the group's accuracies are not all equal (so advantages are not all zero)."""
    return len(accuracies) > 1 and max(accuracies) - min(accuracies) > tol


def collect_groups(
    generate_groups: Callable[[], Sequence[G]],
    accuracies_of: Callable[[G], Sequence[float]],
    target: int,
    max_tries: int,
) -> DynamicSamplingResult[G]:
    """Draw generation batches until ``target`` groups with signal are kept or tries run out.

    ``generate_groups()`` returns one generation batch (a list of groups); ``accuracies_of``
    reads the per-response accuracies of a group. Surplus groups from the last batch are
    discarded so that the batch size stays ``target``.
    """
    if target < 1 or max_tries < 1:
        raise ValueError(f"target and max_tries must be >= 1, got {target} and {max_tries}")
    kept: list[G] = []
    generated = dropped = tries = 0
    while len(kept) < target and tries < max_tries:
        batch = generate_groups()
        tries += 1
        generated += len(batch)
        for group in batch:
            if has_signal(accuracies_of(group)):
                kept.append(group)
            else:
                dropped += 1
    surplus = max(0, len(kept) - target)
    result = DynamicSamplingResult(kept[:target], target, tries, generated, dropped, surplus)
    if not result.reached_target:
        note = (
            f"dynamic sampling: {len(result.groups)}/{target} groups with signal after "
            f"{tries} generation batches ({dropped} dropped); training on what there is"
        )
        result.notes.append(note)
        log.warning(note)
    return result
