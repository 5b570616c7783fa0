"""``python -m evalkit.demo`` (``tox -e demo``): the whole job on the embedded default.

On a CPU, offline, in a few minutes: build the tiny random Qwen2.5-VL checkpoint,
generate the SynthVideo test split, build its frame cache with 2 worker processes, run
``evalkit run`` through the real vLLM CPU engine (async pipeline, chunked prefill), and
end with the report (terminal table + HTML page with plots).

The model is randomly initialised: its scores are chance level. The demo shows the
machinery, not a model.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from evalkit.run.config import RunConfig

BANNER = (
    "NOTE: the demo model is a tiny, RANDOMLY INITIALISED Qwen2.5-VL (~1 M parameters).\n"
    "Its scores are chance level (or below: it rarely even answers in the asked format).\n"
    "The demo shows the machinery - cache, pipeline, vLLM, scorers, report - not a model."
)


def _env(workdir: Path) -> None:
    """Offline, project-local caches, a small KV cache: what vLLM on a laptop CPU needs."""
    for key, value in {
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "VLLM_NO_USAGE_STATS": "1",
        "DO_NOT_TRACK": "1",
        "VLLM_CACHE_ROOT": str(workdir / ".cache" / "vllm"),
        "HF_HOME": str(workdir / ".cache" / "hf"),
    }.items():
        os.environ.setdefault(key, value)


def step(msg: str) -> float:
    print(f"\n== {msg}", flush=True)
    return time.perf_counter()


TRAIN_BANNER = (
    "--train: evaluate (A), train briefly on SynthVideo-train with mix-policy, evaluate the\n"
    "trained weights (B), compare B with A per family. Both evaluations use the thinking\n"
    "prompt (<think>...</think><answer>...</answer>) the training rewards."
)


def _parse(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=Path(".evalkit/demo"))
    p.add_argument("--n", type=int, default=4, help="SynthVideo questions per family (8 families)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument(
        "--train",
        action="store_true",
        help="the whole loop: evaluate, train (mix-policy), evaluate again, compare A vs B",
    )
    p.add_argument(
        "--train-steps", type=int, default=None, help="training steps (default: the config's)"
    )
    return p.parse_args(argv)


def _run_config(args: argparse.Namespace, model: Path, work: Path, run_id: str | None) -> RunConfig:
    from evalkit.run.config import RunConfig

    return RunConfig(
        model=str(model),
        bench=["SynthVideo"],
        data_root=str(work / "synthvideo"),
        engine="vllm",
        engine_options={
            "dtype": "float32",
            "enforce_eager": True,
            "max_num_batched_tokens": 512,
            "max_num_seqs": 8,
            "max_model_len": 4096,
        },
        # --train: the prompt the training rewards; 128 tokens hold a trained answer
        variant="thinking" if args.train else None,
        max_tokens=128 if args.train else None,
        require_cache=True,
        cache_root=str(work / "cache"),
        runs_dir=str(work / "runs"),
        run_id=run_id,
    )


def _evaluate(cfg: RunConfig, title: str) -> Path:
    """``evalkit run`` on ``cfg``; prints the per-benchmark stats, returns the run dir."""
    from evalkit.run.execute import execute
    from evalkit.rundir import RunDir
    from evalkit.startup import StartupTimes
    from evalkit.terminal import Terminal

    t = step(title)
    # as `evalkit run` does: vLLM's and transformers' output goes to the run's log file
    with Terminal() as terminal:
        result = execute(cfg, on_open=lambda path: terminal.capture(RunDir(path).log_path))
    for name, st in result.stats.items():
        print(
            f"   {name}: {st.completed} scored, {st.failed} failed, "
            f"{st.samples_per_s():.2f} samples/s ({time.perf_counter() - t:.1f} s in all)"
        )
    startup = StartupTimes.read(result.path)
    if startup is not None:
        print(f"   {startup.describe()}")
    print(f"   engine and library output: {RunDir(result.path).log_path}")
    return Path(result.path)


def main(argv: list[str] | None = None) -> int:
    """The demo: model, data, cache, evaluation (+ --train: training, evaluation) and report."""
    args = _parse(argv)
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    _env(work)
    t_start = time.perf_counter()
    print(BANNER + ("\n" + TRAIN_BANNER if args.train else ""))
    total = 7 if args.train else 5

    from evalkit.cache import FrameCache, build_cache
    from evalkit.engines.family import detect_family
    from evalkit.run.plan import refs_of, resolve_benchmarks
    from evalkit.synthvideo import generate
    from evalkit.tiny_checkpoint import build_tiny_model

    t = step(f"1/{total} tiny random model (evalkit model tiny --family qwen2_5_vl)")
    model = build_tiny_model(work / "model", "qwen2_5_vl", seed=args.seed)
    print(f"   {model} ({time.perf_counter() - t:.1f} s)")

    t = step(f"2/{total} SynthVideo test split ({args.n} questions x 8 families)")
    generate(work / "synthvideo", args.n, split="test", seed=args.seed)
    print(f"   {work / 'synthvideo'} ({time.perf_counter() - t:.1f} s)")

    from evalkit.rundir import new_run_id

    run_a = new_run_id("before-training") if args.train else None
    cfg = _run_config(args, model, work, run_a)
    t = step(f"3/{total} frame cache (evalkit cache build, 2 worker processes)")
    bench = resolve_benchmarks(cfg, detect_family(model))[0]
    report = build_cache(
        FrameCache(cfg.cache_root), refs_of(bench.samples), bench.frame_spec, workers=2
    )
    print(f"   {report.summary()} ({time.perf_counter() - t:.1f} s)")
    if not report.ok:
        return 1
    engine = "evalkit run --bench SynthVideo --engine vllm"
    runs = [_evaluate(cfg, f"4/{total} {engine} (async pipeline, CPU)")]
    if args.train:
        run_b, trained = _train_and_evaluate(args, model, work)
        runs.append(run_b)
    _report(runs, total, trained if args.train else "")
    print(f"demo finished in {time.perf_counter() - t_start:.0f} s\n")
    print(BANNER)
    return 0


def _train_and_evaluate(args: argparse.Namespace, model: Path, work: Path) -> tuple[Path, str]:
    """Steps 5 and 6 of --train: the trainer as a child process, then evaluate its weights."""
    from evalkit.demo_train import run_training, train_summary
    from evalkit.rundir import new_run_id

    t = step("5/7 python -m evalkit.trainer.demo (mix-policy GRPO on SynthVideo-train, CPU)")
    summary = run_training(
        model, work / "train", work / "synthvideo", args.n, args.seed, args.train_steps
    )
    print(f"   {summary['steps']} steps in {time.perf_counter() - t:.0f} s")
    said = train_summary(summary)
    print(f"   {said}")
    cfg = _run_config(args, Path(summary["model"]), work, new_run_id("after-training"))
    return _evaluate(cfg, "6/7 evalkit run on the trained weights (B)"), said


def _report(runs: list[Path], total: int, trained: str = "") -> None:
    """The report of one run, or the A-vs-B report plus per-family deltas."""
    from rich.console import Console

    from evalkit.reports import build_report, write_report
    from evalkit.textwidth import terminal_width

    step(f"{total}/{total} evalkit report" + (" A vs B" if len(runs) > 1 else ""))
    rep = build_report(runs, bootstrap=200)
    console = Console(width=terminal_width())
    files = write_report(rep, runs[0] / "report", ["table", "md", "html", "json"], console)
    if len(runs) > 1:
        from evalkit.demo_train import family_deltas, print_deltas

        print()
        text = print_deltas(family_deltas(runs[0], runs[1]), runs[0].name, runs[1].name, trained)
        (runs[0] / "report" / "family_deltas.txt").write_text(text + "\n")
    print(f"\nHTML report: {files['html']}")
    print(f"run director{'ies' if len(runs) > 1 else 'y'}: {', '.join(map(str, runs))}")


if __name__ == "__main__":
    sys.exit(main())
