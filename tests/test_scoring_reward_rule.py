"""RL rewards and the pass-rate filter score with evalkit's robust rule, never an official one.

Official rules reproduce benchmarks' quirks (some accept an empty reply, some take the
first letter of anything); as a reward they would teach the policy those quirks.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest

import evalkit.scoring
import evalkit.scoring.router as router
import evalkit.scoring.rules as rules
from evalkit.engines.base import Completion, Request
from evalkit.sample import Sample
from evalkit.scoring import reward
from evalkit.trainer.filter import pass_rates

# the package re-exports the function reward(), which hides the module of that name
reward_module = importlib.import_module("evalkit.scoring.reward")


def _mc(target: str = "B") -> Sample:
    return Sample(
        id="s0", task_type="multiple_choice", question="?", target=target, options=["x", "y"]
    )


@pytest.fixture
def no_official_rules(monkeypatch: pytest.MonkeyPatch) -> list[Any]:
    """Any lookup of a named rule fails the test; returns the rule= of each score call."""
    seen: list[Any] = []

    def refuse(name: str, task_type: str) -> Any:
        raise AssertionError(f"reward/filter looked up official rule {name!r} for {task_type}")

    real_score = router.score

    def spy(*args: Any, **kwargs: Any) -> Any:
        seen.append(kwargs.get("rule", args[3] if len(args) > 3 else None))
        return real_score(*args, **kwargs)

    monkeypatch.setattr(rules, "get_rule", refuse)
    monkeypatch.setattr(reward_module, "score", spy)
    monkeypatch.setattr(router, "score", spy)
    monkeypatch.setattr(evalkit.scoring, "score", spy)
    return seen


def test_reward_scores_with_the_evalkit_rule(no_official_rules: list[Any]) -> None:
    got = reward(_mc(), "<think>x is tempting</think><answer>B</answer>")
    expected = {"accuracy": 1.0, "format": 1.0, "overall": pytest.approx(1.0), "scorer_failed": 0.0}
    assert got == expected
    assert reward_module.format_score(_mc(), "B") == 0.5
    assert no_official_rules and all(r in (None, "evalkit") for r in no_official_rules)


def test_reward_reads_a_verbose_reply_like_evaluation(no_official_rules: list[Any]) -> None:
    reply = "Option A can be ruled out. Therefore, option B is the most accurate."
    assert reward(_mc(), reply)["accuracy"] == 1.0


class _Engine:
    async def generate(self, request: Request) -> Completion:
        texts = ["<answer>B</answer>", "<answer>A</answer>"][: request.sampling.n]
        return Completion(request.id, texts, token_ids=[[1]] * len(texts))

    async def close(self) -> None:
        pass


def test_pass_rate_filter_scores_with_the_evalkit_rule(no_official_rules: list[Any]) -> None:
    rates = pass_rates([_mc()], _Engine(), lambda s: Request(id=s.id, text=s.question), k=2)
    assert rates == [0.5]
    assert len(no_official_rules) == 2 and set(no_official_rules) <= {None, "evalkit"}
