"""The demo's --train leg: paired deltas, the honest verdict, evalkit not importing trainer."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from evalkit.demo_train import FamilyDelta, paired_delta, verdict


def test_paired_delta_is_the_mean_difference_inside_its_interval():
    a = np.array([0.0, 0.0, 1.0, 0.0, 1.0, 0.0])
    b = np.array([1.0, 0.0, 1.0, 1.0, 1.0, 0.0])
    mean, low, high = paired_delta(a, b, n_boot=500, seed=0)
    assert mean == pytest.approx(2 / 6)  # two of six samples gained 1
    assert 0.0 <= low < mean < high <= 1.0


def test_paired_delta_of_identical_runs_is_exactly_zero():
    a = np.array([0.2, 0.7, 1.0])
    assert paired_delta(a, a.copy()) == (0.0, 0.0, 0.0)


def test_paired_delta_is_seeded():
    a, b = np.zeros(5), np.array([1.0, 0.0, 1.0, 0.0, 0.0])
    assert paired_delta(a, b, seed=1) == paired_delta(a, b, seed=1)


def _delta(family, score, fmt, trained=True):
    return FamilyDelta(family, 4, 0.0, score[0], score, 0.0, fmt[0], fmt, 1, trained)


def test_a_format_gain_without_accuracy_gain_is_labelled_format_not_video():
    deltas = [_delta("yes_no", (0.25, -0.25, 0.75), (0.8, 0.5, 1.0))]
    assert verdict(deltas).startswith("FORMAT LEARNT, NOT VIDEO UNDERSTANDING")


def test_an_accuracy_gain_names_the_family_and_warns_about_the_answer_prior():
    deltas = [_delta("yes_no", (0.5, 0.25, 0.75), (0.8, 0.5, 1.0))]
    text = verdict(deltas)
    assert "yes_no" in text and "answer prior" in text


def test_an_accuracy_gain_on_an_untrained_family_is_not_claimed():
    deltas = [_delta("word", (0.5, 0.25, 0.75), (0.0, 0.0, 0.0), trained=False)]
    assert verdict(deltas).startswith("nothing moved")


def test_the_demo_modules_do_not_import_the_trainer():
    code = (
        "import sys, evalkit.demo, evalkit.demo_train; "
        "print(sorted(m for m in sys.modules if 'trainer' in m))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_the_training_summary_names_format_accuracy_and_the_periodic_eval():
    from evalkit.demo_train import train_summary

    text = train_summary(
        {
            "first_steps": {"format": 0.02, "accuracy": 0.0},
            "last_steps": {"format": 0.21, "accuracy": 0.04},
            "eval_hook": [{"eval/step": 20.0, "eval/SynthVideo": 0.0, "eval/SynthVideo/n": 8.0}],
        }
    )
    assert "format reward 0.02 -> 0.21" in text and "step 20: 0.00 (8 samples)" in text


def test_the_demo_training_config_is_package_data_and_loads_with_the_demo_overrides():
    from evalkit.demo_train import TRAINED_FAMILIES
    from evalkit.trainer.config import load_config
    from evalkit.trainer.demo import FAMILIES, config_path

    cfg = load_config(config_path(), ["model=m", "data.train_path=t.jsonl"])
    assert cfg.mix_policy.enable_mix_policy and cfg.mix_policy.accuracy_gate == 0.5
    assert cfg.schedule.eval_every > 0 and cfg.schedule.eval_benchmarks == ["SynthVideo"]
    assert FAMILIES == TRAINED_FAMILIES
