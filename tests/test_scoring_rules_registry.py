"""The extraction-rule registry: evalkit's rule always present, lookups, headline choice."""

from __future__ import annotations

import pytest

from evalkit.registry import RegistryError
from evalkit.sample import Sample
from evalkit.scoring import score
from evalkit.scoring.router import score_rules
from evalkit.scoring.rules import EVALKIT, get_rule, rule, rules_for


def _mc(target: str = "B") -> Sample:
    return Sample(
        id="s", task_type="multiple_choice", question="q", options=["x", "y", "z"], target=target
    )


def test_evalkit_rule_is_first_for_every_task_type() -> None:
    assert next(iter(rules_for("mcq"))) == EVALKIT
    assert get_rule("evalkit", "boolean").source == "evalkit"


def test_unknown_rule_names_the_known_ones() -> None:
    with pytest.raises(RegistryError, match="known: evalkit"):
        get_rule("no-such-rule", "multiple_choice")


def test_registering_evalkit_or_twice_is_an_error() -> None:
    with pytest.raises(RegistryError):
        rule("evalkit", "multiple_choice", source="x")
    with pytest.raises(RegistryError):
        rule("nothing", source="x")


def test_score_under_a_rule_uses_that_rule() -> None:
    got = score(_mc(), "B", rule="evalkit")
    assert got.value == 1.0
    under = score_rules(_mc(), "B")
    assert under[EVALKIT].value == 1.0
    # every rule but the "+judge" ones, which ask a judge and are a headline only
    plain = {n for n, r in rules_for("multiple_choice").items() if r.fallback is None}
    assert set(under) == plain
    assert EVALKIT not in score_rules(_mc(), "B", skip=EVALKIT)


def test_a_rule_registered_after_a_lookup_is_seen(monkeypatch: pytest.MonkeyPatch) -> None:
    from evalkit.scoring.types import Score
    from tests._registered import task_type

    with task_type(monkeypatch, "cache_probe", lambda p, t, s: Score(1.0)):
        assert list(rules_for("cache_probe")) == [EVALKIT]  # answer cached now
        rule("late_rule", "cache_probe", source="test")(lambda p, t, s: Score(0.0))
        assert list(rules_for("cache_probe")) == [EVALKIT, "late_rule"]


def test_a_test_rule_is_registered_only_while_asked_for_and_unregister_names_unknowns() -> None:
    from evalkit.scoring import rules as registry
    from tests._sensitivity_rules import LAST_LETTER, last_letter_registered

    before = set(registry.rules_for("multiple_choice"))
    assert LAST_LETTER not in before  # nothing registers it at import
    with last_letter_registered():
        assert registry.has_rule(LAST_LETTER, "mcq")
    assert set(registry.rules_for("multiple_choice")) == before
    with pytest.raises(RegistryError, match="not registered"):
        registry.unregister(LAST_LETTER, "multiple_choice")
