"""Periodic evaluation: every N steps, the evalkit pipeline on the current weights.

At a due step the hook writes the current weights as a HF checkpoint (a snapshot: training
goes on changing the live module), renamed into place when whole, and evaluates it in a
BACKGROUND THREAD as ``evalkit watch`` does (``evalkit.watch``): one engine kept warm
from one due step to the next, each snapshot's weights loaded into it in place where the
engine can (vLLM: ``schedule.eval_engine: vllm``; the ``hf`` engine starts again), the
benchmarks resolved once, the frame cache warm. ``<output_dir>/eval`` is a watch
directory: a run directory per evaluated step (``step-N``, ``evalkit report`` reads it),
``curve.jsonl`` and ``curve.html``. Training continues meanwhile; each benchmark's
official score (``eval/<benchmark>``, in percent, as ``evalkit report`` gives it; and
``eval/<benchmark>/n``, its samples) is appended to ``metrics.jsonl`` with ``eval/step``
when the evaluation ends. At most one evaluation is in flight: when the next one falls due
while the previous still runs, that due step is skipped and logged, so evaluation never
holds training back; at the end of training :meth:`close` waits for the last one and
closes the engine.

A thread rather than a process: the evaluation engine does its heavy work outside the GIL
(torch kernels, vLLM's own engine processes). One event loop serves every evaluation (the
engine lives on it), each run on the hook's thread of the moment, never two at once.
"""

from __future__ import annotations

import asyncio
import logging
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import TrainerConfig

log = logging.getLogger(__name__)

SNAPSHOTS = "eval-snapshots"
"""The folder of ``<output_dir>`` where due steps' weights are written to be evaluated."""

Writer = Callable[[int, dict[str, float]], None]


class EvalHook:
    """Runs configured benchmarks every ``schedule.eval_every`` steps, in the background."""

    def __init__(self, cfg: TrainerConfig, out_dir: str | Path, write: Writer) -> None:
        self.cfg = cfg
        self.out_dir = Path(out_dir)
        self.write = write
        self._thread: threading.Thread | None = None
        self.skipped: list[int] = []
        self.errors: list[str] = []
        self.finished: list[int] = []
        self._follower: Any = None
        self._loop: asyncio.AbstractEventLoop | None = None

    @property
    def enabled(self) -> bool:
        """True when there is something to evaluate and a period."""
        s = self.cfg.schedule
        return s.eval_every > 0 and bool(s.eval_benchmarks)

    def due(self, step: int) -> bool:
        """Whether ``step`` is an evaluation step."""
        return self.enabled and step % self.cfg.schedule.eval_every == 0

    def maybe_run(self, step: int, model: Any, processor: Any) -> bool:
        """Start the evaluation of ``step`` if due and none is running; True when started."""
        if not self.due(step):
            return False
        if self._thread is not None and self._thread.is_alive():
            self.skipped.append(step)
            log.warning("eval at step %d skipped: the previous evaluation is still running", step)
            return False
        snapshot = self.out_dir / SNAPSHOTS / f"step_{step}"
        snapshot.parent.mkdir(parents=True, exist_ok=True)
        writing = Path(tempfile.mkdtemp(prefix=f".step_{step}-", dir=snapshot.parent))
        model.save_pretrained(writing, safe_serialization=True)
        processor.save_pretrained(writing)
        shutil.rmtree(snapshot, ignore_errors=True)  # a resumed training's earlier one
        writing.rename(snapshot)  # whole before anything reads it
        self._thread = threading.Thread(
            target=self._run, args=(step, snapshot), name=f"trainer-eval-{step}", daemon=True
        )
        self._thread.start()
        return True

    def _run(self, step: int, snapshot: Path) -> None:
        try:
            scores = self.evaluate(step, snapshot)
            self.write(step, {"eval/step": float(step), **scores})
            self.finished.append(step)
        except Exception as exc:  # an evaluation failure must not kill training
            self.errors.append(f"step {step}: {exc}")
            log.exception("evaluation at step %d failed", step)
        finally:
            shutil.rmtree(snapshot, ignore_errors=True)

    def evaluate(self, step: int, snapshot: Path) -> dict[str, float]:
        """Evaluate ``snapshot`` as step ``step`` of the hook's watch (the warm engine); each
        benchmark's official score and sample count."""
        from evalkit.errors import EvalkitError
        from evalkit.watch import Checkpoint

        follower, loop = self._warm()
        outcome = loop.run_until_complete(
            follower.evaluate(Checkpoint(step, snapshot.name, snapshot))
        )
        if outcome.status != "done":
            raise EvalkitError(f"step {step}: {outcome.reason}")
        scores: dict[str, float] = {}
        for row in follower.watch.curve:
            if row["step"] == step:
                headline = row["headline"]
                scores[f"eval/{row['benchmark']}"] = float("nan") if headline is None else headline
                scores[f"eval/{row['benchmark']}/n"] = float(row["samples"])
        return scores

    def _warm(self) -> tuple[Any, asyncio.AbstractEventLoop]:
        """The watch that keeps the engine warm between due steps, and its event loop."""
        if self._follower is None:
            from evalkit.run.config import RunConfig
            from evalkit.watch import Follower, Watch, WatchConfig

            s = self.cfg.schedule
            run = RunConfig(
                model=str(self.out_dir),  # each step's snapshot, set per evaluation
                bench=list(s.eval_benchmarks),
                data_root=s.eval_data_root,
                engine=s.eval_engine,
                engine_options=dict(s.eval_engine_options),
                variant="thinking",
                limit=s.eval_limit,
                cache_root=self.cfg.data.cache_root,
                cache_workers=1,
                runs_dir=str(self.out_dir),
            )
            watch_cfg = WatchConfig(
                ckpt_dir=str(self.out_dir / SNAPSHOTS), watch_dir=str(self.out_dir / "eval")
            )
            watch = Watch.open(watch_cfg, run)
            self._follower = Follower(watch, say=lambda line: log.info("%s", line))
            self._loop = asyncio.new_event_loop()
        assert self._loop is not None
        return self._follower, self._loop

    def close(self) -> None:
        """Wait for the evaluation in flight and close the engine (training is over)."""
        if self._thread is not None:
            self._thread.join()
        if self._follower is not None and self._loop is not None:
            self._loop.run_until_complete(self._follower.close())
            self._loop.close()
            self._follower = self._loop = None
