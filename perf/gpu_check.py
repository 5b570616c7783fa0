"""Device check on an NVIDIA GPU: sync vs async pipeline, 1 vs 2 replicas, through vLLM CUDA.

Stages, each a subprocess with its own timeout, all inside ``--budget-s`` (default 450 s):

1. ``nvidia-smi``: GPU name, memory and count.
2. ``evalkit model tiny``: a small random Qwen2.5-VL, built on the fly (no downloads).
3. ``evalkit synth``: SynthVideo clips (``--n`` questions per family, 8 families).
4. ``evalkit cache build --bench synthvideo``: the frames, under the run's pinned spec, so
   every arm reads the same cache (``--require-cache``) and none pays for decoding.
5. Arms, each ``evalkit run --bench synthvideo`` on the same samples and settings:
   ``sync`` (vanilla batches, ``--mode sync``), ``async`` (the pipeline, one engine),
   ``async_replicas_1`` and ``async_replicas_2`` (``--replicas 1|2`` on Ray). With one GPU
   the two replicas share it: a Ray head is started here that advertises 2 GPUs and does
   not set CUDA_VISIBLE_DEVICES, and every arm runs with ``--gpu-memory-utilization``
   0.4 and a fixed KV cache (``--kv-cache-bytes``), so two engines fit side by side and
   neither sizes its cache while the other is allocating; the output says so.

Throughput of an arm is read from its run directory: records / (last scored - first
started), so the engine's start-up is not in it; ``engine_start_s`` is the time from
launching ``evalkit run`` to its first request (imports, Ray, model load, warm-up).
Prints progress on stderr and ONE JSON object last on stdout. ``--dry-run`` checks the
plan (every command parses with evalkit's own CLI, the timeouts fit the budget) without
a GPU and exits 0; a test runs it so the script does not rot.
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

SHARED_GPU_UTILIZATION = 0.4
RAY_PORT = 6391


def log(msg: str) -> None:
    print(f"[perf/gpu_check] {msg}", file=sys.stderr, flush=True)


@dataclass
class Stage:
    """One command of the plan."""

    name: str
    argv: list[str]
    timeout_s: float
    env: dict[str, str] = field(default_factory=dict)
    run_dir: Path | None = None
    """Where an arm's run directory lands (``evalkit run`` stages only)."""


@dataclass
class Plan:
    """Every stage in order, and what the output must say about the placement."""

    stages: list[Stage]
    gpus: int
    placement: str
    ray_head: list[str] | None = None
    skipped: dict[str, str] = field(default_factory=dict)


def evalkit(*args: str) -> list[str]:
    """argv of an evalkit command run by this interpreter."""
    return [sys.executable, "-m", "evalkit", *args]


def has_replicas_flag() -> bool:
    """Whether ``evalkit run`` knows ``--replicas`` (the scale-out is merged)."""
    from evalkit.cli.main import command_parser

    return any("--replicas" in a.option_strings for a in command_parser("run")._actions)


def run_args(a: argparse.Namespace, work: Path, run_id: str, shared_gpu: bool) -> list[str]:
    """The ``evalkit run`` flags every arm shares."""
    util = SHARED_GPU_UTILIZATION if shared_gpu else a.gpu_memory_utilization
    args = [
        "run", "--bench", "synthvideo", "--data-root", str(work / "data"),
        "--model", str(work / "model"), "--engine", "vllm", "--dtype", a.dtype,
        "--max-tokens", str(a.max_tokens), "--gpu-memory-utilization", str(util),
        "--cache-root", str(work / "cache"), "--require-cache",
        "--runs-dir", str(work / "runs"), "--run-id", run_id, "--no-progress",
    ]  # fmt: skip
    if a.kv_cache_bytes:
        args += ["--engine-opt", f"engine_kwargs={{kv_cache_memory_bytes: {a.kv_cache_bytes}}}"]
    if a.eager:
        args += ["--engine-opt", "enforce_eager=true"]
    return args


def make_plan(a: argparse.Namespace, work: Path, gpus: int) -> Plan:
    """The stages for a machine with ``gpus`` GPUs."""
    shared = gpus < 2
    env = {"RAY_AUTH_MODE": "disabled", "VLLM_NO_USAGE_STATS": "1", "HF_HUB_OFFLINE": "1"}
    stages = [
        Stage("model", evalkit("model", "tiny", str(work / "model"), "--seed", "0"), 180),
        Stage("videos", evalkit("synth", "--out", str(work / "data" / "synthvideo"),
                                "--split", "test", "--n", str(a.n), "--seed", "0"), 120),
        Stage("cache", evalkit("cache", "build", "--bench", "synthvideo", "--data-root",
                               str(work / "data"), "--model", str(work / "model"), "--root",
                               str(work / "cache"), "--workers", str(a.cache_workers),
                               "--no-progress", "--json"), 120),
    ]  # fmt: skip
    arms = {"sync": ["--mode", "sync"], "async": ["--mode", "async"]}
    skipped = {}
    if has_replicas_flag():
        head = [] if not shared else ["--ray-address", f"127.0.0.1:{RAY_PORT}"]
        arms["async_replicas_1"] = ["--mode", "async", "--replicas", "1", *head]
        arms["async_replicas_2"] = ["--mode", "async", "--replicas", "2", *head]
    else:
        why = "evalkit run has no --replicas here (the Ray scale-out is not merged)"
        skipped = {"async_replicas_1": why, "async_replicas_2": why}
    for name, extra in arms.items():
        argv = evalkit(*run_args(a, work, name, shared), *extra)
        stages.append(Stage(name, argv, a.arm_timeout_s, env, work / "runs" / name))
    placement = (
        "no replica arms: " + next(iter(skipped.values()))
        if skipped
        else f"2 replicas on 2 of {gpus} GPUs"
        if not shared
        else f"1 GPU: 2 replicas share it, gpu_memory_utilization {SHARED_GPU_UTILIZATION} "
        f"each, KV cache {a.kv_cache_bytes or 'sized by vLLM'} bytes per engine"
    )
    ray_head = None
    if shared and not skipped:
        ray_head = ["ray", "start", "--head", f"--port={RAY_PORT}", "--num-gpus=2",
                    "--include-dashboard=false", "--disable-usage-stats"]  # fmt: skip
    return Plan(stages, gpus, placement, ray_head, skipped)


def gpu_info() -> tuple[str, int, float]:
    """(name of GPU 0, number of GPUs, its memory in GiB) from nvidia-smi."""
    out = subprocess.run(
        ["nvidia-smi", "--query-gpu=name,memory.total", "--format=csv,noheader,nounits"],
        capture_output=True, text=True, timeout=30, check=True,
    ).stdout.strip().splitlines()  # fmt: skip
    name, mib = (x.strip() for x in out[0].split(","))
    return name, len(out), float(mib) / 1024


def run_stage(stage: Stage, deadline: float) -> tuple[float, float, str | None]:
    """Run a stage within its timeout and the overall deadline: (launched, seconds, error)."""
    timeout = min(stage.timeout_s, deadline - time.time())
    if timeout < 5:
        return time.time(), 0.0, "skipped: out of time budget"
    log(f"{stage.name}: {' '.join(stage.argv[2:])[:160]} (timeout {timeout:.0f} s)")
    t0 = time.time()
    try:
        proc = subprocess.run(
            stage.argv, env={**os.environ, **stage.env}, capture_output=True, text=True,
            timeout=timeout,
        )  # fmt: skip
    except subprocess.TimeoutExpired:
        return t0, time.time() - t0, f"timed out after {timeout:.0f} s"
    if proc.returncode != 0:
        tail = (proc.stderr or proc.stdout).strip().splitlines()[-5:]
        return t0, time.time() - t0, f"exit {proc.returncode}: " + " | ".join(tail)
    return t0, time.time() - t0, None


def arm_figures(run_dir: Path, launched: float) -> dict[str, Any]:
    """Samples, ok samples, samples/s and engine start-up from an arm's run directory."""
    from evalkit.rundir import RunDir

    run = RunDir(run_dir)
    lines = [
        json.loads(line)
        for bench in run.benchmarks()  # one results store per benchmark
        for line in run.store_path(bench).read_text().splitlines()
        if line.strip()
    ]
    records = [r for r in lines if "id" in r and isinstance(r.get("timings"), dict)]
    starts = [_first(r["timings"], ("io_start", "submitted")) for r in records]
    ends = [_first(r["timings"], ("scored", "finished")) for r in records]
    starts_ok = [s for s in starts if s is not None]
    ends_ok = [e for e in ends if e is not None]
    if not records or not starts_ok or not ends_ok:
        return {"samples": len(records), "error": f"no timed records in {run_dir}"}
    span = max(ends_ok) - min(starts_ok)
    return {
        "samples": len(records),
        "ok": sum(r.get("status") == "ok" for r in records),
        "replicas_seen": len({r.get("replica") for r in records if r.get("replica")}),
        "samples_per_s": round(len(records) / span, 3) if span > 0 else None,
        "busy_s": round(span, 3),
        "engine_start_s": round(min(starts_ok) - launched, 3),
    }


def _first(timings: dict[str, Any], keys: tuple[str, ...]) -> float | None:
    return next((timings[k] for k in keys if timings.get(k) is not None), None)


def ratio(num: Any, den: Any) -> float | None:
    """num / den rounded, or None when either is missing."""
    return round(num / den, 3) if num and den else None


def execute(plan: Plan, deadline: float) -> dict[str, Any]:
    """Run every stage in order; figures per arm, seconds per stage, errors by stage."""
    out: dict[str, Any] = {"arms": {}, "stage_s": {}, "errors": {}}
    for stage in plan.stages:
        launched, seconds, error = run_stage(stage, deadline)
        out["stage_s"][stage.name] = round(seconds, 1)
        if error:
            out["errors"][stage.name] = error
            log(f"{stage.name}: {error}")
            if stage.run_dir is None:  # no model, videos or cache: the arms cannot run
                break
            continue
        if stage.run_dir is not None:
            out["arms"][stage.name] = arm_figures(stage.run_dir, launched)
            log(f"{stage.name}: {out['arms'][stage.name]}")
    return out


def start_head(plan: Plan, deadline: float) -> str | None:
    """Start the Ray head the shared-GPU replicas join; an error message or None."""
    if plan.ray_head is None:
        return None
    env = {"RAY_AUTH_MODE": "disabled", "RAY_EXPERIMENTAL_NOSET_CUDA_VISIBLE_DEVICES": "1"}
    head = Stage("ray_head", plan.ray_head, 90, env)
    return run_stage(head, deadline)[2]


def summarize(plan: Plan, done: dict[str, Any], gpu: tuple[str, int, float]) -> dict[str, Any]:
    """The one JSON object: per-arm figures flattened, the two ratios, the setting."""
    arms = done["arms"]
    sps = {name: figures.get("samples_per_s") for name, figures in arms.items()}
    result: dict[str, Any] = {
        "gpu_name": gpu[0],
        "gpu_count": gpu[1],
        "gpu_memory_gib": round(gpu[2], 1),
        "replicas_2_placement": plan.placement,
        **{f"{name}_samples_per_s": v for name, v in sps.items()},
        **{f"{n}_engine_start_s": f.get("engine_start_s") for n, f in arms.items()},
        "async_over_sync_ratio": ratio(sps.get("async"), sps.get("sync")),
        "replicas_2_over_1_ratio": ratio(sps.get("async_replicas_2"), sps.get("async_replicas_1")),
        "stage_s": done["stage_s"],
        "arms": arms,
        "errors": done["errors"],
        "skipped": plan.skipped,
    }
    return result


def dry_run(plan: Plan, budget_s: float) -> int:
    """Check that every evalkit command parses and that the timeouts fit the budget."""
    from evalkit.cli.main import command_parser

    problems = []
    for stage in plan.stages:
        args = stage.argv[3:]  # after `python -m evalkit`
        try:
            command_parser(args[0]).parse_args(args[1:])
        except SystemExit:
            problems.append(f"{stage.name}: evalkit {args[0]} does not accept these flags")
    if plan.ray_head and not shutil.which(plan.ray_head[0]):
        problems.append("ray_head: no `ray` command on PATH (pip install 'evalkit[ray]')")
    problems += [
        f"{s.name}: timeout over the budget" for s in plan.stages if s.timeout_s > budget_s
    ]
    total = sum(s.timeout_s for s in plan.stages)
    print(json.dumps({
        "dry_run": True,
        "stages": [{"name": s.name, "timeout_s": s.timeout_s, "argv": s.argv[1:]}
                   for s in plan.stages],
        "ray_head": plan.ray_head, "placement": plan.placement, "skipped": plan.skipped,
        "sum_of_timeouts_s": total, "budget_s": budget_s, "problems": problems,
    }))  # fmt: skip
    return 1 if problems else 0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    """The script's flags."""
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--dry-run", action="store_true", help="check the plan; no GPU needed")
    p.add_argument("--work", help="working folder (default: a temporary one, removed after)")
    p.add_argument("--n", type=int, default=24, help="questions per family (8 families)")
    p.add_argument("--max-tokens", type=int, default=32, help="generation cap per sample")
    p.add_argument("--dtype", default="bfloat16", help="engine dtype")
    p.add_argument("--gpu-memory-utilization", type=float, default=0.85,
                   help="per engine when each replica has its own GPU")  # fmt: skip
    p.add_argument("--kv-cache-bytes", type=int, default=4 * 2**30,
                   help="fixed KV cache per engine (0: vLLM sizes it)")  # fmt: skip
    p.add_argument("--eager", action="store_true", help="no torch.compile / CUDA graphs")
    p.add_argument("--cache-workers", type=int, default=4, help="frame cache decoders")
    p.add_argument("--arm-timeout-s", type=float, default=150, help="per evalkit run")
    p.add_argument("--budget-s", type=float, default=450, help="all stages together")
    return p.parse_args(argv)


def main(argv: list[str] | None = None) -> int:
    """Plan, run (or check) the stages, print the JSON."""
    a = parse_args(argv)
    if a.dry_run:  # the one-GPU plan: it has every stage the others have, and the head
        work = Path(a.work or os.path.join(tempfile.gettempdir(), "evalkit_gpu_check"))
        return dry_run(make_plan(a, work, gpus=1), a.budget_s)
    work = Path(a.work or tempfile.mkdtemp(prefix="evalkit_gpu_check_"))
    t0 = time.time()
    deadline = t0 + a.budget_s
    try:
        gpu = gpu_info()
    except (OSError, subprocess.SubprocessError, ValueError, IndexError) as exc:
        print(json.dumps({"error": f"no NVIDIA GPU found by nvidia-smi: {exc}"}))
        return 2
    plan = make_plan(a, work, gpus=gpu[1])
    log(f"{gpu[0]} x{gpu[1]}; {plan.placement}; work in {work}")
    head_error = start_head(plan, deadline)
    try:
        done = execute(plan, deadline)
    finally:
        if plan.ray_head is not None:
            subprocess.run(["ray", "stop"], capture_output=True, timeout=60)
        if not a.work:
            shutil.rmtree(work, ignore_errors=True)
    if head_error:
        done["errors"]["ray_head"] = head_error
    result = summarize(plan, done, gpu)
    result["total_s"] = round(time.time() - t0, 1)
    print(json.dumps(result))
    return 0 if not done["errors"] else 1


if __name__ == "__main__":
    sys.exit(main())
