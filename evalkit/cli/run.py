"""``evalkit run``: evaluate a model on benchmarks through the asynchronous pipeline."""

from __future__ import annotations

import argparse
import sys
import threading
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import yaml

from evalkit.cli.checks import validate_model
from evalkit.config import (
    add_model_args,
    finite_float,
    load_yaml_model,
    overlay,
    values_from_args,
)
from evalkit.engines import engine_choices
from evalkit.errors import ConfigError, EngineStartError, EvalkitError
from evalkit.pipeline import Pipeline, PipelineConfig
from evalkit.run.config import FrameOverrides, JudgeConfig, RunConfig

if TYPE_CHECKING:
    from evalkit.run.execute import RunResult

# a plug-in skipped is named by the preflight's error (check_plugins), not warned of
PLUGINS_CHECKED = True

# Engine knobs with their own flags (all others: --engine-opt KEY=VALUE).
_ENGINE_FLAGS = {
    "max_num_batched_tokens": int,
    "max_num_seqs": int,
    "tensor_parallel_size": int,
    "gpu_memory_utilization": finite_float,
    "dtype": str,
    "max_model_len": int,
}


# Flags of lmms-eval (``python -m lmms_eval``) and VLMEvalKit (``run.py``) that people type
# out of habit -> evalkit's way to say the same (the error names it instead of argparse's
# bare "unrecognized arguments"; the README's "Coming from lmms-eval" has the whole table).
FOREIGN_FLAGS = {
    "--tasks": "--bench NAME[,NAME] (lmms-eval task names are accepted: --bench videomme)",
    "--model_args": "--model CHECKPOINT_DIR, engine settings as --engine-opt KEY=VALUE",
    "--output_path": "--runs-dir DIR (and --run-id NAME)",
    "--log_samples": "nothing: every sample is always recorded in runs/<id>/<benchmark>.jsonl",
    "--batch_size": "--pipeline-max-in-flight N (the engine batches on its own)",
    "--gen_kwargs": "--max-tokens N (decoding is pinned per benchmark)",
    "--num_fewshot": "nothing: evalkit's benchmarks are zero-shot as pinned",
    "--verbosity": "--verbose",
    "--nframe": "--frames-nframes N",
    "--fps": "--frames-fps RATE",
    "--work-dir": "--runs-dir DIR",
    "--reuse": "--resume runs/<id>",
    "--api-nproc": "--pipeline-max-in-flight N",
    "--judge": "--judge-model MODEL (and --judge-engine)",
    "--device": "--tensor-parallel-size N (GPUs by CUDA_VISIBLE_DEVICES)",
    "--include_path": "EVALKIT_BENCHMARKS=DIR (a folder of benchmark spec YAMLs)",
}


# RunConfig's fields under each heading of `evalkit run --help`, in order. Only the layout
# is said here: each flag (name, type, choices, help) is generated from its field. A field
# under no heading still gets its flag, among the general options (_rest).
_GROUPS = {
    "engine and prompt": ("engine", "variant", "rule", "max_tokens", "limit", "mode"),
    "frames and cache": (
        "require_cache",
        "cache_root",
        "cache_workers",
        "cache_identity",
        "cache_codec",
        "cache_jpeg_quality",
    ),
    "run directory": ("runs_dir", "run_id", "resume", "force", "retry_failed"),
    "replicas on Ray": (
        "replicas",
        "ray_address",
        "cpus_per_replica",
        "replica_restarts",
        "ray_connect_timeout_s",
    ),
}
_FIRST = ("bench", "model", "data", "video_root", "data_root", "allow_missing", "fetch")


def _extra() -> dict[str, dict[str, Any]]:
    """What a field's annotation cannot say about its flag: the engines a plug-in may add,
    and the name ``--ray-connect-timeout`` kept from before the field had its ``_s``."""
    return {
        "engine": {"choices": engine_choices()},
        "ray_connect_timeout_s": {"aliases": ["--ray-connect-timeout"], "metavar": "SECONDS"},
    }


def _rest() -> list[str]:
    """RunConfig's fields under no heading (their flags go among the general options)."""
    placed = {name for names in _GROUPS.values() for name in names} | set(_FIRST)
    return [name for name in RunConfig.model_fields if name not in placed]


def add_arguments(p: argparse.ArgumentParser) -> None:
    """Flags of ``evalkit run``: one per RunConfig setting, generated from its field (the
    ``--config`` YAML key of the same name), plus the glue below."""
    extra = _extra()
    # glue: the YAML file the flags override
    p.add_argument("--config", help="run YAML (RunConfig fields); flags override it")
    add_model_args(p, RunConfig, fields=_FIRST, extra=extra)
    for title, names in _GROUPS.items():
        group = p.add_argument_group(title)
        add_model_args(group, RunConfig, fields=names, extra=extra)
        if title == "engine and prompt":
            _engine_options(group)
    add_judge_arguments(p.add_argument_group("judge"))
    add_model_args(p, RunConfig, fields=_rest(), extra=extra)
    # glue: how the run is shown, not what it is (not in RunConfig, not recorded)
    p.add_argument("--no-progress", action="store_true", help="no live progress display")
    p.add_argument(
        "--verbose", action="store_true", help="let vLLM and transformers log at INFO level"
    )
    add_model_args(p, FrameOverrides, prefix="frames_")
    add_model_args(p, PipelineConfig, prefix="pipeline_")


def add_judge_arguments(p: Any) -> None:
    """The ``--judge-*`` flags (``evalkit run`` and ``evalkit score``): one per JudgeConfig
    setting, and ``--judge-opt`` (glue: KEY=VALUE pairs into its engine_options dict)."""
    add_model_args(p, JudgeConfig, prefix="judge_", extra=_extra())
    p.add_argument(
        "--judge-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="judge engine setting (YAML value), repeatable",
    )


def judge_from_args(args: argparse.Namespace) -> dict[str, Any] | None:
    """The ``judge`` settings the --judge-* flags give (None: no such flag was given)."""
    judge = values_from_args(args, JudgeConfig, prefix="judge_")
    if args.judge_opt:
        judge["engine_options"] = _key_values(args.judge_opt, "--judge-opt")
    return judge or None


def _engine_options(p: Any) -> None:
    """Glue: the engine_options dict. Its keys belong to each engine's own config model, so
    they come as --engine-opt KEY=VALUE, a few common ones with a flag of their own."""
    p.add_argument(
        "--engine-opt",
        action="append",
        default=[],
        metavar="KEY=VALUE",
        help="backend setting (YAML value), repeatable",
    )
    for name, typ in _ENGINE_FLAGS.items():
        kind: Any = typ
        p.add_argument("--" + name.replace("_", "-"), type=kind, help=f"engine option {name}")
    p.add_argument(
        "--trust-remote-code",
        action="store_true",
        help="run code shipped with the checkpoint (families that need it: `evalkit models`); "
        "recorded with the run",
    )


def config_from_args(args: argparse.Namespace) -> RunConfig:
    """Merge ``--config`` YAML with flags into a validated RunConfig."""
    data: dict[str, Any] = {}
    if args.config:
        data = load_yaml_model(args.config, RunConfig).model_dump(exclude_unset=True)
    given = values_from_args(args, RunConfig)
    options = {name: getattr(args, name) for name in _ENGINE_FLAGS}
    options = {name: value for name, value in options.items() if value is not None}
    if getattr(args, "trust_remote_code", False):  # unset otherwise: fingerprints unchanged
        options["trust_remote_code"] = True
    options.update(_key_values(args.engine_opt, "--engine-opt"))
    if options:
        given["engine_options"] = options
    judge = judge_from_args(args)
    if judge is not None:
        given["judge"] = judge
    data = overlay(data, given, RunConfig)
    if data.get("resume"):  # the run's recorded settings, these flags as overrides
        from evalkit.run.resume import with_recorded

        data = with_recorded(data)
    if "model" not in data:
        raise ConfigError("--model is required (or `model:` in --config)")
    cfg: RunConfig = validate_model(RunConfig, data)
    return cfg


def _key_values(items: list[str], flag: str) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, sep, value = item.partition("=")
        if not sep:
            raise ConfigError(f"{flag} {item!r}: expected KEY=VALUE")
        out[key] = yaml.safe_load(value)
    return out


class Progress:
    """A live line per benchmark: rate, tokens/s, in flight, IO depth, cache hits, ETA."""

    def __init__(self, enabled: bool, terminal: Any = None) -> None:
        self.enabled = enabled
        self.terminal = terminal
        """Where to draw (``evalkit.terminal.Terminal``; None: stderr)."""
        self._pipe: Pipeline | None = None
        self._name = ""
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None

    def start(self, name: str, pipe: Pipeline) -> None:
        """Follow a new benchmark's pipeline."""
        self._name, self._pipe = name, pipe
        if self.enabled and self._thread is None:
            self._thread = threading.Thread(target=self._loop, daemon=True)
            self._thread.start()

    def _loop(self) -> None:
        from rich.console import Console
        from rich.live import Live

        console = Console(file=self.terminal.err) if self.terminal else Console(stderr=True)
        with Live(console=console, refresh_per_second=4, transient=True) as live:
            while not self._stop.wait(0.25):
                live.update(self.line())

    def line(self) -> str:
        """The current progress line."""
        pipe = self._pipe
        if pipe is None:
            return ""
        s = pipe.stats
        dt = max(time.time() - s.started, 1e-9)
        done = s.completed + s.failed
        todo = s.total - s.skipped - done
        rate = done / dt
        eta = f"{todo / rate:.0f}s" if rate > 0 else "?"
        looked = s.cache_hits + s.cache_misses
        hits = f"{100 * s.cache_hits / looked:.0f}%" if looked else "-"
        return (
            f"[bold]{self._name}[/] {done}/{s.total - s.skipped} "
            f"({s.failed} failed, {s.skipped} resumed) | {rate:.2f} samples/s | "
            f"{s.output_tokens / dt:.0f} tok/s | in flight {s.in_flight} | "
            f"io {s.io_running}+{s.waiting} | cache hits {hits} | ETA {eta}"
        )

    def stop(self) -> None:
        """End the display."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join(timeout=2)


def run(args: argparse.Namespace) -> int:
    """Run, then print the official score of each benchmark (exit 1: every sample failed)."""
    from evalkit.engines.logs import quiet_engine_logs
    from evalkit.run.resume import overrides
    from evalkit.terminal import Terminal

    cfg = config_from_args(args)
    if not args.verbose:
        quiet_engine_logs()
    changed = overrides(cfg)
    if changed:  # result settings among them are refused unless --force (by fingerprint)
        print(f"resuming {cfg.resume} with overrides: " + "; ".join(changed))
    terminal = Terminal()
    try:
        with terminal:  # released before the summary, and before main() prints an error
            result = _execute(cfg, args, terminal)
    except EngineStartError as exc:
        raise with_log(exc, terminal.log_path) from None
    except Exception as exc:
        if not isinstance(exc, EvalkitError) and terminal.log_path is not None:
            # a crash (a traceback follows): what the engine said about it is in the log
            print(f"evalkit run: engine and library output: {terminal.log_path}", file=sys.stderr)
        raise
    return _finish(cfg, result, terminal.log_path)


def with_log(exc: EngineStartError, log_path: Path | None) -> EngineStartError:
    """``exc`` with the root cause the engine's output gives (an engine process's own
    exception, which the front end only relays: "See root cause above") and the log that
    holds that output, its cause's traceback appended there (with ``--verbose``, no log:
    the traceback goes to the terminal, after everything the engine printed)."""
    import traceback

    from evalkit.engines.logs import root_cause

    cause = exc.__cause__
    if log_path is None:
        if cause is not None:
            traceback.print_exception(cause, file=sys.stderr)
        return exc
    said = root_cause(log_path)
    if cause is not None:
        with open(log_path, "a", encoding="utf-8") as log:
            traceback.print_exception(cause, file=log)
    why = f"; the engine's output says: {'; '.join(said)}" if said else ""
    return EngineStartError(f"{exc}{why}; its output and traceback: {log_path}")


def _execute(cfg: RunConfig, args: argparse.Namespace, terminal: Any) -> RunResult:
    """The run, in process or on Ray replicas, with its progress display; unless
    ``--verbose``, the engines' output goes to the run's log file once the run exists."""
    from evalkit.rundir import RunDir

    def on_open(path: Path) -> None:
        if not args.verbose:
            terminal.capture(RunDir(path).log_path)

    if not args.verbose and cfg.ray_address:
        terminal.capture_early()  # Ray speaks while connecting, before the run directory

    if cfg.on_ray:  # replicas on Ray: one line per replica and the total
        from evalkit.scale.driver import run_replicas
        from evalkit.scale.progress import ReplicaProgress

        shown = ReplicaProgress(enabled=not args.no_progress, terminal=terminal)
        try:
            return run_replicas(cfg, shown.update, on_open=on_open)
        finally:
            shown.stop()
    from evalkit.run.execute import execute

    progress = Progress(enabled=not args.no_progress, terminal=terminal)
    try:
        return execute(cfg, on_start=progress.start, on_open=on_open)
    finally:
        progress.stop()


def _finish(cfg: RunConfig, result: RunResult, log_path: Path | None) -> int:
    """The per-benchmark counts, start-up times, the summary table, where things are."""
    from evalkit.outcome import run_failed
    from evalkit.rundir import RunDir
    from evalkit.startup import StartupTimes

    if result.nothing_to_run:
        again = "" if cfg.retry_failed else " (--retry-failed reruns the failed ones)"
        print(f"nothing to run: every sample is already recorded in {result.path}{again}")
    for name, st in result.stats.items():
        missing = f" ({st.media_missing} with missing media)" if st.media_missing else ""
        print(
            f"{name}: {st.completed} done, {st.failed + st.media_missing} failed{missing}, "
            f"{st.skipped} resumed ({st.samples_per_s():.2f} samples/s)"
        )
    startup = StartupTimes.read(result.path)
    if startup is not None and not result.nothing_to_run:
        print(startup.describe())
    print_summary(result.path)
    if log_path is not None:
        print(f"engine and library output: {log_path}")
    print(f"run directory: {result.path}")
    why = run_failed(RunDir(result.path), result.stats, cfg.max_engine_failures)
    if why is not None:
        print(f"evalkit run: {why}", file=sys.stderr)
        return 1
    return 0


def print_summary(path: Path) -> None:
    """Per-benchmark official scores of a run (the full report is `evalkit report`)."""
    from rich.console import Console

    from evalkit.reports import load_run, verdicts
    from evalkit.reports.render import to_terminal
    from evalkit.reports.sections import summary
    from evalkit.textwidth import terminal_width

    run = load_run(path, bootstrap=200)
    verdicts(run, 1.0, None)
    to_terminal([summary(run)], Console(width=terminal_width()))
