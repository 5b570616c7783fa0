"""A test-only task type (scorer + rules) registered for one test and gone afterwards.

The scorer and rule registries are process-wide, and other tests count what they hold
(every canonical task type has a scorer): a module-level registration would leak into them.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from evalkit import tasks
from evalkit.scoring import rules
from evalkit.scoring.router import ScorerFn


@contextmanager
def task_type(
    monkeypatch: pytest.MonkeyPatch, name: str, fn: ScorerFn, **other_rules: ScorerFn
) -> Iterator[None]:
    """``name`` scored by ``fn``, with ``other_rules`` (rule name -> fn) as its other rules."""
    tasks.register(tasks.TaskType(name, fn))
    for r, f in other_rules.items():
        rules.add_rule(rules.Rule(r, name, f, source=__name__))
    try:
        yield
    finally:
        for r in [r for r in rules.rules_for(name) if r != rules.EVALKIT]:
            rules.unregister(r, name)  # those a test added while it ran too
        tasks.unregister(name)
