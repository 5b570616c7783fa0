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


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--workdir", type=Path, default=Path(".evalkit/demo"))
    p.add_argument("--n", type=int, default=4, help="SynthVideo questions per family (8 families)")
    p.add_argument("--seed", type=int, default=0)
    args = p.parse_args(argv)
    work = args.workdir.resolve()
    work.mkdir(parents=True, exist_ok=True)
    _env(work)
    t_start = time.perf_counter()
    print(BANNER)

    from evalkit.cache import FrameCache, build_cache
    from evalkit.engines.family import detect_family
    from evalkit.models.tiny import build_tiny_model
    from evalkit.reports import build_report, write_report
    from evalkit.runner import RunConfig, execute, refs_of, resolve_benchmarks
    from evalkit.synthvideo import generate

    t = step("1/5 tiny random model (evalkit model tiny --family qwen2_5_vl)")
    model = build_tiny_model(work / "model", "qwen2_5_vl", seed=args.seed)
    print(f"   {model} ({time.perf_counter() - t:.1f} s)")

    t = step(f"2/5 SynthVideo test split ({args.n} questions x 8 families)")
    data = work / "synthvideo"
    generate(data, args.n, split="test", seed=args.seed)
    print(f"   {data} ({time.perf_counter() - t:.1f} s)")

    cfg = RunConfig(
        model=str(model),
        bench=["SynthVideo"],
        data_root=str(data),
        engine="vllm",
        engine_options={
            "dtype": "float32",
            "enforce_eager": True,
            "max_num_batched_tokens": 512,
            "max_num_seqs": 8,
            "max_model_len": 4096,
        },
        require_cache=True,
        cache_root=str(work / "cache"),
        runs_dir=str(work / "runs"),
    )
    t = step("3/5 frame cache (evalkit cache build, 2 worker processes)")
    bench = resolve_benchmarks(cfg, detect_family(model).factor)[0]
    refs = refs_of(bench.samples)
    report = build_cache(FrameCache(cfg.cache_root), refs, bench.frame_spec, workers=2)
    print(f"   {report.summary()} ({time.perf_counter() - t:.1f} s)")
    if not report.ok:
        return 1

    t = step("4/5 evalkit run --bench SynthVideo --engine vllm (async pipeline, CPU)")
    result = execute(cfg)
    for name, st in result.stats.items():
        print(
            f"   {name}: {st.completed} scored, {st.failed} failed, "
            f"{st.samples_per_s():.2f} samples/s ({time.perf_counter() - t:.1f} s incl. "
            "engine start)"
        )

    step("5/5 evalkit report")
    rep = build_report([result.path], bootstrap=200)
    from rich.console import Console

    console = Console(width=max(Console().width, 120))
    files = write_report(rep, result.path / "report", ["table", "md", "html", "json"], console)
    print(f"\nHTML report: {files['html']}")
    print(f"run directory: {result.path}")
    print(f"demo finished in {time.perf_counter() - t_start:.0f} s\n")
    print(BANNER)
    return 0


if __name__ == "__main__":
    sys.exit(main())
