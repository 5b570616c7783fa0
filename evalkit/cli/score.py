"""``evalkit score``: score predictions made elsewhere into an ordinary run directory.

    evalkit score --bench Video-MME --data-root /data --predictions preds.jsonl \\
        --model Qwen2.5-VL-7B-Instruct [--runs-dir runs --run-id X]

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
import hashlib
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

from evalkit.errors import ConfigError, DataError
from evalkit.predictions import Matched, Matcher, detect
from evalkit.sample import Sample

if TYPE_CHECKING:
    from evalkit.bench.files import Loaded

ENGINE = "external"
_SHOW = 5  # ids listed in an error


def add_arguments(p: argparse.ArgumentParser) -> None:
    """The benchmark, where its annotations are, the predictions, and the run directory."""
    p.add_argument("--bench", help="benchmark name or alias (NAME or NAME:VARIANT)")
    p.add_argument("--data-root", help="folder holding the benchmark's official layout")
    p.add_argument("--data", help="a unified JSON/JSONL file scored as an ad-hoc benchmark")
    p.add_argument("--video-root", help="folder of the ad-hoc file's relative media paths")
    p.add_argument(
        "--predictions",
        required=True,
        help='JSONL file, one {"id": ..., "prediction": "..."} object per line, an '
        "lmms-eval --log_samples JSONL, or a VLMEvalKit prediction .xlsx/.tsv (detected)",
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


def run(args: argparse.Namespace) -> int:
    """Score the file, then say where the run is and how to report it."""
    result = score_predictions(
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
    )
    if result.matched is not None:
        print(_matched_line(result.matched))
    print(f"{result.benchmark}: {result.scored} sample(s) scored into {result.path}")
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
    print(f"report: evalkit report {result.path}")
    return 0


def _matched_line(m: Matched) -> str:
    """``12 row(s) read (lmms-eval format): 10 matched by id, 2 by natural fields ...``."""
    line = f"{m.rows} row(s) read ({m.format} format): {m.by_id} matched by id"
    if m.by_fields:
        line += f", {m.by_fields} by the benchmark's natural fields"
    if m.duplicated:
        line += (
            f", {len(m.duplicated)} duplicated (ignored: a sample keeps its first row; first "
            f"at {m.duplicated[0]})"
        )
    return line


def score_predictions(
    predictions: str | Path,
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
) -> ScoreResult:
    """Score a predictions file for one benchmark into a run directory (see the module)."""
    from evalkit.rundir import RunDir, new_run_id
    from evalkit.runner import RunConfig

    if bool(bench) == bool(data):
        raise ConfigError("give exactly one of --bench NAME or --data FILE")
    file = Path(predictions)
    cfg = RunConfig(
        model=model or file.stem,
        bench=[bench] if bench else [],
        data=data,
        video_root=video_root,
        data_root=data_root,
        engine=ENGINE,
        variant=variant,
        runs_dir=runs_dir,
        run_id=run_id,
    )
    bench_run, loaded = _benchmark(cfg)
    matcher = Matcher([s.id for s in bench_run.samples], loaded.sources)
    fmt = detect(file)
    matched = matcher.match(fmt.read(file), fmt.name)
    _check_matched(file, matched, bench_run, loaded.set_aside, matcher)
    rundir = RunDir(Path(cfg.runs_dir) / (cfg.run_id or new_run_id("score")))
    with rundir.lock():  # one writer per run directory, as for evalkit run
        fingerprint = rundir.open(_manifest(cfg, bench_run, file), force=force)
        out = _score_into(rundir, fingerprint, bench_run, matched.texts, file)
    out.matched = matched
    return out


def _score_into(
    rundir: Any, fingerprint: str, bench_run: Any, texts: dict[str, str | None], file: Path
) -> ScoreResult:
    """Append one record per sample not yet scored in ``rundir`` (the store's writer)."""
    from evalkit.records import failed_record, ok_record, scorer_failure
    from evalkit.runner import make_scorer

    # the prompt plan tells which samples had the assistant's turn pre-filled
    scorer = make_scorer(bench_run.spec, prompt=bench_run.prompt)
    out = ScoreResult(rundir.path, bench_run.name)
    with rundir.store(bench_run.name) as store:
        done = store.done_ids(include_failed=False)
        for sample in bench_run.samples:
            if sample.id in done:
                out.kept += 1
                continue
            text = texts.get(sample.id)
            timings = {"scored": time.time()}
            if text is None:
                why = "no prediction" if sample.id not in texts else "prediction is null"
                error = f"{why} for this sample in {file}"
                store.append(
                    failed_record(
                        sample, "predictions", error, fingerprint=fingerprint, timings=timings
                    )
                )
                out.missing.append(sample.id)
                continue
            verdicts = scorer(sample, _completion(sample, text))
            if (failure := scorer_failure(verdicts)) is not None:  # a bug: "scorer failed"
                record = failed_record(
                    sample,
                    "score",
                    failure.error,
                    fingerprint=fingerprint,
                    timings=timings,
                    prediction=text,
                    traceback=failure.traceback,
                )
                store.append(record)
                out.failed.append(sample.id)
                continue
            store.append(
                ok_record(sample, verdicts, [text], fingerprint=fingerprint, timings=timings)
            )
            out.scored += 1
    return out


def _benchmark(cfg: Any) -> tuple[Any, Loaded]:
    """The benchmark's spec and samples, from its annotations only (no video is opened),
    and what the loader found (the row fields of each id, the rows set aside)."""
    from evalkit.bench.files import Loaded
    from evalkit.bench.loader import load
    from evalkit.bench.registry import get_benchmark
    from evalkit.engines.base import SamplingParams
    from evalkit.runner import BenchRun, _bench_root

    if cfg.data:
        from evalkit.bench.unified import load_unified, unified_spec
        from evalkit.bench.unified_known import DataBench

        spec = unified_spec(cfg.data, cfg.video_root)
        samples = load_unified(cfg.data, cfg.video_root)
        # recorded as a --data benchmark of no known source: reports give its pooled mean,
        # labelled as such, not the generated spec's mean as if it were official
        db = DataBench(spec.name, spec, list(samples), note=_POOLED)
        run = BenchRun(spec.name, spec, spec.frames, SamplingParams(), db.samples)
        run.data_info = db.info(Path(cfg.data))
        return run, Loaded()
    spec = get_benchmark(cfg.bench[0])  # NAME:VARIANT; an unknown one: RegistryError
    samples = load(spec, _bench_root(cfg, spec), check_media=False)
    return BenchRun(spec.name, spec, spec.frames, SamplingParams(), samples), samples


_POOLED = "evalkit score --data: every row pooled (ad-hoc data, no official rule)"


def _manifest(cfg: Any, bench: Any, file: Path) -> Any:
    """The run's manifest (``RunManifest``), as ``evalkit run`` writes it, with the
    predictions file in place of the generation settings."""
    from evalkit.manifest import RunManifest
    from evalkit.runner import result_config

    rc = result_config(cfg, [bench])
    # what the other harness used is unknown here: recorded as such, never as pinned values
    rc["benchmarks"][bench.name].update(frames=None, max_tokens=None)
    rc["predictions"] = {"file": file.name, "sha256": _sha256(file)}
    extra = cfg.model_dump(mode="json")
    extra.update(command="score", predictions=str(file))
    data = {bench.name: bench.data_info} if bench.data_info else {}
    return RunManifest.build(rc, extra, specs={bench.name: bench.spec}, data_benchmarks=data)


def _completion(sample: Sample, text: str) -> Any:
    from evalkit.engines.base import Completion

    return Completion(request_id=sample.id, texts=[text])


def _sha256(file: Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()[:16]


def _check_matched(
    file: Path, matched: Matched, bench: Any, set_aside: dict[str, str], matcher: Matcher
) -> None:
    """Every row of the file must stand for a sample: else one error naming a few."""
    unknown = matched.unmatched
    if not unknown:
        return
    shown = ", ".join(_label(r) for r in unknown[:_SHOW])
    more = f" and {len(unknown) - _SHOW} more" if len(unknown) > _SHOW else ""
    ids = [s.id for s in bench.samples]
    examples = ", ".join(map(repr, ids[:3]))
    aside = [r for r in unknown if str(r.keys.get("id")) in set_aside]
    why = (
        f"; {len(aside)} of them are rows the loader set aside as invalid (first: "
        f"{set_aside[str(aside[0].keys['id'])]}; evalkit bench validate lists them)"
        if aside
        else ""
    )
    raise DataError(
        f"{file}: {len(unknown)} prediction id(s) are not samples of {bench.name}: "
        f"{shown}{more}{why}; rows are matched {matcher.describe()}; {bench.name}'s ids look "
        f"like {examples} (evalkit bench ids {bench.spec.name} lists them with their fields)"
    )


def _label(row: Any) -> str:
    """A row as an error shows it: its id, else its key fields, shortened."""
    if row.keys.get("id") is not None:
        return repr(str(row.keys["id"]))
    text = ", ".join(f"{k}={v!r}" for k, v in list(row.keys.items())[:3])
    return f"{row.where} ({text[:80]})"


def _ids(ids: list[str]) -> str:
    """The first ids, quoted, and how many more there are."""
    more = f" and {len(ids) - _SHOW} more" if len(ids) > _SHOW else ""
    return ", ".join(map(repr, ids[:_SHOW])) + more
