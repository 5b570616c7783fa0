"""Periodic evaluation: every N steps, the evalkit pipeline on the current weights.

At a due step the hook writes the current weights as a HF checkpoint into a temporary
directory (a snapshot: training goes on changing the live module) and starts
:func:`evalkit.run.execute.execute` on it in a BACKGROUND THREAD. Training continues meanwhile; the
scores are appended to ``metrics.jsonl`` (``eval/<benchmark>``, pooled mean of the sample
scores, plus ``eval/step``) when the run ends. At most one evaluation is in flight: when the
next one falls due while the previous still runs, that due step is skipped and logged, so
evaluation never holds training back; at the end of training :meth:`close` waits for the
last one (training is then done, so that wait is no longer than the evaluation itself).

A thread rather than a process: the evaluation engine (``hf`` on CPU, ``vllm`` on GPU) does
its heavy work outside the GIL (torch kernels, vLLM's own engine processes).
"""

from __future__ import annotations

import logging
import shutil
import tempfile
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any

from .config import TrainerConfig

log = logging.getLogger(__name__)

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
        snapshot = Path(tempfile.mkdtemp(prefix=f"eval-step{step}-", dir=self.out_dir))
        model.save_pretrained(snapshot, safe_serialization=True)
        processor.save_pretrained(snapshot)
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
        """Run the evalkit pipeline on ``snapshot``; pooled mean score per benchmark."""
        from evalkit.run.config import RunConfig
        from evalkit.run.execute import execute
        from evalkit.rundir import RunDir

        s = self.cfg.schedule
        run = RunConfig(
            model=str(snapshot),
            bench=list(s.eval_benchmarks),
            data_root=s.eval_data_root,
            engine=s.eval_engine,
            variant="thinking",
            limit=s.eval_limit,
            cache_root=self.cfg.data.cache_root,
            cache_workers=1,
            runs_dir=str(self.out_dir / "eval"),
            run_id=f"step_{step:08d}",
        )
        result = execute(run)
        rundir = RunDir(result.path)
        scores: dict[str, float] = {}
        for bench in rundir.benchmarks():
            with rundir.store(bench) as store:
                values = [
                    r.score.value
                    for r in store.records()
                    if r.score is not None and r.score.value is not None
                ]
            scores[f"eval/{bench}"] = sum(values) / len(values) if values else float("nan")
            scores[f"eval/{bench}/n"] = float(len(values))
        return scores

    def close(self) -> None:
        """Wait for the evaluation in flight (called once training is over)."""
        if self._thread is not None:
            self._thread.join()
