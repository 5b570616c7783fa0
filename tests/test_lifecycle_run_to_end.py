"""``run_to_end``: a command's loop stopped by a signal raises the signal's exception once
and leaves no task for asyncio to report after the command's one line."""

from __future__ import annotations

import asyncio
import gc
import logging
from collections.abc import Callable, Coroutine
from typing import Any

import pytest

from evalkit.engines.lifecycle import run_to_end


async def _sweep_hit_in_a_setting() -> None:
    """Settings side by side, as a sweep ran them: the signal's exception is raised in one
    setting's step; the sweep, awaiting them all, stops the others and raises it again."""

    async def setting(hit: bool) -> None:
        await asyncio.sleep(0)
        if hit:
            raise KeyboardInterrupt  # what Termination's handler raises, in this task
        await asyncio.sleep(60)

    runs = [asyncio.ensure_future(setting(i == 0)) for i in range(3)]
    try:
        await asyncio.gather(*runs)
    except BaseException:
        for run in runs:
            run.cancel()
        await asyncio.gather(*runs, return_exceptions=True)
        raise


def _reported(
    runner: Callable[[Coroutine[Any, Any, None]], None], caplog: pytest.LogCaptureFixture
) -> list[str]:
    with caplog.at_level(logging.ERROR, logger="asyncio"), pytest.raises(KeyboardInterrupt):
        runner(_sweep_hit_in_a_setting())
    gc.collect()  # an unretrieved task exception is reported when the task is collected
    return [r.getMessage() for r in caplog.records if r.name == "asyncio"]


def test_asyncio_run_leaves_a_task_exception_to_be_reported(
    caplog: pytest.LogCaptureFixture,
) -> None:
    # the control: what `evalkit sweep` printed after its one line on SIGTERM
    assert any("never retrieved" in m for m in _reported(asyncio.run, caplog))


def test_run_to_end_raises_the_signal_once_and_reports_nothing(
    caplog: pytest.LogCaptureFixture,
) -> None:
    assert _reported(run_to_end, caplog) == []
