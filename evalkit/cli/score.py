"""``evalkit score``: score predictions made elsewhere into an ordinary run directory.

    evalkit score --bench Video-MME --data-root /data --predictions preds.jsonl \\
        --model Qwen2.5-VL-7B-Instruct [--runs-dir runs --run-id X]
    evalkit score --bench TempCompass:all --data-root /data --predictions mc.jsonl yn.jsonl \\
        cm.jsonl cap.jsonl --judge-model M [--rule official+judge]

Several benchmarks or variants (``NAME:all``: those its cross-variant headline combines)
go into one run, one results store per variant, so a report gives each format and the
combined headline; a run directory made for other benchmarks is refused (another
configuration) unless ``--force``, and never gets a variant appended into another's file.
``--rule official+judge`` asks the authors' judge for the replies the official rule cannot
decide, where the benchmark's code does so (``evalkit.scoring.judge_fallback``).

The predictions file holds one JSON object per line, ``{"id": ..., "prediction": "..."}``
(the benchmark's sample ids as evalkit loads them, or the benchmark's natural fields in
place of ``id``: ``evalkit bench ids NAME`` lists both), or is an lmms-eval
``--log_samples`` file or a VLMEvalKit prediction sheet (xlsx/tsv), detected from the file
(``evalkit.predictions``: formats, matching, list and null replies, duplicated rows; read
as untrusted input by ``evalkit.foreign``: anything wrong is one line naming the file and
line, before any run directory exists). Rows of a ``--data`` file's known benchmark are
matched by that benchmark's own fields too (Video-MME's ``question_id``), as against its
official layout. Rows that stand for no sample are an error of at most three lines: how
many and two of them, how rows are matched, the fix (and whether the loader set them aside
as invalid).

Every sample is scored exactly as ``evalkit run`` scores it (the benchmark's headline
rule and every other rule of its task type) and written by the pipeline's own record
writer, so ``evalkit report``, ``evalkit repro`` and the extraction-sensitivity table read
the result like any run.

A benchmark sample with no line in the file (or ``"prediction": null``) is recorded as
FAILED at stage ``predictions`` ("no prediction"): the official aggregate then counts it
wrong, as a run counts a sample whose generation failed, so a partial file cannot publish
a number over the samples it chose; ``evalkit report --exclude-failed`` leaves them out.
Videos are not needed (only the annotations are read). The settings evalkit cannot know
(frames, generation settings) are recorded as unknown (null); the engine is ``external``;
the prompt variant is the spec's pin unless ``--variant`` names another (what the
predictions were made with, as ``evalkit run`` records it), its prompt marked
``PROMPT_NOT_USED``; ``benchmark_samples`` holds how many samples each benchmark has.

Records are written as verdicts come (one forked scoring child per core, at most four, a
bounded window of samples in flight, long replies read again from their file when scored),
so memory does not grow with the count and a kill loses only the samples in flight.
Scoring again into the same run directory resumes it as ``evalkit run --resume
--retry-failed`` does: samples already scored there are kept (a results store never
rewrites a finished record), the others, those without a prediction before included, are
scored from the file. A file that changed since is refused unless ``--force``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import os
import sys
import time
from collections.abc import AsyncIterator, Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evalkit.errors import ConfigError, DataError
from evalkit.foreign import open_regular
from evalkit.predictions import Matched, Matcher, PredictionRow, detect, read_rows
from evalkit.sample import Sample
from evalkit.terminal import progress_bar

if TYPE_CHECKING:
    from evalkit.bench.files import Loaded
    from evalkit.engines.base import Completion, Engine
    from evalkit.manifest import RunManifest
    from evalkit.run.config import JudgeConfig, RunConfig
    from evalkit.run.plan import BenchRun
    from evalkit.rundir import RunDir
    from evalkit.scoring.run_scorer import RunScorer
    from evalkit.scoring.types import Score
    from evalkit.scoring.verdicts import Verdicts
    from evalkit.store import Store

ENGINE = "external"
PLUGINS_CHECKED = True  # check_plugins names a plug-in skipped: evalkit.cli.main warns not
PROMPT_NOT_USED = "not used: predictions made elsewhere"
_SHOW = 5  # ids listed in a summary line


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The benchmark, where its annotations are, the predictions, and the run directory."""
    p.add_argument(
        "--bench",
        help="benchmark name or alias (NAME or NAME:VARIANT), several comma-separated, or "
        "NAME:all for every variant its cross-variant headline combines (TempCompass:all)",
    )
    p.add_argument(
        "--data-root",
        help="folder holding the benchmark's official layout (default: its annotations "
        "from the Hub, fetched into EVALKIT_DATA on first use)",
    )
    p.add_argument(
        "--no-fetch",
        action="store_true",
        help="never fetch from the Hub: annotations not here already are an error",
    )
    p.add_argument("--data", help="a unified JSON/JSONL file scored as an ad-hoc benchmark")
    p.add_argument("--video-root", help="folder of the ad-hoc file's relative media paths")
    p.add_argument(
        "--predictions",
        required=True,
        nargs="+",
        help='JSONL file(s), one {"id": ..., "prediction": "..."} object per line, '
        "lmms-eval --log_samples JSONL, or VLMEvalKit prediction .xlsx/.tsv (detected); "
        "several files are read as one",
    )
    p.add_argument(
        "--rule",
        choices=["official", "official+judge", "evalkit"],
        help="headline rule (default: each spec's): official+judge is the official rule with "
        "the authors' LLM judge for the replies it cannot decide (needs --judge-model)",
    )
    p.add_argument(
        "--model",
        help="name of the model that made the predictions (matched against reference "
        "scores by evalkit repro; default: the predictions file's name)",
    )
    p.add_argument(
        "--variant",
        choices=["official", "plain", "thinking"],
        default=None,
        help="prompt variant the predictions were made with (recorded; default: each "
        "benchmark's pinned one, as evalkit run; under an official prompt that pre-fills "
        "the answer, the predictions are the model's continuation)",
    )
    p.add_argument("--runs-dir", default="runs", help="where run directories go (default runs/)")
    p.add_argument("--run-id", help="run directory name (default: a new time-stamped id)")
    p.add_argument(
        "--force", action="store_true", help="rescore into a run made under other settings"
    )
    from evalkit.cli.run import add_judge_arguments

    add_judge_arguments(p.add_argument_group("judge (judged samples, --rule official+judge)"))


@dataclass
class ScoreResult:
    """Where the scored run lives and how many samples it holds, by outcome."""

    path: Path
    benchmark: str
    scored: int = 0
    kept: int = 0
    """Samples already scored in this run directory (left as they were)."""
    missing: list[str] = field(default_factory=list)
    """Benchmark samples the file gives no prediction for (recorded as failed)."""
    failed: list[str] = field(default_factory=list)
    """Samples whose scorer raised (recorded as failed at stage score: "scorer failed")."""
    matched: Matched | None = None
    """How the file's rows were read and matched to samples."""
    judged: int = 0
    """Samples a ``+judge`` rule sent to the judge (its rule could not decide them)."""
    unscored: int = 0
    """Scored samples without a value (a judged sample and no judge, among others)."""


def run(args: argparse.Namespace) -> int:
    """Score the files, then say where the run is and how to report it."""
    judge = None
    from evalkit.cli.run import judge_from_args

    given = judge_from_args(args)
    if given is not None:
        from evalkit.run.config import JudgeConfig

        judge = JudgeConfig.model_validate(given)
    results = score_predictions(
        args.predictions,
        bench=args.bench,
        data=args.data,
        data_root=args.data_root,
        video_root=args.video_root,
        model=args.model,
        variant=args.variant,
        runs_dir=args.runs_dir,
        run_id=args.run_id,
        force=args.force,
        rule=args.rule,
        judge=judge,
        no_fetch=args.no_fetch,
    )
    for result in results:
        _print_result(result)
    print(f"report: evalkit report {results[0].path}")
    from evalkit.outcome import all_failed
    from evalkit.rundir import RunDir

    why = all_failed(RunDir(results[0].path), [r.benchmark for r in results])
    if why is not None:  # nothing to report: said, and not a success
        print(f"evalkit score: {why}", file=sys.stderr)
        return 1
    return 0


def _print_result(result: ScoreResult) -> None:
    if result.matched is not None:
        print(f"{result.benchmark}: {_matched_line(result.matched)}")
    print(f"{result.benchmark}: {result.scored} sample(s) scored into {result.path}")
    if result.judged:
        print(f"{result.judged} sample(s) decided by the judge (the rule could not decide them)")
    if result.unscored:
        print(
            f"{result.unscored} sample(s) not scored (no value: a judged sample without "
            "--judge-model, or a reply the official aggregate leaves out); never counted as 0"
        )
    if result.kept:
        print(f"{result.kept} sample(s) were already scored in this run and are kept as they were")
    if result.missing:
        print(
            f"{len(result.missing)} sample(s) have no prediction ({_ids(result.missing)}): "
            "recorded as failed, counted wrong by the official aggregate (report "
            "--exclude-failed leaves them out)"
        )
    if result.failed:
        print(
            f"scorer failed on {len(result.failed)} sample(s) ({_ids(result.failed)}): a bug in "
            "the scorer, recorded with its traceback and left out of the aggregate"
        )


def _matched_line(m: Matched) -> str:
    """``12 row(s) read (lmms-eval format): 10 matched by id, 2 by natural fields ...``."""
    line = f"{m.rows} row(s) read ({m.format} format): {m.by_id} matched by id"
    if m.by_fields:
        line += f", {m.by_fields} by the benchmark's own fields (evalkit bench ids lists them)"
    if m.duplicated:
        line += (
            f", {len(m.duplicated)} duplicated (ignored: a sample keeps its first row; first "
            f"at {m.duplicated[0]})"
        )
    return line


def score_predictions(
    predictions: str | Path | list[str] | list[Path],
    *,
    bench: str | None = None,
    data: str | None = None,
    data_root: str | None = None,
    video_root: str | None = None,
    model: str | None = None,
    variant: Literal["official", "plain", "thinking"] | None = None,
    runs_dir: str = "runs",
    run_id: str | None = None,
    force: bool = False,
    rule: Literal["official", "official+judge", "evalkit"] | None = None,
    judge: JudgeConfig | None = None,
    judge_engine: Engine | None = None,
    no_fetch: bool = False,
) -> list[ScoreResult]:
    """Score predictions files for one or more benchmarks (variants) into one run
    directory, one results store per benchmark variant (see the module)."""
    from evalkit.run.config import JUDGE_RULE_NEEDS_A_JUDGE, RunConfig
    from evalkit.rundir import RunDir, new_run_id

    if bool(bench) == bool(data):
        raise ConfigError("give exactly one of --bench NAME or --data FILE")
    from evalkit.run.preflight import check_plugins

    check_plugins()  # a plug-in that does not load is said before any run directory exists
    if data:
        from evalkit.run.preflight import data_file

        data_file(data)
    if rule == "official+judge" and judge is None:
        raise ConfigError(JUDGE_RULE_NEEDS_A_JUDGE)
    files = [
        Path(f) for f in ([predictions] if isinstance(predictions, str | Path) else predictions)
    ]
    cfg = RunConfig(
        model=model or files[0].stem,
        bench=bench_names(bench) if bench else [],
        data=data,
        video_root=video_root,
        data_root=data_root,
        engine=ENGINE,
        variant=variant,
        runs_dir=runs_dir,
        run_id=run_id,
        judge=judge,
        rule=rule,
        fetch=not no_fetch,
    )
    loaded = [_benchmark(cfg, name) for name in cfg.bench] if bench else _data_benchmarks(cfg)
    benches = [b for b, _ in loaded]
    _check_rule(rule, cfg, benches)
    matchers = {b.name: Matcher([s.id for s in b.samples], got.keys) for b, got in loaded}
    matched, unmatched = _read(files, matchers)
    set_aside = {k: v for _, got in loaded for k, v in got.set_aside.items()}
    read = sum(m.rows for m in matched.values()) + len(unmatched)
    _check_matched(files, unmatched, benches, set_aside, list(matchers.values()), read)
    rundir = RunDir(Path(cfg.runs_dir) / (cfg.run_id or new_run_id("score")))
    with rundir.lock():  # one writer per run directory, as for evalkit run
        fingerprint = rundir.open(_manifest(cfg, benches, files, rule), force=force)
        scoring = _score_benches(cfg, rundir, fingerprint, benches, matched, rule, judge_engine)
        results = asyncio.run(scoring)
    for result in results:
        result.matched = matched[result.benchmark]
    return results


def bench_names(bench: str) -> list[str]:
    """``--bench`` as benchmark names: comma-separated, ``NAME:all`` expanded to the
    variants its cross-variant headline combines (every variant where it declares none)."""
    from evalkit.bench.registry import get_benchmark

    out: list[str] = []
    for name in (n.strip() for n in bench.split(",") if n.strip()):
        base, _, variant = name.rpartition(":")
        if variant != "all" or not base:
            out.append(name)
            continue
        spec = get_benchmark(base)
        cross = spec.aggregation.across_variants
        variants = cross.variants if cross else ["base", *sorted(spec.variants)]
        out += [base if v == "base" else f"{base}:{v}" for v in variants]
    return list(dict.fromkeys(out))


def _check_rule(rule: str | None, cfg: RunConfig, benches: list[BenchRun]) -> None:
    """``official+judge`` needs a judge and a benchmark whose official code asks one."""
    if rule != "official+judge":
        return
    names = ", ".join(b.name for b in benches)
    from evalkit import tasks

    judged = [
        b.name
        for b in benches
        if any(
            b.spec.headline_rule(tasks.canonical(t), rule).endswith("+judge")
            for t in b.spec.task_types
        )
    ]
    if not judged:
        raise ConfigError(
            f"--rule official+judge: the official scoring of {names} asks no LLM judge "
            "(evalkit bench show NAME lists its rules); use --rule official"
        )


def _read(files: list[Path], matchers: dict[str, Matcher]) -> tuple[dict[str, Matched], list[Any]]:
    """Every file's rows, each given to the first benchmark that has its sample."""
    from evalkit.predictions import match_all

    matched = {name: Matched("") for name in matchers}
    unmatched: list[Any] = []
    for file in files:
        fmt = detect(file)
        unmatched += match_all(read_rows(file, fmt), matchers, matched, fmt.name)
    return matched, unmatched


async def _score_benches(
    cfg: RunConfig,
    rundir: RunDir,
    fingerprint: str,
    benches: list[BenchRun],
    matched: dict[str, Matched],
    rule: str | None,
    judge_engine: Engine | None,
) -> list[ScoreResult]:
    """Each benchmark's records, its judged samples awaited on this loop's judge."""
    from evalkit.run.components import judge_for, make_scorer

    out = []
    async with judge_for(cfg, judge_engine, rundir.judge_cache_path) as judge:
        for b in benches:
            rundir.write_problems(b.name, b.problems)  # invalid rows, as evalkit run keeps them
            # the prompt plan tells which samples had the assistant's turn pre-filled
            scorer = make_scorer(b.spec, judge, b.prompt, rule)
            limits = _Limits(cfg.pipeline.score_budget_s, cfg.judge.concurrency if cfg.judge else 0)
            out.append(await _score_into(rundir, fingerprint, b, matched[b.name], scorer, limits))
    return out


@dataclass(frozen=True)
class _Limits:
    """How samples are scored: each one's time budget (``pipeline.score_budget_s``; 0: in
    this process, unbounded) and how many may await the judge at once."""

    budget_s: float
    judged: int


async def _score_into(
    rundir: RunDir,
    fingerprint: str,
    bench_run: BenchRun,
    matched: Matched,
    scorer: RunScorer,
    limits: _Limits,
) -> ScoreResult:
    """Append one record per sample not yet scored in ``rundir`` (the store's writer), each
    as soon as its verdict comes: a kill loses only the samples in flight, and scoring
    again resumes after the ones written."""
    from evalkit.records import failed_record

    out = ScoreResult(rundir.path, bench_run.name)
    with rundir.store(bench_run.name) as store:
        done = store.done_ids(include_failed=False)
        todo = [s for s in bench_run.samples if s.id not in done]
        out.kept = len(bench_run.samples) - len(todo)
        with progress_bar(f"score {bench_run.name}", len(todo), sys.stderr.isatty()) as advance:
            for sample in todo:
                if matched.given(sample.id):
                    continue
                why = "no prediction" if sample.id not in matched.texts else "prediction is null"
                error = f"{why} for this sample in the predictions"
                timings = {"scored": time.time()}
                store.append(
                    failed_record(
                        sample, "predictions", error, fingerprint=fingerprint, timings=timings
                    )
                )
                out.missing.append(sample.id)
                advance(sample.id)
            given = [s for s in todo if matched.given(s.id)]
            async for sample, text, verdicts in _verdicts(scorer, given, matched, limits):
                _append(store, out, sample, verdicts, text, fingerprint)
                advance(sample.id)
    return out


def _workers() -> int:
    """Scoring processes: one per core this process may use, at most four."""
    cores = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count()
    return max(1, min(4, cores or 1))


async def _verdicts(
    scorer: RunScorer, samples: list[Sample], matched: Matched, limits: _Limits
) -> AsyncIterator[tuple[Sample, str, Score | Verdicts]]:
    """Each sample's reply and verdicts, as they come. Extraction runs in ``_workers()``
    forked scoring children (``BoundedScorer``: ``budget_s`` per sample), samples that
    await the judge on this loop (its guard bounds them); at most twice as many samples
    as there are children (or as the judge takes at once) are in flight, so memory does
    not grow with the count."""
    from evalkit.scoring.bounded import BoundedScorer

    bounded = limits.budget_s > 0 and BoundedScorer.available()
    slots: asyncio.Queue[Callable[[Sample, Completion], Score | Verdicts]] = asyncio.Queue()
    n = _workers() if bounded else 0
    children = [BoundedScorer(scorer, limits.budget_s) for _ in range(n)]
    for child in children:
        child.start()  # forked now, before the threads that call them exist
        slots.put_nowait(child)
    if not children:
        slots.put_nowait(scorer)

    async def one(sample: Sample) -> tuple[Sample, str, Score | Verdicts]:
        text = str(matched.reply(sample.id))  # a long reply is read again only now
        completion = _completion(sample, text)
        if scorer.awaits(sample):
            return sample, text, await scorer.ascore(sample, completion)
        slot = await slots.get()
        try:
            return sample, text, await asyncio.to_thread(slot, sample, completion)
        finally:
            slots.put_nowait(slot)

    window = max(2 * max(1, len(children)), limits.judged)
    pending: set[asyncio.Task[tuple[Sample, str, Score | Verdicts]]] = set()
    try:
        for sample in samples:
            if len(pending) >= window:
                finished, pending = await asyncio.wait(pending, return_when="FIRST_COMPLETED")
                for task in finished:
                    yield task.result()
            pending.add(asyncio.create_task(one(sample)))
        while pending:
            finished, pending = await asyncio.wait(pending, return_when="FIRST_COMPLETED")
            for task in finished:
                yield task.result()
    finally:
        for task in pending:
            task.cancel()
        for child in children:
            child.close()


def _append(
    store: Store, out: ScoreResult, sample: Sample, verdicts: Score | Verdicts, text: str, fp: str
) -> None:
    """The sample's record: scored, or failed at stage score when its scorer raised."""
    from evalkit.records import failed_record, ok_record, scorer_failure
    from evalkit.scoring.verdicts import Verdicts

    timings = {"scored": time.time()}
    if (failure := scorer_failure(verdicts)) is not None:  # a bug: "scorer failed"
        store.append(
            failed_record(
                sample,
                "score",
                failure.error,
                fingerprint=fp,
                timings=timings,
                prediction=text,
                traceback=failure.traceback,
            )
        )
        out.failed.append(sample.id)
        return
    store.append(ok_record(sample, verdicts, [text], fingerprint=fp, timings=timings))
    score = verdicts.score if isinstance(verdicts, Verdicts) else verdicts
    out.scored += 1
    out.judged += score.metadata.get("decided_by") == "judge"
    out.unscored += score.value is None


def _benchmark(cfg: RunConfig, name: str | None = None) -> tuple[BenchRun, Loaded]:
    """The benchmark's spec and samples, from its annotations only (no video is opened),
    and what the loader found (the row fields of each id, the rows set aside)."""
    from evalkit.bench.loader import load
    from evalkit.bench.registry import get_benchmark
    from evalkit.run.plan import bench_root, bench_run, provenance

    spec = get_benchmark(name or cfg.bench[0])  # NAME:VARIANT; unknown: RegistryError
    root = bench_root(cfg, spec, media=False)
    samples = load(spec, root, check_media=False)
    # as evalkit run plans it: the variant pinned or asked (its pre-filled answer start
    # reaches the rules), the samples the data holds, NAME:VARIANT its own store
    run = bench_run(cfg, spec, samples, None)
    run.data = provenance(spec, root)
    return run, samples


def _data_benchmarks(cfg: RunConfig) -> list[tuple[BenchRun, Loaded]]:
    """A ``--data`` file's benchmarks, read by the runner's own reading of it
    (``data_bench_pairs``): rows naming a known benchmark are scored and aggregated as
    ``evalkit run --data`` does, under that benchmark's spec and official rule, and are
    matched by its own fields as in its official layout (``DataBench.keys``); the rest
    pooled, matched by evalkit's ids."""
    from evalkit.bench.files import Loaded
    from evalkit.run.plan import data_bench_pairs

    out = []
    for run, db in data_bench_pairs(cfg, None):
        found = Loaded()
        found.keys = db.keys
        out.append((run, found))
    return out


def _manifest(
    cfg: RunConfig, benches: list[BenchRun], files: list[Path], rule: str | None
) -> RunManifest:
    """The run's manifest (``RunManifest``), as ``evalkit run`` writes it, with the
    predictions files in place of the generation settings."""
    from evalkit.manifest import RunManifest
    from evalkit.run.plan import result_config

    rc = result_config(cfg, benches)
    # what the other harness used is unknown here: recorded as such, never as pinned
    # values; the variant stays (the spec's pin or --variant: what they were made with)
    unknown = dict.fromkeys(("frames", "max_tokens", "temperature", "top_p", "top_k"))
    for bench in benches:
        entry = rc.benchmarks[bench.name].model_copy(update={**unknown, "prompt": PROMPT_NOT_USED})
        rc.benchmarks[bench.name] = entry
    given = [{"file": f.name, "sha256": _sha256(f)} for f in files]
    rc.predictions = given[0] if len(given) == 1 else {"files": given}
    extra = cfg.model_dump(mode="json")
    extra.update(command="score", predictions=[str(f) for f in files])
    return RunManifest.build(
        rc,
        extra,
        specs={b.name: b.spec for b in benches},
        data_benchmarks={b.name: b.data_info for b in benches if b.data_info},
        benchmark_samples={b.name: b.available for b in benches if b.available is not None},
        data={b.name: b.data for b in benches if b.data is not None},
    )


def _completion(sample: Sample, text: str) -> Completion:
    from evalkit.engines.base import Completion

    return Completion(request_id=sample.id, texts=[text])


def _sha256(file: Path) -> str:
    digest = hashlib.sha256()
    with open_regular(file) as f:
        while block := f.read(1 << 20):  # a block at a time: the file may be gigabytes
            digest.update(block)
    return digest.hexdigest()[:16]


def _check_matched(
    files: list[Path],
    unknown: list[PredictionRow],
    benches: list[BenchRun],
    set_aside: dict[str, str],
    matchers: list[Matcher],
    read: int,
) -> None:
    """Every row of the files must stand for a sample: else one error of at most three
    terminal lines: how many (of ``read`` rows) and two of them, how rows are matched
    (with a real id), and the fix."""
    if not unknown:
        return
    where = ", ".join(map(str, files))
    names = ", ".join(b.name for b in benches)
    more = f" and {len(unknown) - 2} more" if len(unknown) > 2 else ""
    shown = ", ".join(_label(r) for r in unknown[:2]) + more
    aside = [r for r in unknown if str(r.keys.get("id")) in set_aside]
    if aside:
        first = _short(set_aside[str(aside[0].keys["id"])], 70)
        shown += f" ({len(aside)} of them are rows the loader set aside as invalid: {first})"
    ids = ", ".join(_short(repr(b.samples[0].id), 40) for b in benches if b.samples)
    if any(b.data_info is not None for b in benches):
        fix = "ids are <source>/<problem_id> (source: data_source, else the file's name)"
    else:
        fix = "`evalkit bench ids NAME --data-root DIR` lists each id with its fields"
    raise DataError(
        f"{where}: {len(unknown)} of {read} rows name no sample of {names}: {shown}\n"
        f"matched by 'id' (like {ids}){matchers[0].describe()}\nfix: {fix}"
    )


def _label(row: PredictionRow) -> str:
    """A row as an error shows it: its id, else its first key fields, shortened."""
    if row.keys.get("id") is not None:
        return _short(repr(str(row.keys["id"])), 40)
    return _short(", ".join(f"{k}={v!r}" for k, v in list(row.keys.items())[:2]), 50)


def _short(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _ids(ids: list[str]) -> str:
    """The first ids, quoted, and how many more there are."""
    more = f" and {len(ids) - _SHOW} more" if len(ids) > _SHOW else ""
    return ", ".join(map(repr, ids[:_SHOW])) + more
