"""``evalkit sweep`` against separate ``evalkit run``s: 4 settings (2 frame counts x 2
pixel budgets) of SynthVideo on the tiny random Qwen2.5-VL model, real vLLM CPU engine.

(sweep)    one ``evalkit sweep``: every video decoded once for the 4 FrameSpecs while the
           one engine starts, then the 4 settings side by side on that engine
(separate) 4 runs one after another, as ``evalkit run`` does them (each starts its engine
           and decodes its own frames while it starts)

Each arm has a fresh frame cache. The decode work is also measured alone (no engine), in
fresh caches: one build of the 4 FrameSpecs per video (the sweep's) against 4 builds of one
spec each (the separate runs'), in this process so the pools' start does not count.
Engine starts are counted. Prints progress on stderr and ONE JSON object last on stdout.
``--dry-run`` checks the setup (videos, settings, model) without starting an engine.

``--many N`` measures instead what a sweep of N settings (``generation.max_tokens``
8..8+N-1, one SynthVideo clip) costs in processes and how it stops, as ``evalkit sweep``
in a process of its own beside ``evalkit run`` of one setting: the peak of the sweep's
processes (and of its scoring processes: forked copies of it) and their PSS while it runs;
how long a second ``evalkit sweep --resume`` of it takes to be refused; and the seconds
from SIGTERM, mid-run, to the exit of each, with the lines each printed after the signal.
"""

from __future__ import annotations

import argparse
import json
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

# perf/ itself: PYTHONSAFEPATH (tox) keeps a script's folder off sys.path
sys.path.insert(0, str(Path(__file__).resolve().parent))
from _tiny_engine import ENGINE_OPTIONS, offline_env

FRAME_COUNTS = (4, 8)
PIXEL_BUDGETS = (12544, 37632)  # 112x112 and SynthVideo's pinned 224x168


def log(msg: str) -> None:
    print(f"[perf/sweep] {msg}", file=sys.stderr, flush=True)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--per-family", type=int, default=4, help="SynthVideo samples per family")
    p.add_argument("--families", default="yes_no,flash_count", help="SynthVideo families")
    p.add_argument("--workers", type=int, default=2, help="decode processes")
    p.add_argument("--rounds", type=int, default=2, help="alternated decode-only rounds")
    p.add_argument("--dry-run", action="store_true", help="set up and plan; no engine")
    p.add_argument("--many", type=int, default=0, help="N settings: processes and SIGTERM")
    args = p.parse_args()
    offline_env()
    if args.many:
        print(json.dumps(many(args.many)))
        return

    import evalkit.run.execute as runner
    from evalkit import sweep as sw
    from evalkit.cache.build import build
    from evalkit.engines.logs import quiet_engine_logs
    from evalkit.run.config import RunConfig
    from evalkit.synthvideo import generate
    from evalkit.tiny_checkpoint import build_tiny_model

    quiet_engine_logs()
    tmp = Path(tempfile.mkdtemp(prefix="perf-sweep-"))
    generate(tmp / "synth", args.per_family, "test", 0, families=args.families.split(","))
    build_tiny_model(tmp / "model", "qwen2_5_vl", seed=0)
    axes: dict[str, list[Any]] = {
        "frames.nframes": list(FRAME_COUNTS),
        "frames.max_pixels": list(PIXEL_BUDGETS),
    }

    def base(cache: str) -> RunConfig:
        return RunConfig(
            model=str(tmp / "model"),
            bench=["SynthVideo"],
            data_root=str(tmp / "synth"),
            engine_options=ENGINE_OPTIONS,
            max_tokens=8,
            cache_root=str(tmp / cache),
            cache_workers=args.workers,
        )

    starts: list[str] = []
    real = runner.make_engine

    def counted(cfg: Any) -> Any:
        starts.append(cfg.config.model)  # a RunPlan
        return real(cfg)

    runner.make_engine = counted  # type: ignore[assignment]

    # decode alone: one build of the 4 specs per video against 4 builds of one spec
    plan = sw.Sweep.plan(base("cache-decode"), axes, False, tmp / "plan")
    ((refs, specs),) = sw.Runner.frame_jobs([sw.Runner.plan(s.cfg) for s in plan.settings])
    log(f"{len(refs)} videos, {len(specs)} frame specs, {len(plan.settings)} settings")
    out: dict[str, Any] = {"videos": len(refs), "settings": len(plan.settings)}
    if args.dry_run:
        print(json.dumps({**out, "dry_run": True}))
        return
    # in this process (workers=0): the decode work itself, not the pools' start; a first
    # build warms the imports and the page cache; rounds alternate, the best of each counts
    build(sw.Runner.cache(base("cache-warm")), refs, specs[0], workers=0, progress=False)
    together, apart = [], []
    for r in range(args.rounds):
        t0 = time.perf_counter()
        build(sw.Runner.cache(base(f"cache-decode-{r}")), refs, specs, workers=0, progress=False)
        together.append(time.perf_counter() - t0)
        t0 = time.perf_counter()
        for i, spec in enumerate(specs):
            cache = sw.Runner.cache(base(f"cache-decode-{r}-{i}"))
            build(cache, refs, spec, workers=0, progress=False)
        apart.append(time.perf_counter() - t0)
    out["sweep_decode_s"] = round(min(together), 3)
    out["separate_decode_s"] = round(min(apart), 3)
    out["sweep_over_separate_decode_ratio"] = round(min(together) / min(apart), 3)

    log("sweep arm")
    sweep = sw.Sweep.plan(base("cache-sweep"), axes, False, tmp / "sweep")
    t0 = time.perf_counter()
    _, decode_s = sw.execute(sweep)
    out["sweep_wall_s"] = round(time.perf_counter() - t0, 3)
    out["sweep_decode_in_run_s"] = round(decode_s, 3)
    out["sweep_engine_starts"] = len(starts)

    log("separate arm")
    starts.clear()
    t0 = time.perf_counter()
    for s in plan.settings:
        data = s.cfg.model_dump()
        data.update(cache_root=str(tmp / "cache-separate"), runs_dir=str(tmp / "runs"))
        runner.execute(RunConfig.model_validate(data))
    out["separate_wall_s"] = round(time.perf_counter() - t0, 3)
    out["separate_engine_starts"] = len(starts)
    out["sweep_over_separate_runs_ratio"] = round(out["sweep_wall_s"] / out["separate_wall_s"], 3)
    print(json.dumps(out))


def _tree(pid: int) -> list[int]:
    """Every process under ``pid`` now."""
    import psutil

    try:
        return [c.pid for c in psutil.Process(pid).children(recursive=True)]
    except psutil.Error:
        return []


def _pss_mb(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/smaps_rollup").read_text().splitlines():
                if line.startswith("Pss:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return round(total / 1024, 1)


def _cmdline(pid: int) -> bytes:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes()
    except OSError:
        return b""


class _Command:
    """``evalkit ARGS`` as a process of its own, watched until SIGTERM ends it; ``store``:
    the glob of its results stores (under ``cwd``)."""

    def __init__(self, args: list[str], cwd: Path, store: str) -> None:
        import subprocess
        import threading

        argv = [sys.executable, "-m", "evalkit", *args]
        self.proc = subprocess.Popen(
            argv, cwd=cwd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True
        )
        self.pattern, self.cwd = store, cwd
        self.peak = {"processes": 0, "scoring_processes": 0, "pss_mb": 0.0}
        self.lines: list[tuple[float, str]] = []  # (when, line) of its stderr
        threading.Thread(target=self._read, daemon=True).start()

    def _read(self) -> None:
        assert self.proc.stderr is not None
        for line in self.proc.stderr:
            self.lines.append((time.monotonic(), line.rstrip()))

    def records(self) -> list[int]:
        """Records in each store the command has written so far."""
        return [len(f.read_bytes().splitlines()) for f in self.cwd.glob(self.pattern)]

    def watch(self, until: Any, timeout_s: float = 900.0) -> None:
        """Note the peaks of its processes until ``until(self)``."""
        deadline = time.monotonic() + timeout_s
        while not until(self):
            if self.proc.poll() is not None or time.monotonic() > deadline:
                said = "\n".join(line for _, line in self.lines[-20:])
                raise SystemExit(f"ended or timed out first:\n{said}")
            tree = _tree(self.proc.pid)
            own = _cmdline(self.proc.pid)
            self.peak["processes"] = max(self.peak["processes"], len(tree))
            forked = sum(_cmdline(p) == own for p in tree)
            self.peak["scoring_processes"] = max(self.peak["scoring_processes"], forked)
            self.peak["pss_mb"] = max(self.peak["pss_mb"], _pss_mb([self.proc.pid, *tree]))
            time.sleep(0.2)

    def terminate(self) -> dict[str, Any]:
        """SIGTERM: seconds to its exit, exit code, and the lines it printed since."""
        import signal

        t0 = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait()
        took = time.monotonic() - t0
        time.sleep(0.5)  # the reader's last lines
        after = [line for t, line in self.lines if t >= t0]
        return {
            "sigterm_exit_s": round(took, 2),
            "exit_code": self.proc.returncode,
            "lines_after_signal": len(after),
            "traceback": any("Traceback" in line for line in after),
        }


def many(n: int) -> dict[str, Any]:
    """A sweep of ``n`` settings against a run of one: processes, refusal, SIGTERM."""
    import subprocess

    from evalkit.synthvideo import generate
    from evalkit.tiny_checkpoint import build_tiny_model

    tmp = Path(tempfile.mkdtemp(prefix="perf-sweep-many-"))
    generate(tmp / "synth", 2, "test", 0, families=["yes_no"])
    build_tiny_model(tmp / "model", "qwen2_5_vl", seed=0)
    options = [f"--engine-opt={k}={v}" for k, v in ENGINE_OPTIONS.items()]
    # two sequences at a time: records land in waves, so "mid-run" lasts
    options += ["--engine-opt=max_num_seqs=2"]
    base = ["--model", "model", "--bench", "SynthVideo", "--data-root", "synth"]
    base += ["--no-progress", "--cache-root", "cache", "--limit", "1", *options]
    out: dict[str, Any] = {"settings": n}

    log(f"sweep of {n} settings")
    tokens = ",".join(str(8 + i) for i in range(n))
    grid = ["--grid", f"generation.max_tokens={tokens}", "--sweep-dir", "sw"]
    sweep = _Command(["sweep", *base, *grid], tmp, "sw/*/SynthVideo.jsonl")
    half = max(1, n // 2)
    sweep.watch(lambda c: sum(k > 0 for k in c.records()) >= half)
    out["sweep"] = dict(sweep.peak)
    t0 = time.perf_counter()
    second = subprocess.run(
        [sys.executable, "-m", "evalkit", "sweep", "--resume", "sw", "--no-progress"],
        cwd=tmp, capture_output=True, text=True, check=False,
    )  # fmt: skip
    out["second_sweep"] = {
        "refused_s": round(time.perf_counter() - t0, 2),
        "exit_code": second.returncode,
        "said": second.stderr.strip().splitlines()[-1:],
    }
    out["sweep"] |= sweep.terminate()

    log("a run of one setting")
    run = _Command(["run", *base, "--limit", "2", "--max-tokens", "64", "--run-id", "one"],
                   tmp, "runs/one/SynthVideo.jsonl")  # fmt: skip
    run.watch(lambda c: sum(c.records()) >= 1)
    out["run"] = dict(run.peak) | run.terminate()
    out["sigterm_sweep_over_run_ratio"] = round(
        out["sweep"]["sigterm_exit_s"] / out["run"]["sigterm_exit_s"], 2
    )
    return out


if __name__ == "__main__":
    main()
