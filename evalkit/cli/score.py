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
(``evalkit.predictions``: formats, matching, list and null replies, duplicated rows). A
row that stands for no sample is an error that lists a few, with examples of the
benchmark's ids (and says when they are rows the loader set aside as invalid).

Every sample is scored exactly as ``evalkit run`` scores it (the benchmark's headline
rule and every other rule of its task type) and written by the pipeline's own record
writer, so ``evalkit report``, ``evalkit repro`` and the extraction-sensitivity table read
the result like any run.

A benchmark sample with no line in the file (or ``"prediction": null``) is recorded as
FAILED at stage ``predictions`` ("no prediction"): the official aggregate then counts it
wrong, as a run counts a sample whose generation failed, so a partial file cannot publish
a number over the samples it chose; ``evalkit report --exclude-failed`` leaves them out.
Videos are not needed (only the annotations are read). The settings evalkit cannot know
(frames, generation cap) are recorded as unknown (null); the engine is ``external``.
Scoring again into the same run directory resumes it as ``evalkit run --resume
--retry-failed`` does: samples already scored there are kept (a results store never
rewrites a finished record), the others, those without a prediction before included, are
scored from the file. A file that changed since is refused unless ``--force``.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evalkit.errors import ConfigError, DataError
from evalkit.predictions import Matched, Matcher, PredictionRow, detect
from evalkit.sample import Sample

if TYPE_CHECKING:
    from evalkit.bench.files import Loaded
    from evalkit.engines.base import Completion, Engine
    from evalkit.manifest import RunManifest
    from evalkit.run.config import JudgeConfig, RunConfig
    from evalkit.run.plan import BenchRun
    from evalkit.rundir import RunDir
    from evalkit.scoring.run_scorer import RunScorer
    from evalkit.scoring.verdicts import Verdicts
    from evalkit.store import Store

ENGINE = "external"
_SHOW = 5  # ids listed in an error


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
    _check_matched(files, unmatched, benches, set_aside, list(matchers.values()))
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
        unmatched += match_all(fmt.read(file), matchers, matched, fmt.name)
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
            out.append(await _score_into(rundir, fingerprint, b, matched[b.name].texts, scorer))
    return out


async def _score_into(
    rundir: RunDir,
    fingerprint: str,
    bench_run: BenchRun,
    texts: dict[str, str | None],
    scorer: RunScorer,
) -> ScoreResult:
    """Append one record per sample not yet scored in ``rundir`` (the store's writer)."""
    from evalkit.records import failed_record

    out = ScoreResult(rundir.path, bench_run.name)
    with rundir.store(bench_run.name) as store:
        done = store.done_ids(include_failed=False)
        todo = [s for s in bench_run.samples if s.id not in done]
        out.kept = len(bench_run.samples) - len(todo)
        given = [s for s in todo if texts.get(s.id) is not None]
        for sample in todo:
            if texts.get(sample.id) is None:
                why = "no prediction" if sample.id not in texts else "prediction is null"
                error = f"{why} for this sample in the predictions"
                timings = {"scored": time.time()}
                store.append(
                    failed_record(
                        sample, "predictions", error, fingerprint=fingerprint, timings=timings
                    )
                )
                out.missing.append(sample.id)
        # judged samples wait on the judge together (its guard bounds how many at once)
        verdicts = await asyncio.gather(*(_verdicts(scorer, s, str(texts[s.id])) for s in given))
        for sample, v in zip(given, verdicts, strict=True):
            _append(store, out, sample, v, str(texts[sample.id]), fingerprint)
    return out


async def _verdicts(scorer: RunScorer, sample: Sample, text: str) -> Verdicts:
    completion = _completion(sample, text)
    return (
        await scorer.ascore(sample, completion)
        if scorer.awaits(sample)
        else scorer(sample, completion)
    )


def _append(
    store: Store, out: ScoreResult, sample: Sample, verdicts: Verdicts, text: str, fp: str
) -> None:
    """The sample's record: scored, or failed at stage score when its scorer raised."""
    from evalkit.records import failed_record, ok_record, scorer_failure

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
    out.scored += 1
    out.judged += verdicts.score.metadata.get("decided_by") == "judge"
    out.unscored += verdicts.score.value is None


def _benchmark(cfg: RunConfig, name: str | None = None) -> tuple[BenchRun, Loaded]:
    """The benchmark's spec and samples, from its annotations only (no video is opened),
    and what the loader found (the row fields of each id, the rows set aside)."""
    from evalkit.bench.loader import load
    from evalkit.bench.registry import get_benchmark
    from evalkit.engines.base import SamplingParams
    from evalkit.run.plan import BenchRun, bench_root, provenance

    spec = get_benchmark(name or cfg.bench[0])  # NAME:VARIANT; unknown: RegistryError
    root = bench_root(cfg, spec, media=False)
    samples = load(spec, root, check_media=False)
    # each variant its own store: a second format is never appended into the first's file
    stored = f"{spec.name}:{spec.variant}" if spec.variant else spec.name
    run = BenchRun(stored, spec, spec.frames, SamplingParams(), samples)
    run.data = provenance(spec, root)
    return run, samples


def _data_benchmarks(cfg: RunConfig) -> list[tuple[BenchRun, Loaded]]:
    """A ``--data`` file's benchmarks, read by the runner's own reading of it
    (``data_bench_runs``): rows naming a known benchmark are scored and aggregated as
    ``evalkit run --data`` does, under that benchmark's spec and official rule; the rest
    pooled. Their ids are evalkit's (no natural fields to match by)."""
    from evalkit.bench.files import Loaded
    from evalkit.run.plan import data_bench_runs

    return [(run, Loaded()) for run in data_bench_runs(cfg, None)]


def _manifest(
    cfg: RunConfig, benches: list[BenchRun], files: list[Path], rule: str | None
) -> RunManifest:
    """The run's manifest (``RunManifest``), as ``evalkit run`` writes it, with the
    predictions files in place of the generation settings."""
    from evalkit.manifest import RunManifest
    from evalkit.run.plan import result_config

    rc = result_config(cfg, benches)
    for bench in benches:
        # what the other harness used is unknown here: recorded as such, never as pinned values
        unknown = {"frames": None, "max_tokens": None}
        rc.benchmarks[bench.name] = rc.benchmarks[bench.name].model_copy(update=unknown)
    given = [{"file": f.name, "sha256": _sha256(f)} for f in files]
    rc.predictions = given[0] if len(given) == 1 else {"files": given}
    extra = cfg.model_dump(mode="json")
    extra.update(command="score", predictions=[str(f) for f in files])
    data = {b.name: b.data_info for b in benches if b.data_info}
    specs = {b.name: b.spec for b in benches}
    read = {b.name: b.data for b in benches if b.data is not None}
    return RunManifest.build(rc, extra, specs=specs, data_benchmarks=data, data=read)


def _completion(sample: Sample, text: str) -> Completion:
    from evalkit.engines.base import Completion

    return Completion(request_id=sample.id, texts=[text])


def _sha256(file: Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()[:16]


def _check_matched(
    files: list[Path],
    unknown: list[Any],
    benches: list[Any],
    set_aside: dict[str, str],
    matchers: list[Matcher],
) -> None:
    """Every row of the files must stand for a sample: else one error naming a few."""
    if not unknown:
        return
    where = ", ".join(map(str, files))
    names = ", ".join(b.name for b in benches)
    shown = ", ".join(_label(r) for r in unknown[:_SHOW])
    more = f" and {len(unknown) - _SHOW} more" if len(unknown) > _SHOW else ""
    examples = (
        ", ".join(repr(s.id) for b in benches for s in b.samples[:1]) if len(benches) > 1 else ""
    )
    examples = examples or ", ".join(repr(s.id) for s in benches[0].samples[:3])
    aside = [r for r in unknown if str(r.keys.get("id")) in set_aside]
    why = (
        f"; {len(aside)} of them are rows the loader set aside as invalid (first: "
        f"{set_aside[str(aside[0].keys['id'])]}; evalkit bench validate lists them)"
        if aside
        else ""
    )
    from evalkit.bench.loader import id_rule

    rule = f" (id = {id_rule(benches[0].spec)})" if len(benches) == 1 and benches[0].spec else ""
    if any(b.data_info is not None for b in benches):
        from evalkit.bench.unified import DATA_IDS

        rule += f" ({DATA_IDS})"
    raise DataError(
        f"{where}: {len(unknown)} prediction id(s) are not samples of {names}: "
        f"{shown}{more}{why}; rows are matched {matchers[0].describe()}; {names}'s ids look "
        f"like {examples}{rule}; evalkit bench ids NAME --data-root DIR lists them with their "
        "fields"
    )


def _label(row: PredictionRow) -> str:
    """A row as an error shows it: its id, else its key fields, shortened."""
    if row.keys.get("id") is not None:
        return repr(str(row.keys["id"]))
    text = ", ".join(f"{k}={v!r}" for k, v in list(row.keys.items())[:3])
    return f"{row.where} ({text[:80]})"


def _ids(ids: list[str]) -> str:
    """The first ids, quoted, and how many more there are."""
    more = f" and {len(ids) - _SHOW} more" if len(ids) > _SHOW else ""
    return ", ".join(map(repr, ids[:_SHOW])) + more
