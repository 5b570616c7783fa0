"""Every shipped benchmark (and variant) resolves a headline rule for each of its task types."""

from __future__ import annotations

import pytest

from evalkit.bench.registry import registry
from evalkit.bench.spec import BenchmarkSpec
from evalkit.errors import ConfigError
from evalkit.scoring.router import canonical_task_type
from evalkit.scoring.rules import get_rule

SPECS = [
    v
    for spec in registry().specs()
    for v in [spec, *(spec.with_variant(name) for name in spec.variants)]
]


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: f"{s.name}:{s.variant or ''}")
def test_every_task_type_has_a_registered_headline_rule(spec: BenchmarkSpec) -> None:
    for task_type in spec.task_types:
        kind = canonical_task_type(task_type)
        rule = get_rule(spec.headline_rule(kind), kind)
        assert rule.source  # official rules name the code they reproduce


def test_a_benchmark_named_after_its_official_rule_uses_it_by_default() -> None:
    assert registry().get("Video-MME").headline_rule("multiple_choice") == "videomme"
    assert registry().get("Video-MME").headline_rule("mcq") == "videomme"  # aliases too


def test_the_evalkit_setting_puts_the_robust_rule_in_the_headline() -> None:
    spec = registry().get("MVBench")
    robust = spec.model_copy(
        update={"scoring": spec.scoring.model_copy(update={"rule": "evalkit"})}
    )
    assert robust.headline_rule("multiple_choice") == "evalkit"


def test_an_official_rule_named_in_the_yaml_must_exist() -> None:
    spec = registry().get("Charades-STA")
    typo = spec.scoring.model_copy(
        update={"rule": "official", "official": {"temporal_grounding": "lmms_evl"}}
    )
    with pytest.raises(ConfigError, match="lmms_evl"):
        spec.model_copy(update={"scoring": typo}).headline_rule("temporal_grounding")
