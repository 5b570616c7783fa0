"""MotionBench's official answer reading: LVBench's rule under MotionBench's name.

THUDM/MotionBench motionbench/utils/answer_util.py ``polish_answer`` is the same code as
LVBench's (evalkit.scoring.rules.lvbench), and motionbench/metrics/compute_accuracy.py
compares its result with the answer letter by ``==`` as LVBench does.
"""

from __future__ import annotations

from evalkit.scoring.rules import rule
from evalkit.scoring.rules.lvbench import lvbench

motionbench = rule(
    "motionbench",
    "multiple_choice",
    source="THUDM/MotionBench motionbench/utils/answer_util.py polish_answer; "
    "motionbench/metrics/compute_accuracy.py compute_accuracy",
)(lvbench)
