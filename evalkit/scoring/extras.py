"""Extra per-sample metrics a sample asks for by name in ``fields["extra_metrics"]``.

VCR-Bench's judged CoT score is one: each extra gets the prediction, the sample, the task
scorer's Score and the scoring context's judge (None without one), and returns that Score
with its own figures added to the metadata, the value untouched. Samples without the field
are unaffected. Kept apart from the router so the judge module can register one without
importing the router (which imports the judge for the scoring context).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from evalkit.registry import Registry
from evalkit.sample import Sample
from evalkit.scoring.types import Score

ExtraFn = Callable[[str, Sample, Score, Any], Score]
"""``(prediction, sample, primary score, judge or None) -> Score``."""

EXTRAS: Registry[ExtraFn] = Registry(
    "extra metric",
    group="evalkit.extra_metrics",
    modules=lambda: ["evalkit.scoring.judge"],  # the judged CoT score registers there
)

__all__ = ["EXTRAS", "ExtraFn"]
