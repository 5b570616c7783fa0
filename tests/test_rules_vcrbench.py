"""VCR-Bench has no closed-form official rule: eval_code/eval.py has GPT-4o extract every
answer before any comparison, so choice questions keep evalkit's letter rule."""

from __future__ import annotations

from evalkit.bench.registry import get_benchmark
from evalkit.scoring.rules import has_rule


def test_vcrbench_choice_headline_is_evalkit_and_no_official_rule_is_registered() -> None:
    spec = get_benchmark("VCR-Bench")
    assert not has_rule("vcrbench", "multiple_choice")
    assert spec.headline_rule("multiple_choice") == "evalkit"
    # open-ended answers stay with the judge
    assert spec.headline_rule("llm_judge") == "evalkit"
