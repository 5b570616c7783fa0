"""``evalkit watch``: the evaluator beside a training run.

A training run writes checkpoints into a folder; ``evalkit watch CKPT_DIR`` evaluates each
as it appears, in step order, with one warm engine: the engine starts once (on the base
model, evaluated as step 0, when ``--model-base`` is given) and each new checkpoint of the
same architecture and tokenizer is loaded into it in place (vLLM's own ``reload_weights``,
from disk, on every worker; its prefix and encoder caches dropped), so a checkpoint costs
its evaluation, not an engine start. The benchmarks are resolved once; the frame cache
stays warm. A checkpoint of another architecture or tokenizer restarts the engine (said in
one line).

Checkpoint folders are recognised by name in the watched folder (TRL's ``checkpoint-N``,
verl's ``global_step_N`` with its model in ``actor/huggingface``, ``step_N``; the number is
the step). One counts as complete when its files are whole (``config.json`` parses, every
weight file the index names is there, each safetensors file is as long as its header says)
and none has changed for ``settle_s``: a half-written checkpoint is never read, whether the
trainer renames a finished folder into place or writes in place.

The watch directory holds one ordinary run directory per checkpoint (``step-N``: ``evalkit
report`` reads it, and it equals what ``evalkit run --model CKPT`` writes, fingerprint
included), ``watch.json`` (the settings and every checkpoint's outcome: evaluated, failed to
load, skipped), ``curve.jsonl`` (step, benchmark, headline, interval, wall) and
``curve.html`` (a plot per benchmark, the best checkpoint named). A restarted watch goes on
where it stopped: a checkpoint is evaluated exactly once (one killed mid-run resumes by
sample id), and one that fails to load is recorded and skipped, the engine restarted for
the next.
"""

from __future__ import annotations

import asyncio
import contextlib
import dataclasses
import hashlib
import json
import logging
import re
import struct
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from evalkit.atomic import write_text_atomic
from evalkit.errors import ConfigError
from evalkit.run.config import RunConfig

if TYPE_CHECKING:
    from evalkit.engines.base import Engine
    from evalkit.run.execute import RunResult
    from evalkit.run.plan import BenchRun, RunPlan
    from evalkit.scalars import Sink
    from evalkit.scale.fleet import Fleet

log = logging.getLogger(__name__)

SCHEMA = 1
MANIFEST = "watch.json"
CURVE = "curve.jsonl"
CURVE_PAGE = "curve.html"
BASE_STEP = 0

_STEP = re.compile(r"^(?:checkpoint|global_step|step|iter)[-_]?(\d+)$", re.IGNORECASE)
_VERL_MODEL = ("actor", "huggingface")
# config.json keys that differ between saves of one architecture
_VOLATILE = frozenset(
    {"_name_or_path", "transformers_version", "torch_dtype", "dtype", "_commit_hash"}
)
# run settings that change how fast a watch goes, never its records: another value on
# restart goes on with the same watch
_SPEED_ONLY = frozenset(
    {"replicas", "ray_address", "cpus_per_replica", "replica_restarts", "ray_connect_timeout_s"}
)
_TOKENIZER_FILES = (
    "tokenizer.json",
    "vocab.json",
    "merges.txt",
    "tokenizer.model",
    "special_tokens_map.json",
    "added_tokens.json",
    "chat_template.jinja",
    "chat_template.json",
)


class WatchConfig(BaseModel):
    """What ``evalkit watch`` follows and how (the run settings are a RunConfig beside it)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    ckpt_dir: str
    """The training run's output folder, where checkpoint folders appear."""
    model_base: str | None = None
    """The model the training started from: the engine starts on it and it is evaluated as
    step 0 (default: the engine starts on the first checkpoint; no step 0)."""
    watch_dir: str | None = None
    """Where the runs, watch.json and the curve go (default: RUNS_DIR/watch-<CKPT_DIR's
    name>, so the same command again continues the same watch)."""
    settle_s: float = Field(default=10.0, ge=0, allow_inf_nan=False)
    """Seconds a checkpoint's whole files must stay unchanged before it is read."""
    poll_s: float = Field(default=2.0, gt=0, allow_inf_nan=False)
    """Seconds between looks at the checkpoint folder."""
    latest_only: bool = False
    """When several checkpoints wait, evaluate only the newest (the others are recorded as
    skipped); default: every checkpoint, in step order."""
    once: bool = False
    """Evaluate the checkpoints complete now, then exit (a finished training run)."""
    exit_when_idle_s: float | None = Field(default=None, gt=0, allow_inf_nan=False)
    """Exit after this many seconds without a new checkpoint (default: watch until stopped)."""
    loggers: list[Literal["tensorboard", "wandb"]] = Field(default_factory=list)
    """Where each checkpoint's headlines go besides curve.jsonl: tensorboard (under the watch
    directory), wandb (project evalkit-watch; WANDB_MODE=offline writes it locally)."""


@dataclass(frozen=True)
class Checkpoint:
    """One checkpoint of the training run: its step, folder name and model folder."""

    step: int
    name: str
    path: Path

    @property
    def run(self) -> str:
        """Its run directory's name in the watch directory."""
        return f"step-{self.step}"


def candidates(root: Path) -> list[Checkpoint]:
    """The checkpoint folders in ``root`` by name, in step order (hidden and temporary
    names, which a trainer renames into place when done, are not checkpoints yet; two
    folders of one step: the first by name)."""
    found: dict[int, Checkpoint] = {}
    try:
        children = sorted(root.iterdir())
    except FileNotFoundError:
        return []
    for child in children:
        m = _STEP.match(child.name)
        if m is None or not child.is_dir():
            continue
        model = child.joinpath(*_VERL_MODEL)
        path = model if model.is_dir() else child
        found.setdefault(int(m.group(1)), Checkpoint(int(m.group(1)), child.name, path))
    return [found[s] for s in sorted(found)]


def not_whole(model: Path) -> str | None:
    """Why checkpoint folder ``model`` is not whole yet (None: it is): config.json missing
    or cut, a weight file its index names missing, a safetensors file shorter (or longer)
    than its header says."""
    try:
        json.loads((model / "config.json").read_text(encoding="utf-8"))
    except FileNotFoundError:
        return "no config.json yet"
    except (ValueError, OSError):
        return "config.json is not whole yet"
    index = model / "model.safetensors.index.json"
    if index.exists():
        try:
            names = set(json.loads(index.read_text(encoding="utf-8"))["weight_map"].values())
        except (ValueError, KeyError, TypeError, OSError):
            return f"{index.name} is not whole yet"
        files = [model / n for n in sorted(names)]
        missing = [f.name for f in files if not f.is_file()]
        if missing:
            return f"{len(missing)} of {len(files)} weight files not written yet"
    else:
        files = sorted(model.glob("*.safetensors"))
        if not files:
            return "no weights (*.safetensors) yet"
    for f in files:
        why = _short(f)
        if why:
            return why
    return None


def _short(path: Path) -> str | None:
    """Why a safetensors file is not as long as its header says (None: it is)."""
    try:
        size = path.stat().st_size
        with open(path, "rb") as f:
            head = f.read(8)
            if len(head) < 8:
                return f"{path.name} has no header yet"
            (length,) = struct.unpack("<Q", head)
            if 8 + length > size:
                return f"{path.name} is {size} bytes, its header alone {8 + length}"
            header = json.loads(f.read(length))
    except (OSError, ValueError) as exc:
        return f"{path.name} cannot be read yet ({type(exc).__name__})"
    ends = [int(v["data_offsets"][1]) for k, v in header.items() if k != "__metadata__"]
    want = 8 + length + max(ends, default=0)
    if size != want:
        return f"{path.name} is {size} of {want} bytes"
    return None


def signature(model: Path) -> tuple[tuple[str, int, int], ...]:
    """The folder's files as (name, size, mtime_ns): what must not change while it settles."""
    out = []
    for f in sorted(model.iterdir()):
        with contextlib.suppress(OSError):
            st = f.stat()
            if f.is_file():
                out.append((f.name, st.st_size, st.st_mtime_ns))
    return tuple(out)


class Settling:
    """Which checkpoints are complete: whole, and unchanged for ``settle_s`` (their newest
    file that old, or the same files seen that long ago)."""

    def __init__(self, settle_s: float, clock: Callable[[], float] = time.time) -> None:
        self.settle_s = settle_s
        self.clock = clock
        self._seen: dict[Path, tuple[Any, float]] = {}

    def ready(self, ck: Checkpoint) -> str | None:
        """None when ``ck`` can be read now, else what it waits for."""
        why = not_whole(ck.path)
        if why is not None:
            self._seen.pop(ck.path, None)
            return why
        sig = signature(ck.path)
        now = self.clock()
        newest = max((mtime for _, _, mtime in sig), default=0) / 1e9
        first = self._seen.get(ck.path)
        if first is None or first[0] != sig:
            first = self._seen[ck.path] = (sig, now)
        still = max(now - newest, now - first[1])
        if still >= self.settle_s:
            return None
        return f"settling ({still:.0f} of {self.settle_s:g} s unchanged)"


def identity(model: Path) -> dict[str, str]:
    """What an engine cannot change in place: the architecture (config.json less the keys
    every save rewrites) and the tokenizer (its files; none: the engine's own)."""
    config = json.loads((model / "config.json").read_text(encoding="utf-8"))
    arch = {k: v for k, v in config.items() if k not in _VOLATILE}
    tok = hashlib.sha256()
    seen = False
    for name in _TOKENIZER_FILES:
        f = model / name
        if f.is_file():
            tok.update(name.encode() + b"\0" + f.read_bytes())
            seen = True
    template = model / "tokenizer_config.json"
    if template.is_file():
        with contextlib.suppress(ValueError):
            chat = json.loads(template.read_text(encoding="utf-8")).get("chat_template")
            if chat:
                tok.update(b"chat_template\0" + json.dumps(chat).encode())
                seen = True
    return {
        "architecture": hashlib.sha256(json.dumps(arch, sort_keys=True).encode()).hexdigest(),
        "tokenizer": tok.hexdigest() if seen else "",
        "_config": json.dumps(arch, sort_keys=True),
    }


def differs(running: dict[str, str], new: dict[str, str]) -> str | None:
    """What makes ``new`` unloadable into an engine holding ``running`` (None: nothing)."""
    if running["architecture"] != new["architecture"]:
        a, b = json.loads(running["_config"]), json.loads(new["_config"])
        keys = sorted(k for k in set(a) | set(b) if a.get(k) != b.get(k))
        return f"another architecture (config.json differs in {', '.join(keys[:4])})"
    if new["tokenizer"] and running["tokenizer"] and running["tokenizer"] != new["tokenizer"]:
        return "another tokenizer"
    return None


# -- the watch directory ---------------------------------------------------------------


@dataclass
class Outcome:
    """What became of one checkpoint (``watch.json``)."""

    step: int
    name: str
    path: str
    status: Literal["done", "failed", "skipped"]
    run: str | None = None
    loaded: str = ""
    """How its weights reached the engine: ``in place``, ``engine started``, ``engine
    restarted (why)``."""
    reason: str = ""
    load_s: float = 0.0
    eval_s: float = 0.0
    weights: list[list[Any]] = field(default_factory=list)
    """Its files as read: [name, size, mtime_ns] each."""
    finished: float = 0.0


@dataclass
class Watch:
    """A watch directory: its settings, the checkpoints' outcomes and the curve."""

    path: Path
    config: WatchConfig
    run: RunConfig
    """The run settings every checkpoint is evaluated under (its model aside)."""
    outcomes: dict[int, Outcome] = field(default_factory=dict)
    curve: list[dict[str, Any]] = field(default_factory=list)

    @classmethod
    def open(cls, config: WatchConfig, run: RunConfig) -> Watch:
        """The watch directory of ``config``: a new one, or the one recorded there when its
        settings are these (a different watch there is refused in one line)."""
        path = Path(config.watch_dir or Path(run.runs_dir) / f"watch-{Path(config.ckpt_dir).name}")
        watch = cls(path, config, run)
        manifest = path / MANIFEST
        if not manifest.is_file():
            return watch
        doc = json.loads(manifest.read_text(encoding="utf-8"))
        recorded = {"ckpt_dir": doc.get("ckpt_dir"), "model_base": doc.get("model_base")}
        mine = {"ckpt_dir": _abs(config.ckpt_dir), "model_base": _abs(config.model_base)}
        theirs, ours = doc.get("run", {}), watch.run_settings()
        keys = (set(theirs) | set(ours)) - _SPEED_ONLY
        changed = [k for k in sorted(keys) if theirs.get(k) != ours.get(k)]
        changed += [k for k in recorded if recorded[k] != mine[k]]
        if changed:
            raise ConfigError(
                f"--watch-dir {path}: holds a watch of other settings (differs in: "
                f"{', '.join(changed[:5])}); give another --watch-dir, or the same settings"
            )
        for key, d in doc.get("checkpoints", {}).items():
            watch.outcomes[int(key)] = Outcome(**d)
        curve = path / CURVE
        if curve.is_file():
            watch.curve = [json.loads(x) for x in curve.read_text(encoding="utf-8").splitlines()]
        return watch

    def run_settings(self) -> dict[str, Any]:
        """The run settings as recorded (the model and where runs go are per checkpoint)."""
        skip = {"model", "resume", "run_id", "runs_dir", "force", "retry_failed"}
        return self.run.model_dump(mode="json", exclude=skip)

    def write(self) -> None:
        """``watch.json``, ``curve.jsonl`` (both replaced whole: a kill leaves the old one)."""
        self.path.mkdir(parents=True, exist_ok=True)
        doc = {
            "schema": SCHEMA,
            "ckpt_dir": _abs(self.config.ckpt_dir),
            "model_base": _abs(self.config.model_base),
            "watch": self.config.model_dump(mode="json"),
            "run": self.run_settings(),
            "checkpoints": {
                str(s): dataclasses.asdict(o) for s, o in sorted(self.outcomes.items())
            },
        }
        write_text_atomic(self.path / MANIFEST, json.dumps(doc, indent=1) + "\n")
        lines = "".join(json.dumps(row) + "\n" for row in self.curve)
        write_text_atomic(self.path / CURVE, lines)

    def settings_for(self, ck: Checkpoint) -> RunConfig:
        """The RunConfig of ``ck``'s run: these settings on its model, in its run directory
        (resumed where a killed watch left it)."""
        data = self.run.model_dump(exclude={"resume", "run_id", "runs_dir"})
        data["model"] = str(ck.path)
        run = self.path / ck.run
        if (run / "config.json").is_file():
            data["resume"] = str(run)
        else:
            data["runs_dir"], data["run_id"] = str(self.path), ck.run
        return RunConfig.model_validate(data)

    def add_curve(self, ck: Checkpoint, wall_s: float) -> list[dict[str, Any]]:
        """The curve's rows of ``ck``'s finished run (each benchmark's headline and interval),
        replacing any it had."""
        from evalkit.reports import load_run

        report = load_run(self.path / ck.run, bootstrap=200)
        rows = []
        for name, b in report.benchmarks.items():
            stderr = b.stderr
            low = high = None
            if b.overall is not None and stderr is not None:
                low, high = b.overall - 1.96 * stderr, b.overall + 1.96 * stderr
            rows.append(
                {
                    "step": ck.step,
                    "benchmark": name,
                    "headline": b.overall,
                    "stderr": stderr,
                    "ci95": [low, high] if low is not None else None,
                    "aggregation": b.aggregation,
                    "official": b.official,
                    "samples": b.counts.total,
                    "failed": b.counts.failed,
                    "wall_s": round(wall_s, 3),
                    "run": ck.run,
                    "checkpoint": ck.name,
                }
            )
        self.curve = [r for r in self.curve if r["step"] != ck.step] + rows
        self.curve.sort(key=lambda r: (r["step"], r["benchmark"]))
        return rows

    def best(self) -> dict[str, dict[str, Any]]:
        """Per benchmark, the curve's row with the highest headline (the earliest on a tie)."""
        out: dict[str, dict[str, Any]] = {}
        for row in self.curve:
            if row["headline"] is None:
                continue
            held = out.get(row["benchmark"])
            if held is None or row["headline"] > held["headline"]:
                out[row["benchmark"]] = row
        return out


def _abs(path: str | None) -> str | None:
    return str(Path(path).expanduser().resolve()) if path else None


# -- following the checkpoints ---------------------------------------------------------


Say = Callable[[str], None]


@dataclass
class Follower:
    """One warm engine following the checkpoints of a watch, one at a time."""

    watch: Watch
    say: Say = print
    scalars: Sink | None = None
    """Where headlines go besides the curve (``evalkit.scalars.Scalars``), or None."""
    engine: Engine | Fleet | None = None
    """The warm engine; on Ray (``--replicas``), the replicas' fleet."""
    running: dict[str, str] | None = None
    """The identity (architecture, tokenizer) of the weights the engine holds."""
    dirty: bool = False
    """A load failed halfway: the engine's weights are mixed, it must start again."""
    benches: list[BenchRun] | None = None
    settling: Settling = field(init=False)

    def __post_init__(self) -> None:
        self.settling = Settling(self.watch.config.settle_s)

    def pending(self) -> tuple[list[Checkpoint], list[tuple[Checkpoint, str]]]:
        """(checkpoints ready to evaluate, in step order; those still waiting, with why)."""
        cfg = self.watch.config
        ready, waiting = [], []
        found = candidates(Path(cfg.ckpt_dir))
        if cfg.model_base and BASE_STEP not in {c.step for c in found}:
            found.insert(0, Checkpoint(BASE_STEP, "base", Path(cfg.model_base)))
        for ck in found:
            if ck.step in self.watch.outcomes:
                continue
            if ck.name == "base":
                ready.append(ck)
                continue
            why = self.settling.ready(ck)
            if why is None:
                ready.append(ck)
            else:
                waiting.append((ck, why))
        return ready, waiting

    async def evaluate(self, ck: Checkpoint) -> Outcome:
        """Load ``ck`` into the engine (in place, or by starting it) and run the suite on it;
        the outcome is recorded in the watch directory before this returns."""
        t0 = time.perf_counter()
        weights = [list(x) for x in signature(ck.path) if x[0].endswith(".safetensors")]
        try:
            loaded = await self._load(ck)
        except Exception as exc:  # any load failure: recorded, the engine restarted next
            said = " ".join(str(exc).split())[:300] or type(exc).__name__
            outcome = Outcome(
                ck.step, ck.name, str(ck.path), "failed", reason=f"did not load: {said}"
            )
            outcome.weights, outcome.finished = weights, time.time()
            return self._record(outcome)
        load_s = time.perf_counter() - t0
        result = await self._run(ck)
        eval_s = time.perf_counter() - t0 - load_s
        outcome = Outcome(ck.step, ck.name, str(ck.path), "done", ck.run, loaded)
        outcome.load_s, outcome.eval_s = round(load_s, 3), round(eval_s, 3)
        outcome.weights, outcome.finished = weights, time.time()
        rows = self.watch.add_curve(ck, load_s + eval_s)
        if self.scalars is not None:
            self.scalars.log(ck.step, {f"eval/{r['benchmark']}": r["headline"] for r in rows})
        del result
        return self._record(outcome)

    def skip(self, ck: Checkpoint, why: str) -> None:
        """Record ``ck`` as skipped (``--latest-only``)."""
        self._record(Outcome(ck.step, ck.name, str(ck.path), "skipped", reason=why))

    def _record(self, outcome: Outcome) -> Outcome:
        from evalkit.reports.curve import write_page

        self.watch.outcomes[outcome.step] = outcome
        self.watch.write()
        if self.watch.curve:
            write_page(self.watch.path)  # the page follows the curve as it grows
        return outcome

    async def _load(self, ck: Checkpoint) -> str:
        """Bring ``ck``'s weights into the engine; how it was done."""
        from evalkit.engines import engine_spec
        from evalkit.engines.base import ReloadsWeights

        new = identity(ck.path)
        why = differs(self.running, new) if self.running is not None else None
        spec = engine_spec(self.watch.run.engine)
        warm = self.engine is not None and not self.dirty and why is None
        if warm and spec.reloads_weights and isinstance(self.engine, ReloadsWeights):
            assert self.engine is not None
            self.dirty = True  # until the load is through
            await self.engine.load_weights(str(ck.path))
            self.dirty, self.running = False, new
            return "in place"
        if self.engine is not None:
            reason = why or ("the last load failed" if self.dirty else "")
            if not reason and not spec.reloads_weights:
                reason = f"the {spec.name} engine cannot load weights in place"
            self.say(f"step {ck.step}: restarting the engine ({reason})")
            await self.close()
            if why is not None:
                self.benches = None  # another architecture may resize frames otherwise
            started = f"engine restarted ({reason})"
        else:
            started = "engine started"
        self.engine = await self._start(ck)
        self.running, self.dirty = new, False
        return started

    async def _start(self, ck: Checkpoint) -> Engine | Fleet:
        from evalkit.engines.lifecycle import in_daemon_thread
        from evalkit.run import execute
        from evalkit.run.open import run_path

        plan = self._plan(ck)
        if plan.config.on_ray:  # the replicas start once, each checkpoint handed to them
            from evalkit.scale.fleet import Fleet

            fleet = Fleet.open(plan.config)  # on this thread (see Fleet.open)
            try:
                await in_daemon_thread(fleet.start, plan, str(run_path(plan.config)))
            except BaseException:
                await fleet.close()
                raise
            return fleet
        return await in_daemon_thread(execute.make_engine, plan)

    def _plan(self, ck: Checkpoint) -> RunPlan:
        """``ck``'s run plan: the benchmarks resolved once (per architecture), its own
        manifest (its model, so its fingerprint is what `evalkit run` gives it)."""
        from evalkit.run.plan import model_family, plan_of, plan_run
        from evalkit.run.preflight import check_run

        cfg = self.watch.settings_for(ck)
        if self.benches is None:
            check_run(cfg)
            self.benches = plan_run(cfg).benches
        fresh = [dataclasses.replace(b, samples=list(b.samples)) for b in self.benches]
        return plan_of(cfg, fresh, family=model_family(cfg))

    async def _run(self, ck: Checkpoint) -> RunResult:
        from evalkit.engines.lifecycle import in_daemon_thread
        from evalkit.run.execute import aexecute
        from evalkit.scale.driver import run_plans
        from evalkit.scale.fleet import Fleet

        assert self.engine is not None
        if isinstance(self.engine, Fleet):  # its samples spread over the replicas
            fleet = self.engine
            (result,) = await in_daemon_thread(lambda: run_plans([self._plan(ck)], fleet=fleet))
            return result
        return await aexecute(self._plan(ck), engine=self.engine)

    async def close(self) -> None:
        """Close the engine (or the replicas), if one runs."""
        from evalkit.engines.lifecycle import close_engine
        from evalkit.scale.fleet import Fleet

        engine, self.engine = self.engine, None
        if isinstance(engine, Fleet):
            await engine.close()
        elif engine is not None:
            await close_engine(engine)


async def follow(follower: Follower, *, on_wait: Callable[[list[Any]], None] | None = None) -> int:
    """Evaluate the watch's checkpoints as they become complete, until ``once`` has nothing
    left, ``exit_when_idle_s`` passes without a new one, or the task is cancelled (SIGTERM,
    Ctrl-C: the sample in flight ends the run as it ends ``evalkit run``). Returns how many
    checkpoints were evaluated now."""
    cfg = follower.watch.config
    evaluated = 0
    idle_since = time.monotonic()
    try:
        while True:
            ready, waiting = follower.pending()
            if cfg.latest_only and len(ready) > 1:
                newest = ready[-1]
                for ck in ready[:-1]:
                    follower.skip(ck, f"--latest-only: step {newest.step} was ready too")
                follower.say(
                    f"--latest-only: skipped steps {', '.join(str(c.step) for c in ready[:-1])}"
                )
                ready = [newest]
            for ck in ready:
                queued = [c.step for c in ready if c.step > ck.step]
                if queued:  # checkpoints arrive faster than they are evaluated
                    follower.say(f"step {ck.step}: {len(queued)} more waiting (steps {queued})")
                outcome = await follower.evaluate(ck)
                evaluated += 1
                follower.say(describe(outcome, follower.watch))
                idle_since = time.monotonic()
            if ready:
                continue  # look again at once: more may have arrived meanwhile
            if cfg.once:
                return evaluated
            if on_wait is not None:
                on_wait(waiting)
            if cfg.exit_when_idle_s is not None and (
                time.monotonic() - idle_since >= cfg.exit_when_idle_s
            ):
                follower.say(f"no new checkpoint for {cfg.exit_when_idle_s:g} s: done")
                return evaluated
            await asyncio.sleep(cfg.poll_s)
    finally:
        await follower.close()


def describe(outcome: Outcome, watch: Watch) -> str:
    """One line about a checkpoint's outcome: its headlines and the best so far."""
    if outcome.status != "done":
        return f"step {outcome.step} ({outcome.name}): {outcome.status}: {outcome.reason}"
    best = watch.best()
    parts = []
    for row in watch.curve:
        if row["step"] != outcome.step:
            continue
        score = "unscored" if row["headline"] is None else f"{row['headline']:.2f}"
        if row["stderr"] is not None and row["headline"] is not None:
            score += f" ± {row['stderr']:.2f}"
        top = best.get(row["benchmark"])
        mark = " (best)" if top is not None and top["step"] == outcome.step else ""
        if top is not None and not mark:
            mark = f" (best: step {top['step']})"
        parts.append(f"{row['benchmark']} {score}{mark}")
    how = f"{outcome.loaded}, {outcome.load_s:.1f} s; evaluated in {outcome.eval_s:.1f} s"
    return f"step {outcome.step} ({outcome.name}; {how}): " + "; ".join(parts)
