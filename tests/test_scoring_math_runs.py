"""Looped units are cut before math-verify sees them, and no verdict depends on the cut.

``shorten_runs`` makes the math rule fast on degenerate replies; these tests compare the
rule's verdicts with and without it, on realistic answers and on perf/scoring.py's
degenerate replies, and a control proves that comparison catches a wrong cut.
"""

from __future__ import annotations

import importlib.util
import re
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from evalkit.scoring import mathverify
from evalkit.scoring.mathverify import RUN_KEEP, RUN_MIN, math, shorten_runs

from ._scoring_helpers import sample


def _perf_scoring() -> Any:
    path = Path(__file__).parents[1] / "perf" / "scoring.py"
    spec = importlib.util.spec_from_file_location("perf_scoring", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


DERIVATION = (
    "We need the sum of the roots. Let $f(x) = 2x^2 - 7x + 3$.\n\n"
    "\\begin{align*}\n"
    "f(x) &= 2\\left(x^2 - \\frac{7}{2}x\\right) + 3 \\\\\n"
    "&= 2\\left(x - \\frac{7}{4}\\right)^2 - \\frac{49}{8} + 3 \\\\\n"
    "&= 2\\left(x - \\frac{7}{4}\\right)^2 - \\frac{25}{8}.\n"
    "\\end{align*}\n\n"
    "The roots are $x = \\frac{7}{4} \\pm \\frac{5}{4}$, that is $x_1 = 3$ and "
    "$x_2 = \\frac{1}{2}$. By Vieta, $x_1 + x_2 = -\\frac{b}{a} = \\frac{7}{2}$, which agrees."
    "\n\nTherefore the sum of the roots is $\\boxed{\\frac{7}{2}}$."
)
RULED = "Step 1.\n" + "-" * 40 + "\nStep 2: $2 + 2 = 4$\n" + "=" * 40 + "\nFinal answer: $4$"
ZEROS = "\\begin{pmatrix} 0 & 0 & 0 & 0 & 0 & 0 & 0 & 0 & 0 & 1 \\end{pmatrix}"

# (prediction, target, verdict): answers as models write them, right and wrong.
REALISTIC: list[tuple[str, str, float]] = [
    ("<answer>\\frac{1}{2}</answer>", "0.5", 1.0),
    ("The answer is $\\frac{3}{4}$.", "3/4", 1.0),
    ("so the result is \\boxed{\\sqrt{2}}", "\\sqrt{2}", 1.0),
    ("\\boxed{2\\sqrt{3}}", "\\sqrt{12}", 1.0),
    ("<answer>(1, 3]</answer>", "(1,3]", 1.0),
    ("<answer>[1, 3)</answer>", "(1,3]", 0.0),
    ("The solution set is $\\{1, 2, 3\\}$.", "\\{1,2,3\\}", 1.0),
    ("$x \\in (-\\infty, 2) \\cup (3, \\infty)$", "(-\\infty,2)\\cup(3,\\infty)", 1.0),
    ("\\boxed{\\begin{pmatrix} 1 & 0 \\\\ 0 & 1 \\end{pmatrix}}", "I_2", 0.0),
    (f"\\boxed{{{ZEROS}}}", ZEROS.replace(" ", ""), 1.0),
    ("The speed is \\boxed{12\\text{ m/s}}", "12", 1.0),
    ("<answer>25\\%</answer>", "25\\%", 1.0),
    ("<answer>-7</answer>", "-7", 1.0),
    ("<answer>-7</answer>", "7", 0.0),
    ("The answer is (C).", "C", 1.0),
    ("<answer>B</answer>", "C", 0.0),
    ("So $x = 3$.", "3", 1.0),
    ("\\boxed{y = 2x + 1}", "2x+1", 1.0),
    ("<answer>2x+2</answer>", "2(x+1)", 1.0),
    ("<answer>3.14159</answer>", "\\pi", 0.0),
    ("\\boxed{0.3333333333333333333333333333333333333}", "1/3", 1.0),
    ("\\boxed{100000000000000000000000000000000000000}", "10^{38}", 1.0),
    ("<answer>1,000,000</answer>", "10^6", 1.0),
    ("<answer>\\dfrac{10}{3}</answer>", "3\\frac{1}{3}", 1.0),
    ("First 3+4=7, then 7 \\times 2 = 14, so we get $14$", "14", 1.0),
    ("The final answer is $\\frac{\\pi}{4}$. I hope it is correct.", "\\frac{\\pi}{4}", 1.0),
    ("<think>" + "Hmm, let me check. " * 40 + "</think><answer>42</answer>", "42", 1.0),
    (DERIVATION, "3.5", 1.0),
    (DERIVATION, "3", 0.0),
    # Not the identity: separator lines and spacing runs of 40 are cut; verdicts stay.
    (RULED, "4", 1.0),
    (RULED, "5", 0.0),
    ("$$\n" + "\\quad " * 40 + "x = \\frac{1}{2}\n$$", "\\frac{1}{2}", 1.0),
]
# Targets the degenerate replies are scored against: ordinary ones, some of which they equal.
ORDINARY_TARGETS = ("12", "0", "1", "2", "4", "0.5", "11", "A", "a")
# The degenerate replies math-verify needs seconds for without the cut (the rest take ms).
SLOW = [("answer is ", "1 "), ("answer is ", "(("), ("answer is ", "1.1"), ("", "\\(")]
SLOW += [("", "1 "), ("", "0.5 ")]
# What the loop itself reads as changes (see ``shorten_runs``): targets equal to that.
ARTIFACT_TARGETS = {("answer is ", "1.1"): ("11.11", "11.1"), ("answer is ", "(("): ("(",)}

Cut = Callable[[str], str]


def _verdicts(cases: list[tuple[str, str]], cut: Cut | None) -> list[float]:
    saved = mathverify.shorten_runs
    mathverify.shorten_runs = cut or (lambda text: text)
    try:
        return [math(p, t, sample("math", t)).value for p, t in cases]
    finally:
        mathverify.shorten_runs = saved


def _changed(cases: list[tuple[str, str]], cut: Cut) -> list[tuple[str, str]]:
    """The cases whose verdict under ``cut`` differs from the verdict without any cut."""
    before, after = _verdicts(cases, None), _verdicts(cases, cut)
    return [(p[:40], t) for (p, t), b, a in zip(cases, before, after, strict=True) if b != a]


def _fast_degenerate_cases() -> list[tuple[str, str]]:
    """The degenerate replies math-verify reads in milliseconds even uncut, with targets."""
    perf = _perf_scoring()
    return [
        (perf._degenerate(prefix, unit), target)
        for prefix, unit in perf.DEGENERATE
        if (prefix, unit) not in SLOW
        for target in ORDINARY_TARGETS
    ]


def test_realistic_answers_score_as_written() -> None:
    cases = [(p, t) for p, t, _ in REALISTIC]
    assert _verdicts(cases, shorten_runs) == [v for _, _, v in REALISTIC]


def test_realistic_answers_without_a_long_run_are_left_as_they_are() -> None:
    with_runs = [p for p, _, _ in REALISTIC if p == RULED or "\\quad \\quad" in p]
    assert len(with_runs) == 3
    for prediction, _, _ in REALISTIC:
        if prediction not in with_runs:
            assert shorten_runs(prediction) == prediction


def test_cutting_runs_changes_no_verdict_on_realistic_answers() -> None:
    assert _changed([(p, t) for p, t, _ in REALISTIC], shorten_runs) == []


def test_cutting_runs_changes_no_verdict_on_degenerate_replies() -> None:
    assert _changed(_fast_degenerate_cases(), shorten_runs) == []


def test_cutting_runs_gives_the_verdicts_math_verify_reaches_unaided_on_slow_replies() -> None:
    # Without the cut these replies take math-verify seconds each, some to its own 5 s limit
    # (a 0), ~70 s in all: too slow, and too close to that limit on a loaded machine, for a
    # comparison at test time. Their uncut verdicts were measured once on a quiet machine
    # (math-verify 0.9.0, 2026-12-05) and are pinned here: the one target each reply equals
    # scores 1, every other 0. The cut must give the same, except for the targets equal to
    # what the loop itself reads as (ARTIFACT_TARGETS), which flip, and exactly these.
    unaided_right = {("", "1 "): "1", ("", "0.5 "): "0.5", ("answer is ", "1 "): "1"}
    perf = _perf_scoring()
    for prefix, unit in SLOW:
        reply = perf._degenerate(prefix, unit)
        expected = [float(t == unaided_right.get((prefix, unit))) for t in ORDINARY_TARGETS]
        got = _verdicts([(reply, t) for t in ORDINARY_TARGETS], shorten_runs)
        assert got == expected, (prefix, unit)
    artifacts = [
        (perf._degenerate(prefix, unit), target)
        for (prefix, unit), targets in ARTIFACT_TARGETS.items()
        for target in targets
    ]
    # Uncut (measured as above): 11.11 was right, 11.1 and "(" were not.
    assert _verdicts(artifacts, shorten_runs) == [0.0, 1.0, 1.0]


def test_the_comparison_catches_a_cut_that_changes_verdicts() -> None:
    # Control: cutting every repeat (digits too, runs of 2) must show up as changed.
    def too_eager(text: str) -> str:
        return re.sub(r"(.{1,8}?)\1+", r"\1", text, flags=re.DOTALL)

    assert _changed([(p, t) for p, t, _ in REALISTIC], too_eager) != []


@pytest.mark.parametrize(
    ("text", "cut"),
    [
        ("(" * 4000, "(" * RUN_KEEP),
        ("((" * 2000, "(" * RUN_KEEP),
        ("so " + "1 " * 2000, "so " + "1 " * RUN_KEEP),
        ("\\(" * 2000 + "x", "\\(" * RUN_KEEP + "x"),
        ("1.1" * 1000, "1.1" * RUN_KEEP),
        ("1" * 4000, "1" * 4000),  # one long number: a single token, and maybe real
        (" " * 4000 + "5", " " * 4000 + "5"),  # whitespace is cheap and decides nothing
        ("(" * (RUN_MIN - 1), "(" * (RUN_MIN - 1)),
    ],
)
def test_a_run_of_one_unit_is_cut_to_a_few_repetitions(text: str, cut: str) -> None:
    assert shorten_runs(text) == cut


def test_a_shorter_loop_math_verify_parses_whole_now_reads_as_its_unit() -> None:
    # The documented cost of the cut: 40 looped "1 " are their sum (40) to math-verify, and
    # cut they read as "1 1" (the run, then the last unit that had no space after it).
    reply = "<answer>" + "1 " * 40 + "</answer>"
    targets = ["1", "2", "40"]
    assert _verdicts([(reply, t) for t in targets], None) == [0.0, 0.0, 1.0]
    assert _verdicts([(reply, t) for t in targets], shorten_runs) == [0.0, 1.0, 0.0]


def test_deep_nesting_that_timed_out_is_read() -> None:
    # 40 levels of "(" cost math-verify past its 5 s limit (no answer); cut, they read as 5.
    reply = "<answer>" + "(" * 40 + "5" + ")" * 40 + "</answer>"
    assert math(reply, "5", sample("math", "5")).value == 1.0
