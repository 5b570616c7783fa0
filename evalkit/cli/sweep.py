"""``evalkit sweep``: the score of each benchmark across a grid of settings (frames,
prompt variant, generation cap), one ordinary run directory per setting, from one engine
start and one decode per video."""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import TYPE_CHECKING

from evalkit.cli import run as run_cli
from evalkit.errors import ConfigError, EngineStartError
from evalkit.rundir import new_run_id

if TYPE_CHECKING:
    from evalkit.sweep import Sweep

PLUGINS_CHECKED = True  # each setting's preflight names a plug-in skipped (check_plugins)


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``evalkit run``'s flags (the base config of every setting) and the grid."""
    run_cli.add_arguments(p)
    for action in p._actions:  # --resume names the sweep's directory here
        if action.dest == "resume":
            action.help = "continue the sweep in DIR (each setting's run resumes; complete ones "
            action.help += "are skipped; a different --grid is refused)"
            action.metavar = "DIR"
    g = p.add_argument_group("sweep")
    g.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="KEY=V1,V2,...",
        help="a swept setting and its values, repeatable (e.g. frames.nframes=8,16 "
        "prompt.variant=plain,thinking); settings: the cross product of all --grid",
    )
    g.add_argument("--zip", action="store_true", help="pair the --grid values instead")
    g.add_argument(
        "--sweep-dir", help="the sweep's directory (default: RUNS_DIR/sweep-<new run id>)"
    )


def run(args: argparse.Namespace) -> int:
    from evalkit import sweep as sw

    axes = sw.parse_grid(args.grid) if args.grid else None
    if args.resume:  # --resume DIR: the sweep directory (each setting's run resumes)
        path = Path(args.resume)
        sw.recorded(path)  # before the lock: a wrong path is left as it is
        base = None
    else:
        if axes is None:
            sw.parse_grid([])  # the one-line error
        base = run_cli.config_from_args(args)
        path = Path(args.sweep_dir or Path(base.runs_dir) / f"sweep-{new_run_id()}")
    # before anything is read, started or written: a second sweep of this directory (or
    # one resuming it) is refused here, in the time it takes to start Python
    with sw.hold(path):
        if base is None:
            sweep = sw.Sweep.resume(path, axes, args.zip)
        else:
            if (path / sw.MANIFEST).is_file():
                raise ConfigError(
                    f"--sweep-dir {path}: holds a sweep already; --resume {path} continues it"
                )
            assert axes is not None
            sweep = sw.Sweep.plan(base, axes, args.zip, path)
        log = _execute(sweep, args)
    sw.show(sweep)
    if log is not None:
        print(f"engine and library output: {log}")
    print(f"sweep directory: {sweep.path}")
    return _outcome(sweep)


def _outcome(sweep: Sweep) -> int:
    """1 (each cause on a line) when a setting's run failed every sample or its engine
    failed on more samples than --max-engine-failures allows, as `evalkit run` exits."""
    import sys

    from evalkit.outcome import run_failed
    from evalkit.rundir import RunDir

    failed = 0
    for s in sweep.settings:
        run = RunDir(sweep.path / s.run)
        if not run.config_path.is_file():
            continue  # named by the sweep report as missing
        why = run_failed(run, run.benchmarks(), s.cfg.max_engine_failures)
        if why is not None:
            failed += 1
            print(f"evalkit sweep: setting {s.id} ({s.run}): {why}", file=sys.stderr)
    return 1 if failed else 0


def _execute(sweep: Sweep, args: argparse.Namespace) -> Path | None:
    """Check every setting, then run them; the log file of the engines' output (None
    with ``--verbose``: it went to the terminal)."""
    from evalkit import sweep as sw
    from evalkit.engines.logs import quiet_engine_logs
    from evalkit.terminal import Terminal

    if not args.verbose:
        quiet_engine_logs()
    on_ray = sweep.base.on_ray
    engines = f"{sweep.base.replicas} replicas" if on_ray else "one engine"
    print(f"sweep: {len(sweep.settings)} settings in {sweep.path} ({engines}, one decode)")
    prepared = sw.prepare(sweep)  # every setting checked before anything is written
    terminal = Terminal()
    try:
        with terminal:  # unless --verbose, the engines' output goes to the sweep's log file
            if not args.verbose:
                sweep.path.mkdir(parents=True, exist_ok=True)
                terminal.capture(sweep.path / "output.log")
            if on_ray:  # one line per replica and the total, as `evalkit run --replicas`
                from evalkit.scale.progress import ReplicaProgress

                shown = ReplicaProgress(enabled=not args.no_progress, terminal=terminal)
                try:
                    sw.execute(sweep, prepared, shown.update)
                finally:
                    shown.stop()
            else:
                sw.execute(sweep, prepared)
    except EngineStartError as exc:
        raise run_cli.with_log(exc, terminal.log_path) from None
    return terminal.log_path
