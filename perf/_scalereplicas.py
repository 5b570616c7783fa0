"""perf/scale.py part (a): ``evalkit run`` with 1 engine and with ``--replicas 2``.

Same ad-hoc data set (clips of a few lengths, several questions each), same tiny random
Qwen2.5-VL on vLLM's CPU engine, the frame cache built beforehand by ``evalkit cache
build`` with the run's frame settings (the runs pass ``--require-cache``, so a mismatch
fails loudly instead of timing decodes). Throughput comes from the records' stamps (first
IO start to last finish): engine and Ray start-up are reported apart, as wall seconds.
On a 2-core box two replicas share the same two cores, so the ratio is bounded by them:
``cpu_percent_*_machine_*`` says how busy the cores were (other jobs included),
``*_run_cores_used`` how many cores the run's own process tree used on average, and
``*_all_replicas_producing_s`` how long both replicas were finishing samples at once.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from collections import Counter
from pathlib import Path
from typing import TYPE_CHECKING, Any

from _scalecost import _generator, log

if TYPE_CHECKING:
    from evalkit.records import SampleRecord

PIXELS = [str(28 * 28 * 4), str(224 * 168)]  # min, max: small frames for the tiny model
FRAMES = ["--fps", "2", "--max-frames", "16", "--min-pixels", PIXELS[0], "--max-pixels", PIXELS[1]]
RUN_FLAGS = ["--engine", "vllm", "--dtype", "float32", "--max-model-len", "4096"]
RUN_FLAGS += ["--engine-opt", "enforce_eager=true", "--max-tokens", "32", "--no-progress"]
RUN_FLAGS += ["--frames-fps", "2", "--frames-max-frames", "16"]
RUN_FLAGS += ["--frames-min-pixels", PIXELS[0], "--frames-max-pixels", PIXELS[1]]
ENV = {
    "VLLM_CPU_KVCACHE_SPACE": "1",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "VLLM_NO_USAGE_STATS": "1",
    "DO_NOT_TRACK": "1",
    "RAY_AUTH_MODE": "disabled",
}


def replicas_figures(out: Path, *, quick: bool) -> dict[str, Any]:
    """Every figure of part (a), or why there are none."""
    try:
        from evalkit.testing.echo_replica import measure_overhead
    except ImportError:
        return {"replicas_status": "evalkit.scale not available"}
    res: dict[str, Any] = {"replicas_status": "measured"}
    log("driver overhead (Ray start-up, records/s)")
    res |= {k: _round(v) for k, v in measure_overhead(500 if quick else 5000).items()}
    with tempfile.TemporaryDirectory(prefix="evalkit-scale-run-") as tmp:
        work = Path(tmp)
        data, clips = _data_set(work, out, quick)
        model = _model(work)
        _evalkit(["cache", "build", *clips, "--root", str(work / "cache"), "--model", model,
                  *FRAMES, "--workers", "0", "--no-progress"])  # fmt: skip
        for n in (1, 2):
            res |= _run(work, data, model, n)
    r1, r2 = res.get("replicas_1_samples_per_s"), res.get("replicas_2_samples_per_s")
    res["replicas_2_over_1_ratio"] = round(r2 / r1, 4) if r1 and r2 else None
    res["cores"] = os.cpu_count()
    return res


def _round(v: Any) -> Any:
    return round(v, 4) if isinstance(v, float) else v


def _data_set(work: Path, out: Path, quick: bool) -> tuple[Path, list[str]]:
    """Unified multiple-choice rows: clips of several lengths, a few questions each."""
    generate = _generator()
    lengths = (4.0, 8.0) if quick else (4.0, 8.0, 16.0, 30.0)
    # enough work (a minute or so on one engine) that the replicas' staggered engine
    # start-ups do not decide the ratio; --quick only checks that the path works
    per_video = 4 if quick else 100
    clips = [
        str(generate(out / f"replica_{int(s)}s_320x240.mp4", s, 320, 240).resolve())
        for s in lengths
    ]
    rows = [
        {
            "data_type": "video",
            "data_source": "ScaleSet",
            "problem_type": "multiple choice",
            "path": clip,
            "problem": f"question {q} about clip {v}?",
            "problem_id": f"{v}-{q}",
            "options": ["A. left", "B. right"],
            "solution": "<answer>A</answer>",
        }
        for v, clip in enumerate(clips)
        for q in range(per_video)
    ]
    data = work / "scaleset.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return data, clips


def _model(work: Path) -> str:
    from evalkit.tiny_checkpoint import build_tiny_model

    return str(build_tiny_model(work / "model", "qwen2_5_vl", seed=0))


def _evalkit(argv: list[str], sampler: CpuSampler | None = None) -> float:
    """Run the CLI in a child process (its own engine); its wall seconds. ``sampler``
    watches the child's process tree (Ray's processes and workers included)."""
    env = {**os.environ, **ENV}
    t0 = time.perf_counter()
    with tempfile.TemporaryFile("w+") as out:
        proc = subprocess.Popen([sys.executable, "-m", "evalkit", *argv], env=env,
                                stdout=out, stderr=subprocess.STDOUT, text=True)  # fmt: skip
        if sampler is not None:
            sampler.watch(proc.pid)
        code = proc.wait()
        if code != 0:
            out.seek(0)
            tail = "\n".join(out.read().splitlines()[-30:])
            raise RuntimeError(f"evalkit {argv[0]} failed ({code}):\n{tail}")
    return time.perf_counter() - t0


def _run(work: Path, data: Path, model: str, n: int) -> dict[str, Any]:
    """One run with ``n`` replicas (n == 1: the single-engine path); its figures."""
    run_id = f"replicas{n}"
    argv = ["run", "--model", model, "--data", str(data), *RUN_FLAGS]
    argv += ["--cache-root", str(work / "cache"), "--require-cache"]
    argv += ["--runs-dir", str(work / "runs"), "--run-id", run_id]
    if n > 1:
        argv += ["--replicas", str(n)]
    log(f"evalkit run with {n} replica(s)")
    with CpuSampler() as cpu:
        wall = _evalkit(argv, cpu)
    from evalkit.reports.load import read_records
    from evalkit.rundir import RunDir

    run = RunDir(work / "runs" / run_id)
    records = [r for bench in run.benchmarks() for r in read_records(run.store_path(bench))]
    stamps = [r.timings for r in records]
    starts = [t["io_start"] for t in stamps if t.get("io_start") is not None]
    ends = [t["finished"] for t in stamps if t.get("finished") is not None]
    span = max(ends) - min(starts) if starts and ends else None
    p = f"replicas_{n}"
    return _overlap(p, records) | {
        f"{p}_records": len(records),
        f"{p}_unique_ids": len({r.id for r in records}),
        f"{p}_ok": sum(r.status == "ok" for r in records),
        f"{p}_first_error": next((r.error for r in records if r.error), None),
        f"{p}_process_wall_s": round(wall, 2),
        f"{p}_records_span_s": round(span, 3) if span else None,
        f"{p}_samples_per_s": round(len(records) / span, 4) if span else None,
        f"{p}_records_per_replica": dict(Counter(str(r.replica) for r in records)),
        # the whole machine (shared with other jobs) and this run's own process tree
        f"cpu_percent_{p}_machine_mean": cpu.mean(),
        f"cpu_percent_{p}_machine_per_core": cpu.per_core(),
        f"{p}_run_cpu_s": round(cpu.tree_cpu_s(), 2),
        f"{p}_run_cores_used": round(cpu.tree_cpu_s() / wall, 3),
    }


def _overlap(p: str, records: list[SampleRecord]) -> dict[str, Any]:
    """How long every replica was producing at once (first to last finish of each)."""
    ends: dict[str, list[float]] = {}
    for r in records:
        if (t := r.timings.get("finished")) is not None:
            ends.setdefault(str(r.replica), []).append(t)
    if len(ends) < 2:
        return {f"{p}_all_replicas_producing_s": None}
    window = min(max(v) for v in ends.values()) - max(min(v) for v in ends.values())
    return {f"{p}_all_replicas_producing_s": round(max(window, 0.0), 3)}


class CpuSampler:
    """psutil.cpu_percent per core, and the CPU seconds of a watched process tree, sampled
    every half second while the block runs."""

    def __init__(self, every_s: float = 0.5) -> None:
        self.every_s = every_s
        self.samples: list[list[float]] = []
        self.cpu_by_pid: dict[int, float] = {}
        self._root: int | None = None
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, daemon=True)

    def watch(self, pid: int) -> None:
        """Count this process and its descendants' CPU time from now on."""
        self._root = pid

    def __enter__(self) -> CpuSampler:
        import psutil

        psutil.cpu_percent(percpu=True)  # the first call only sets the reference point
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        import psutil

        while not self._stop.wait(self.every_s):
            self.samples.append(psutil.cpu_percent(percpu=True))
            if self._root is not None:
                self._tree(psutil)

    def _tree(self, psutil: Any) -> None:
        try:
            root = psutil.Process(self._root)
            procs = [root, *root.children(recursive=True)]
        except psutil.Error:
            return
        for proc in procs:
            try:
                t = proc.cpu_times()
            except psutil.Error:
                continue  # gone meanwhile: its last sample stands
            # counters only grow: the latest sample is the process's total so far
            self.cpu_by_pid[proc.pid] = t.user + t.system

    def tree_cpu_s(self) -> float:
        """CPU seconds of the watched tree (up to each process's last sample)."""
        return sum(self.cpu_by_pid.values())

    def per_core(self) -> list[float]:
        """Mean busy percent of each core over the block."""
        if not self.samples:
            return []
        cores = len(self.samples[0])
        return [round(sum(s[c] for s in self.samples) / len(self.samples), 1) for c in range(cores)]

    def mean(self) -> float | None:
        """Mean busy percent over all cores."""
        per = self.per_core()
        return round(sum(per) / len(per), 1) if per else None
