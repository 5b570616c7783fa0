"""DAPO dynamic sampling: drop all-equal groups, refill, stop at the target or at max tries."""

from __future__ import annotations

import logging

import pytest

from evalkit.trainer.algorithms.dynamic_sampling import collect_groups, has_signal


class Script:
    """A generate_groups() that replays scripted batches; groups are (name, accuracies)."""

    def __init__(self, *batches):
        self.batches = list(batches)
        self.calls = 0

    def __call__(self):
        self.calls += 1
        return self.batches.pop(0)


def acc(group):
    return group[1]


SIG, FLAT1, FLAT0 = [1.0, 0.0], [1.0, 1.0], [0.0, 0.0]


def test_signal_means_not_all_accuracies_equal():
    assert has_signal([0.0, 1.0, 1.0])
    assert not has_signal([1.0, 1.0, 1.0])
    assert not has_signal([0.0, 0.0])
    assert has_signal([1.0])  # verl keeps a group of one
    assert not has_signal([1.0], keep_singletons=False)


def test_groups_without_signal_are_dropped_and_refilled():
    gen = Script(
        [("a", SIG), ("b", FLAT1), ("c", FLAT0)],
        [("d", FLAT0), ("e", SIG)],
        [("f", SIG), ("g", SIG)],
    )
    result = collect_groups(gen, acc, target=3, max_tries=5)
    assert [g[0] for g in result.groups] == ["a", "e", "f"]
    assert (result.tries, result.generated, result.dropped, result.surplus) == (3, 7, 3, 1)
    assert result.reached_target and result.notes == []


def test_no_further_generation_once_the_target_is_reached():
    gen = Script([("a", SIG), ("b", SIG)], [("never", SIG)])
    result = collect_groups(gen, acc, target=2, max_tries=5)
    assert gen.calls == 1 and len(result.groups) == 2


def test_max_tries_bounds_generation_and_reports_the_shortfall(caplog):
    gen = Script([("a", FLAT1)], [("b", SIG)], [("c", FLAT0)], [("unused", SIG)])
    with caplog.at_level(logging.WARNING):
        result = collect_groups(gen, acc, target=3, max_tries=3, on_shortfall="partial")
    assert gen.calls == 3
    assert [g[0] for g in result.groups] == ["b"]
    assert not result.reached_target
    assert "1/3 groups" in result.notes[0] and "1/3 groups" in caplog.text
    assert result.metrics()["dynamic_sampling/reached_target"] == 0.0


def test_all_flat_batches_give_an_empty_result_when_partial_is_chosen():
    result = collect_groups(
        Script([("a", FLAT0)]), acc, target=1, max_tries=1, on_shortfall="partial"
    )
    assert result.groups == [] and result.dropped == 1


def test_bad_arguments_are_rejected():
    with pytest.raises(ValueError, match="target"):
        collect_groups(Script(), acc, target=0, max_tries=1)


def test_running_out_of_tries_is_a_data_error_the_cli_prints_in_one_line():
    from evalkit.errors import DataError

    with pytest.raises(DataError, match="0/1 groups with signal"):
        collect_groups(Script([("a", FLAT0)]), acc, target=1, max_tries=1)
