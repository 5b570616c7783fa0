"""``evalkit watch CKPT_DIR``: evaluate a training run's checkpoints as they appear, with one
warm engine, into one run directory per checkpoint and a curve per benchmark."""

from __future__ import annotations

import argparse
import asyncio
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.cli import run as run_cli
from evalkit.cli.checks import validate_model
from evalkit.config import add_model_args, values_from_args
from evalkit.errors import ConfigError, EngineStartError

if TYPE_CHECKING:
    from evalkit.run.config import RunConfig
    from evalkit.scalars import Scalars
    from evalkit.terminal import Terminal
    from evalkit.watch import Watch, WatchConfig

_REFUSED = {
    "resume": "a watch resumes by itself: run the same command again (or give --watch-dir)",
    "run_id": "each checkpoint's run is named step-N in the watch directory",
}


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The folder to watch, the watch's own settings, and ``evalkit run``'s flags (the
    settings every checkpoint is evaluated under; ``--model`` is each checkpoint)."""
    from evalkit.watch import WatchConfig

    p.add_argument(
        "ckpt_dir", metavar="CKPT_DIR", help=WatchConfig.model_fields["ckpt_dir"].description
    )
    g = p.add_argument_group("watch")
    add_model_args(g, WatchConfig, fields=[f for f in WatchConfig.model_fields if f != "ckpt_dir"])
    run_cli.add_arguments(p)
    for action in p._actions:  # the model is each checkpoint (and --model-base)
        if action.dest == "model":
            action.help = argparse.SUPPRESS


def configs(args: argparse.Namespace) -> tuple[WatchConfig, RunConfig]:
    """(WatchConfig, the RunConfig of every checkpoint) from the flags."""
    from evalkit.watch import WatchConfig

    for dest, why in _REFUSED.items():
        value = getattr(args, dest, None)
        if value not in (None, 1, False):
            raise ConfigError(f"--{dest.replace('_', '-')}: {why}")
    given = {"ckpt_dir": args.ckpt_dir, **values_from_args(args, WatchConfig)}
    watch: WatchConfig = validate_model(WatchConfig, given)
    ckpt_dir = Path(watch.ckpt_dir).expanduser()
    if not ckpt_dir.is_dir():
        raise ConfigError(
            f"CKPT_DIR {watch.ckpt_dir}: no such folder; give the training run's output folder"
        )
    if watch.model_base is not None and not (Path(watch.model_base) / "config.json").is_file():
        raise ConfigError(
            f"--model-base {watch.model_base}: not a checkpoint folder (no config.json); give "
            "the folder of the model the training started from"
        )
    if args.model is None:  # the run config wants a model: the base, else a placeholder
        args.model = watch.model_base or str(ckpt_dir)
    run = run_cli.config_from_args(args)
    from evalkit.engines import engine_spec

    if not engine_spec(run.engine).local_checkpoint:
        raise ConfigError(
            f"--engine {run.engine}: a watch loads each checkpoint into an engine of its own; "
            "use vllm (or hf)"
        )
    if watch.loggers:
        from evalkit.scalars import require

        require(watch.loggers, "--loggers")
    return watch, run


def run(args: argparse.Namespace) -> int:
    """Follow the checkpoints until stopped (or ``--once``, ``--exit-when-idle-s``)."""
    from evalkit import watch as wt
    from evalkit.engines.logs import quiet_engine_logs
    from evalkit.runlock import RunLock
    from evalkit.terminal import Terminal

    watch_cfg, run_cfg = configs(args)
    watch = wt.Watch.open(watch_cfg, run_cfg)
    if not args.verbose:
        quiet_engine_logs()
    watch.path.mkdir(parents=True, exist_ok=True)
    done = sum(o.status == "done" for o in watch.outcomes.values())
    again = f"; {done} checkpoint(s) evaluated before, not again" if watch.outcomes else ""
    print(f"watch: {watch_cfg.ckpt_dir} -> {watch.path}{again}")
    terminal = Terminal()
    scalars = _scalars(watch)
    follower = wt.Follower(watch, say=_say(terminal), scalars=scalars)
    try:
        with RunLock(watch.path), terminal:
            if not args.verbose:
                terminal.capture(watch.path / "output.log")
            asyncio.run(wt.follow(follower, on_wait=_waiting(terminal, watch)))
    except EngineStartError as exc:
        raise run_cli.with_log(exc, terminal.log_path) from None
    finally:
        if scalars is not None:
            scalars.close()
    _summary(watch)
    return 0


def _say(terminal: Terminal) -> Callable[[str], None]:
    """A line for the terminal while descriptors 1 and 2 go to the log."""

    def say(line: str) -> None:
        print(line, file=terminal.out, flush=True)

    return say


def _waiting(terminal: Terminal, watch: Watch) -> Callable[[list[Any]], None]:
    """What the watch waits for, said once each time it changes."""
    shown: list[str] = []

    def on_wait(waiting: list[Any]) -> None:
        if not waiting:
            line = f"waiting for checkpoints in {watch.config.ckpt_dir}"
        else:
            line = "waiting: " + "; ".join(f"{ck.name} ({why})" for ck, why in waiting[:3])
        key = line.split(" (settling")[0]
        if not shown or shown[-1] != key:
            shown.append(key)
            _say(terminal)(line)

    return on_wait


def _scalars(watch: Watch) -> Scalars | None:
    """TensorBoard / W&B sinks when --loggers asks for them."""
    from evalkit.scalars import Scalars, Sink, TensorBoardSink, WandbSink, open_wandb

    sinks: list[Sink] = []
    for name in watch.config.loggers:
        if name == "tensorboard":
            sinks.append(TensorBoardSink(watch.path / "tensorboard"))
        else:
            run = open_wandb(
                "evalkit-watch", watch.path.name, watch.path, watch.run_settings(), None
            )
            sinks.append(WandbSink(run))
    return Scalars(sinks) if sinks else None


def _summary(watch: Watch) -> None:
    """Each benchmark's best checkpoint and where everything is."""
    for bench, row in sorted(watch.best().items()):
        print(f"{bench}: best step {row['step']} ({row['checkpoint']}): {row['headline']:.2f}")
    failed = [o for o in watch.outcomes.values() if o.status != "done"]
    for o in failed:
        print(f"step {o.step} ({o.name}): {o.status}: {o.reason}")
    print(f"curve: {watch.path / 'curve.jsonl'} and {watch.path / 'curve.html'}")
    print(f"watch directory: {watch.path}")
