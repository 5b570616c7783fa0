"""Math answers by math-verify, from the main thread and from worker threads."""

from __future__ import annotations

import threading

import pytest

from evalkit.scoring import Score, score

from ._scoring_helpers import sample


@pytest.mark.parametrize(
    ("prediction", "target", "value"),
    [
        ("so the result is \\boxed{\\frac{1}{2}}", "0.5", 1.0),
        ("<answer>1/2</answer>", "\\frac{1}{2}", 1.0),
        ("<answer>2x+2</answer>", "2(x+1)", 1.0),
        ("\\boxed{3}", "4", 0.0),
        ("", "4", 0.0),
        ("<think>maybe \\boxed{5}</think><answer>4</answer>", "4", 1.0),
    ],
)
def test_math_equivalence(prediction: str, target: str, value: float) -> None:
    assert score(sample("math", target), prediction).value == value


def test_math_works_off_the_main_thread() -> None:
    # math-verify's own signal timeouts fail off the main thread; the scorer must not.
    results: list[Score] = []
    thread = threading.Thread(
        target=lambda: results.append(score(sample("math", "0.5"), "\\boxed{\\frac{1}{2}}"))
    )
    thread.start()
    thread.join(120)
    assert results and results[0].value == 1.0


def test_a_dead_math_worker_is_replaced() -> None:
    from evalkit.scoring.mathverify import _WORKER

    assert _WORKER.call("2", "$2$", 5.0) == (True, "2")
    assert _WORKER._proc is not None
    _WORKER._proc.kill()
    _WORKER._proc.wait()
    assert _WORKER.call("3", "$3$", 5.0) == (True, "3")
