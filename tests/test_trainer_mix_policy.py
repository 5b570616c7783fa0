"""Mix-policy groups: slot contents, EOS, truncation, masks, the gate, and 'off' = on-policy."""

from __future__ import annotations

import logging
from dataclasses import fields

import pytest
import torch

from evalkit.trainer.batch import Group, Response, collate
from evalkit.trainer.config import MixPolicyConfig
from evalkit.trainer.mix_policy import (
    build_group,
    merge_offline_rewards,
    offline_response,
    online_count,
)

EOS, PAD = 1, 0
ON = MixPolicyConfig(enable_mix_policy=True)
OFF = MixPolicyConfig(enable_mix_policy=False)


class FakeTokenizer:
    """Whitespace words to ids from 10 up; EOS = 1."""

    eos_token_id = EOS

    def __init__(self):
        self.vocab: dict[str, int] = {}

    def encode(self, text, add_special_tokens=True):
        return [self.vocab.setdefault(w, 10 + len(self.vocab)) for w in text.split()]

    def decode(self, token_ids, skip_special_tokens=False):
        words = {i: w for w, i in self.vocab.items()} | {EOS: "<eos>"}
        return " ".join(words[i] for i in token_ids if not (skip_special_tokens and i == EOS))


def _online(*lengths):
    return [Response(list(range(100, 100 + n))) for n in lengths]


def test_online_count_is_n_minus_one_only_when_mixing_applies():
    assert online_count(4, ON, "an offline answer") == 3
    assert online_count(4, ON, None) == 4
    assert online_count(4, ON, "") == 4
    assert online_count(4, OFF, "an offline answer") == 4


def test_offline_trajectory_fills_the_last_slot_with_eos_appended():
    tok = FakeTokenizer()
    group = build_group(
        7,
        [5, 6],
        _online(2, 3, 1),
        n=4,
        cfg=ON,
        offline_text="<answer> B </answer>",
        tokenizer=tok,
        max_response_tokens=16,
    )
    assert [r.is_offline for r in group.responses] == [False, False, False, True]
    assert group.responses[-1].token_ids == [10, 11, 12, EOS]
    assert group.responses[-1].text == "<answer> B </answer>"
    assert group.meta == {"offline_inserted": True}
    batch = collate([group], PAD, max_response_tokens=16)
    assert batch.response_mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]]
    assert batch.response_ids[3].tolist() == [10, 11, 12, EOS]
    assert batch.is_offline.tolist() == [False, False, False, True]
    assert batch.group_ids.tolist() == [7, 7, 7, 7]


def test_long_offline_trajectory_is_truncated_to_the_budget_with_a_warning(caplog):
    tok = FakeTokenizer()
    with caplog.at_level(logging.WARNING):
        resp = offline_response("a b c d e", tok, max_response_tokens=3, sample_id="vid-9")
    assert resp.token_ids == [10, 11, 12]  # EOS cut like any response that hit the budget
    assert resp.text == "a b c"  # scored as the truncated trajectory it is, not as "a b c d e"
    assert "vid-9" in caplog.text and "truncated" in caplog.text


def test_trajectory_that_fits_exactly_keeps_its_eos():
    resp = offline_response("a b", FakeTokenizer(), max_response_tokens=3)
    assert resp.token_ids == [10, 11, EOS]
    assert resp.text == "a b"


def test_trajectory_one_token_over_loses_only_its_eos():
    resp = offline_response("a b c", FakeTokenizer(), max_response_tokens=3)
    assert resp.token_ids == [10, 11, 12]
    assert resp.text == "a b c"  # all words kept: same text, but no EOS -> not finished


@pytest.mark.parametrize(
    ("accuracies", "inserted"),
    [([0.0, 0.0, 0.0], True), ([1.0, 0.0, 0.0], True), ([1.0, 1.0, 0.0], False)],
)
def test_gate_inserts_only_when_online_accuracy_is_at_most_the_threshold(accuracies, inserted):
    cfg = MixPolicyConfig(enable_mix_policy=True, accuracy_gate=0.5)
    group = build_group(
        0,
        [5],
        _online(1, 1, 1),
        n=4,
        cfg=cfg,
        offline_text="x",
        online_accuracies=accuracies,
        tokenizer=FakeTokenizer(),
        max_response_tokens=4,
    )
    assert group.meta["offline_inserted"] is inserted
    assert len(group.responses) == (4 if inserted else 3)
    assert any(r.is_offline for r in group.responses) is inserted


def test_wrong_number_of_online_responses_is_an_error():
    with pytest.raises(ValueError, match="expected 3 online"):
        build_group(
            0,
            [5],
            _online(1, 1, 1, 1),
            n=4,
            cfg=ON,
            offline_text="x",
            tokenizer=FakeTokenizer(),
            max_response_tokens=4,
        )


def _fake_engine(gen, count):
    lengths = torch.randint(1, 6, (count,), generator=gen).tolist()
    return [Response(torch.randint(2, 50, (n,), generator=gen).tolist()) for n in lengths]


def _prompts():
    return [([2, 7], "offline answer one"), ([2, 8, 9], None), ([2, 3], "two words")]


def test_mix_policy_off_gives_the_on_policy_batch_bit_for_bit():
    n = 4
    gen = torch.Generator().manual_seed(0)
    standard = [Group(i, p, _fake_engine(gen, n)) for i, (p, _) in enumerate(_prompts())]
    gen = torch.Generator().manual_seed(0)
    mixed_off = [
        build_group(
            i,
            p,
            _fake_engine(gen, online_count(n, OFF, off)),
            n=n,
            cfg=OFF,
            offline_text=off,
            online_accuracies=[0.0] * n,
            tokenizer=FakeTokenizer(),
            max_response_tokens=8,
        )
        for i, (p, off) in enumerate(_prompts())
    ]
    assert mixed_off == standard
    a, b = collate(standard, PAD), collate(mixed_off, PAD)
    for f in fields(a):
        ta, tb = getattr(a, f.name), getattr(b, f.name)
        if ta is None or tb is None:  # optional tensors (engine log-probs): absent in both
            assert ta is tb, f.name
            continue
        assert ta.dtype == tb.dtype and torch.equal(ta, tb), f.name


def test_mix_policy_on_changes_only_the_groups_with_offline_trajectories():
    n = 4
    gen = torch.Generator().manual_seed(0)
    groups = [
        build_group(
            i,
            p,
            _fake_engine(gen, online_count(n, ON, off)),
            n=n,
            cfg=ON,
            offline_text=off,
            tokenizer=FakeTokenizer(),
            max_response_tokens=8,
        )
        for i, (p, off) in enumerate(_prompts())
    ]
    assert [sum(r.is_offline for r in g.responses) for g in groups] == [1, 0, 1]
    assert [len(g.responses) for g in groups] == [4, 4, 4]
    assert collate(groups, PAD).is_offline.sum().item() == 2


# -- the two group constructions ----------------------------------------------------------

REPLACE = MixPolicyConfig(enable_mix_policy=True, mode="replace_last")


def _replace_group(accuracies=(), gate=None, budget=16, text="<answer> B </answer>"):
    cfg = MixPolicyConfig(enable_mix_policy=True, mode="replace_last", accuracy_gate=gate)
    return build_group(
        3,
        [5, 6],
        _online(2, 3, 1, 2),
        n=4,
        cfg=cfg,
        offline_text=text,
        online_accuracies=list(accuracies),
        tokenizer=FakeTokenizer(),
        max_response_tokens=budget,
    )


def test_replace_last_generates_n_and_overwrites_the_nth_slot():
    assert online_count(4, REPLACE, "an offline answer") == 4
    assert online_count(4, REPLACE, None) == 4
    group = _replace_group()
    assert [r.is_offline for r in group.responses] == [False, False, False, True]
    assert [r.token_ids for r in group.responses[:3]] == [[100, 101], [100, 101, 102], [100]]
    assert group.responses[-1].token_ids == [10, 11, 12, EOS]
    assert group.responses[-1].text == "<answer> B </answer>"
    assert group.meta == {"offline_inserted": True}
    batch = collate([group], PAD, max_response_tokens=16)
    assert batch.response_mask.tolist() == [[1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0], [1, 1, 1, 1]]
    assert batch.response_ids[3].tolist() == [10, 11, 12, EOS]
    assert batch.is_offline.tolist() == [False, False, False, True]


def test_replace_last_truncates_to_the_budget_and_scores_the_truncated_text():
    group = _replace_group(budget=3, text="<answer> B C </answer>")
    slot = group.responses[-1]
    assert slot.token_ids == [10, 11, 12]  # no EOS: cut mid-answer
    assert slot.text == "<answer> B C"  # what gets scored: the unclosed answer
    batch = collate([group], PAD, max_response_tokens=3)
    assert batch.response_mask[3].tolist() == [1, 1, 1]
    assert batch.response_ids[3].tolist() == [10, 11, 12]


@pytest.mark.parametrize(
    ("accuracies", "replaced"),
    # EasyVideoR1 replaces when mean accuracy < threshold: 0.5 itself keeps the group online
    [([0.0, 0.0, 0.0, 0.0], True), ([1.0, 0.0, 0.0, 0.0], True), ([1.0, 1.0, 0.0, 0.0], False)],
)
def test_replace_last_gate_is_strict_and_the_group_keeps_n(accuracies, replaced):
    group = _replace_group(accuracies, gate=0.5)
    assert group.meta["offline_inserted"] is replaced
    assert len(group.responses) == 4
    assert [r.is_offline for r in group.responses] == [False, False, False, replaced]
    if not replaced:
        assert group.responses[-1].token_ids == [100, 101]  # the online response stays


def test_append_gate_is_inclusive_at_the_same_mean():
    # the same mean of 0.5 opens the append gate (evalkit's <=), unlike replace_last's <
    cfg = MixPolicyConfig(enable_mix_policy=True, accuracy_gate=0.5)
    group = build_group(
        0,
        [5],
        _online(1, 1),
        n=3,
        cfg=cfg,
        offline_text="x",
        online_accuracies=[1.0, 0.0],
        tokenizer=FakeTokenizer(),
        max_response_tokens=4,
    )
    assert group.meta["offline_inserted"] is True and len(group.responses) == 3


def test_replace_last_needs_all_n_online_responses():
    with pytest.raises(ValueError, match="expected 4 online"):
        build_group(
            0,
            [5],
            _online(1, 1, 1),
            n=4,
            cfg=REPLACE,
            offline_text="x",
            tokenizer=FakeTokenizer(),
            max_response_tokens=4,
        )


@pytest.mark.parametrize(("mode", "online"), [("append", 3), ("replace_last", 4)])
def test_offline_rewards_take_the_last_slot_in_both_modes(mode, online):
    cfg = MixPolicyConfig(enable_mix_policy=True, mode=mode)
    group = build_group(
        0,
        [5],
        _online(*[1] * online),
        n=4,
        cfg=cfg,
        offline_text="x",
        tokenizer=FakeTokenizer(),
        max_response_tokens=4,
    )
    scored = {"accuracy": torch.tensor([0.0, 0.0, 1.0, 0.0][:online])}
    merged = merge_offline_rewards(group, scored, {"accuracy": torch.tensor([1.0])})
    assert merged["accuracy"].tolist() == [0.0, 0.0, 1.0, 1.0]
    unmixed = Group(1, [5], _online(1, 1))
    scored = {"accuracy": torch.ones(2)}
    assert merge_offline_rewards(unmixed, scored, {"accuracy": torch.zeros(1)}) is scored


def test_toy_run_builds_groups_of_n_in_replace_last_mode():
    from evalkit.trainer.step import StepSettings
    from tests._toy_rl import ToyRun

    for mode, sizes in (("replace_last", {4}), ("append", {4})):
        run = ToyRun(StepSettings(), seed=0, mix=MixPolicyConfig(enable_mix_policy=True, mode=mode))
        batch, rewards = run.rollout()
        counts = torch.bincount(batch.group_ids).tolist()
        assert set(counts) == sizes and len(rewards) == len(batch)
        assert batch.is_offline.sum().item() == run.prompts_per_step
        offline_rows = batch.is_offline.nonzero().squeeze(1)
        assert rewards[offline_rows].tolist() == [1.0, 1.0]  # answer + EOS: accurate, formatted


def test_mode_is_a_named_config_choice():
    from evalkit.errors import ConfigError
    from evalkit.trainer.config import load_config

    cfg = load_config(None, ["mix_policy.enable_mix_policy=true", "mix_policy.mode=replace_last"])
    assert cfg.mix_policy.mode == "replace_last"
    assert load_config(None).mix_policy.mode == "append"
    with pytest.raises(ConfigError, match="mode"):
        load_config(None, ["mix_policy.mode=replace_first"])
