"""The ``--train`` leg of the demo: train by subprocess, then per-family deltas, honestly labelled.

evalkit never imports the trainer (DESIGN.md: trainer imports evalkit, not the reverse):
training runs as ``python -m evalkit.trainer.demo`` in a child process, which writes a
Hugging Face checkpoint the demo then evaluates like any model.

The per-family deltas are B - A over the samples both runs scored: the mean of the
per-sample differences, with a seeded paired bootstrap 95% interval (percentiles of the
resampled means). With a few questions per family the intervals are wide; a family whose
interval includes 0 did not measurably move.
"""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

TRAINED_FAMILIES = ("moving_shape", "yes_no", "flash_count")
"""The families the demo trains on (those with offline trajectories); keep in step with
trainer/demo.py's FAMILIES."""


def run_training(
    model: Path, work: Path, data_root: Path, n: int, seed: int, steps: int | None
) -> dict[str, Any]:
    """Run the trainer's demo leg as a child process, echo its output, return its summary."""
    cmd = [
        sys.executable,
        "-m",
        "evalkit.trainer.demo",
        "--model",
        str(model),
        "--workdir",
        str(work),
        "--eval-data-root",
        str(data_root),
        "--cache-root",
        str(work.parent / "cache"),
        "--n",
        str(n),
        "--seed",
        str(seed),
    ]
    if steps is not None:
        every = max(1, steps // 2)
        cmd += [f"schedule.steps={steps}", f"schedule.eval_every={every}"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True, bufsize=1)
    last = ""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.strip():
            last = line
            if not line.startswith("{"):
                print(f"   {line.rstrip()}", flush=True)
    if proc.wait() != 0:
        raise RuntimeError(f"training failed (exit {proc.returncode}): {' '.join(cmd)}")
    summary: dict[str, Any] = json.loads(last)
    return summary


def train_summary(summary: dict[str, Any]) -> str:
    """The training leg in words: online (sampled) format and accuracy, first vs last steps,
    and the periodic evaluation's scores."""
    first, last = summary["first_steps"], summary["last_steps"]
    evals = ", ".join(
        f"step {int(e['eval/step'])}: {e.get('eval/SynthVideo', float('nan')):.2f} "
        f"({int(e.get('eval/SynthVideo/n', 0))} samples)"
        for e in summary["eval_hook"]
    )
    return (
        f"online (sampled) responses, mean of the first vs last 5 steps: format reward "
        f"{first['format']:.2f} -> {last['format']:.2f}, accuracy {first['accuracy']:.2f} -> "
        f"{last['accuracy']:.2f}; periodic eval (hf engine, pooled score): {evals or 'none'}"
    )


@dataclass
class FamilyDelta:
    """B - A of one family: score and format, each with a paired bootstrap 95% interval."""

    family: str
    n: int
    score_a: float
    score_b: float
    score_delta: tuple[float, float, float]
    format_a: float
    format_b: float
    format_delta: tuple[float, float, float]
    distinct_answers_b: int
    trained: bool


def _per_sample(run_dir: Path, bench: str) -> dict[str, dict[str, Any]]:
    """id -> (family, score value, format, extracted answer) of the run's scored records."""
    out = {}
    from evalkit.rundir import RunDir

    with RunDir(run_dir).store(bench) as store:
        for rec in store.records():
            score = rec.score
            if score is None or score.value is None:
                continue
            out[rec.id] = {
                "family": rec.fields.get("family", "?"),
                "score": score.value,
                "format": float(score.metadata.get("format", 0.0)),
                "answer": score.answer,
            }
    return out


def paired_delta(
    a: np.ndarray, b: np.ndarray, n_boot: int = 2000, seed: int = 0
) -> tuple[float, float, float]:
    """Mean of b - a and the percentile 95% interval of a seeded paired bootstrap."""
    d = b - a
    if len(d) == 0:
        return float("nan"), float("nan"), float("nan")
    rng = np.random.default_rng(seed)
    means = d[rng.integers(0, len(d), size=(n_boot, len(d)))].mean(axis=1)
    low, high = np.percentile(means, [2.5, 97.5])
    return float(d.mean()), float(low), float(high)


def family_deltas(run_a: Path, run_b: Path, bench: str = "SynthVideo") -> list[FamilyDelta]:
    """Per-family B - A over the common samples, plus an ``ALL`` row (pooled)."""
    sa, sb = _per_sample(run_a, bench), _per_sample(run_b, bench)
    common = sorted(set(sa) & set(sb))
    families = sorted({sa[i]["family"] for i in common})
    out = []
    for fam in [*families, "ALL"]:
        ids = [i for i in common if fam == "ALL" or sa[i]["family"] == fam]
        a_s, b_s = (np.array([s[i]["score"] for i in ids]) for s in (sa, sb))
        a_f, b_f = (np.array([s[i]["format"] for i in ids]) for s in (sa, sb))
        out.append(
            FamilyDelta(
                fam,
                len(ids),
                float(a_s.mean()),
                float(b_s.mean()),
                paired_delta(a_s, b_s),
                float(a_f.mean()),
                float(b_f.mean()),
                paired_delta(a_f, b_f),
                len({json.dumps(sb[i]["answer"]) for i in ids if sb[i]["answer"] is not None}),
                fam in TRAINED_FAMILIES,
            )
        )
    return out


def verdict(deltas: list[FamilyDelta]) -> str:
    """What the numbers show, in words (format vs accuracy, trained families vs not)."""
    trained = [d for d in deltas if d.trained]
    fmt_up = any(d.format_delta[1] > 0 for d in deltas)
    acc_up = [d for d in trained if d.score_delta[1] > 0]
    if acc_up:
        names = ", ".join(d.family for d in acc_up)
        return (
            f"accuracy rose on {names} (interval above 0). On SynthVideo a model can gain "
            "by learning the answer prior (a frequent letter, 'yes', a common count) without "
            "watching the video: check 'distinct answers' - one answer for a whole family "
            "is a prior, not video understanding."
        )
    if fmt_up:
        return (
            "FORMAT LEARNT, NOT VIDEO UNDERSTANDING: the trained model now writes its answer "
            "in the asked <think>/<answer> form more often, but no family's accuracy "
            "interval lies above 0."
        )
    return (
        "nothing moved measurably in the greedy evaluation (every interval includes 0): the "
        "model's most likely output is not yet well-formed. Expected for a tiny random model "
        "after minutes of training; the training line shows what its sampled responses learnt."
    )


def _fmt(x: float) -> str:
    return "nan" if x != x else f"{x:.2f}"


def print_deltas(deltas: list[FamilyDelta], label_a: str, label_b: str, trained: str = "") -> str:
    """The per-family table (plain text, also returned) with its notes and the verdict."""
    head = (
        f"{'family':<14}{'n':>3}  {'score A':>7} {'score B':>7}  {'B - A [95% CI]':<24}"
        f"{'format A':>8} {'format B':>8}  {'B - A [95% CI]':<24}{'answers':>7}  trained"
    )
    lines = [f"Per-family deltas: B = {label_b} vs A = {label_a}", head]
    for d in deltas:
        sd, fd = d.score_delta, d.format_delta
        lines.append(
            f"{d.family:<14}{d.n:>3}  {_fmt(d.score_a):>7} {_fmt(d.score_b):>7}  "
            f"{f'{sd[0]:+.2f} [{sd[1]:+.2f}, {sd[2]:+.2f}]':<24}"
            f"{_fmt(d.format_a):>8} {_fmt(d.format_b):>8}  "
            f"{f'{fd[0]:+.2f} [{fd[1]:+.2f}, {fd[2]:+.2f}]':<24}{d.distinct_answers_b:>7}  "
            f"{'yes' if d.trained else ('-' if d.family == 'ALL' else 'no')}"
        )
    lines += [
        "score = the family's scorer value per sample (accuracy, IoU, 1 - WER); format = 1 "
        "marked + parsable answer, 0.5 parsable, 0 none; intervals: seeded paired bootstrap "
        "(2000 resamples) of the mean per-sample difference; answers = distinct extracted "
        "answers of B in the family",
        *([f"training (SynthVideo-train, sampled at T=1): {trained}"] if trained else []),
        f"verdict (greedy evaluation, SynthVideo-test): {verdict(deltas)}",
    ]
    text = "\n".join(lines)
    print(text, flush=True)
    return text
