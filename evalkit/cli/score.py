"""``evalkit score``: score predictions made elsewhere into an ordinary run directory.

    evalkit score --bench Video-MME --data-root /data --predictions preds.jsonl \\
        --model Qwen2.5-VL-7B-Instruct [--runs-dir runs --run-id X]

The predictions file holds one JSON object per line, ``{"id": ..., "prediction": "..."}``
(the benchmark's sample ids as evalkit loads them; an unknown id is an error that lists a
few, with examples of the benchmark's ids). Every sample is scored exactly as ``evalkit
run`` scores it (the benchmark's headline rule and every other rule of its task type) and
written by the pipeline's own record writer, so ``evalkit report``, ``evalkit repro`` and
the extraction-sensitivity table read the result like any run.

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
import json
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from evalkit.errors import ConfigError, DataError, not_utf8
from evalkit.sample import Sample

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
        help='JSONL file, one {"id": ..., "prediction": "..."} object per line',
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
    """The benchmarks' names, comma-separated (a ``--data`` file may make several)."""
    scored: int = 0
    kept: int = 0
    """Samples already scored in this run directory (left as they were)."""
    missing: list[str] = field(default_factory=list)
    """Benchmark samples the file gives no prediction for (recorded as failed)."""
    failed: list[str] = field(default_factory=list)
    """Samples whose scorer raised (recorded as failed at stage score: "scorer failed")."""
    benchmarks: list[str] = field(default_factory=list)
    """Each benchmark scored into the run."""


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
    from evalkit.outcome import all_failed
    from evalkit.rundir import RunDir

    why = all_failed(RunDir(result.path), result.benchmarks)
    if why is not None:  # nothing to report: said, and not a success
        print(f"evalkit score: {why}", file=sys.stderr)
        return 1
    return 0


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
    benches = _benchmarks(cfg)
    names = ", ".join(b.name for b in benches)
    texts = read_predictions(file)
    _check_ids(file, texts, names, [s.id for b in benches for s in b.samples])
    rundir = RunDir(Path(cfg.runs_dir) / (cfg.run_id or new_run_id("score")))
    with rundir.lock():  # one writer per run directory, as for evalkit run
        fingerprint = rundir.open(_manifest(cfg, benches, file), force=force)
        out = ScoreResult(rundir.path, names)
        for b in benches:
            out.benchmarks.append(b.name)
            rundir.write_problems(b.name, b.problems)  # invalid rows, as evalkit run keeps them
            _score_into(rundir, fingerprint, b, texts, file, out)
        return out


def _score_into(
    rundir: Any,
    fingerprint: str,
    bench_run: Any,
    texts: dict[str, str | None],
    file: Path,
    out: ScoreResult,
) -> None:
    """Append one record per sample not yet scored in ``rundir`` (the store's writer),
    counted in ``out``."""
    from evalkit.records import failed_record, ok_record, scorer_failure
    from evalkit.runner import make_scorer

    # the prompt plan tells which samples had the assistant's turn pre-filled
    scorer = make_scorer(bench_run.spec, prompt=bench_run.prompt)
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


def _benchmarks(cfg: Any) -> list[Any]:
    """The benchmarks' specs and samples, from the annotations only (no video is opened).

    A ``--data`` file goes through the runner's own reading of it (``data_bench_runs``):
    rows naming a known benchmark are scored and aggregated as ``evalkit run --data``
    does, under that benchmark's spec and official rule, the rest pooled.
    """
    from evalkit.bench.loader import load
    from evalkit.bench.registry import get_benchmark
    from evalkit.engines.base import SamplingParams
    from evalkit.runner import BenchRun, _bench_root, data_bench_runs

    if cfg.data:
        return data_bench_runs(cfg, None)
    spec = get_benchmark(cfg.bench[0])  # NAME:VARIANT; an unknown one: RegistryError
    samples = load(spec, _bench_root(cfg, spec), check_media=False)
    return [BenchRun(spec.name, spec, spec.frames, SamplingParams(), samples)]


def _manifest(cfg: Any, benches: list[Any], file: Path) -> Any:
    """The run's manifest (``RunManifest``), as ``evalkit run`` writes it, with the
    predictions file in place of the generation settings."""
    from evalkit.manifest import RunManifest
    from evalkit.runner import result_config

    rc = result_config(cfg, benches)
    # what the other harness used is unknown here: recorded as such, never as pinned values
    for b in benches:
        rc["benchmarks"][b.name].update(frames=None, max_tokens=None)
    rc["predictions"] = {"file": file.name, "sha256": _sha256(file)}
    extra = cfg.model_dump(mode="json")
    extra.update(command="score", predictions=str(file))
    specs = {b.name: b.spec for b in benches}
    data = {b.name: b.data_info for b in benches if b.data_info}
    return RunManifest.build(rc, extra, specs=specs, data_benchmarks=data)


def _completion(sample: Sample, text: str) -> Any:
    from evalkit.engines.base import Completion

    return Completion(request_id=sample.id, texts=[text])


def _sha256(file: Path) -> str:
    return hashlib.sha256(file.read_bytes()).hexdigest()[:16]


def read_predictions(file: Path) -> dict[str, str | None]:
    """Sample id -> prediction (None for ``null``); DataError names the file and line."""
    if not file.is_file():
        raise DataError(f"{file}: no such predictions file")
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DataError(f"{file}: {not_utf8(exc)}") from None
    out: dict[str, str | None] = {}
    where: dict[str, int] = {}
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise DataError(
                f"{file}:{lineno}: not valid JSON ({exc}); each line must be one object "
                '{"id": ..., "prediction": "..."}'
            ) from None
        sid, text = _row(file, lineno, row)
        if sid in where:
            raise DataError(f"{file}:{lineno}: id {sid!r} again (first on line {where[sid]})")
        where[sid] = lineno
        out[sid] = text
    return out


def _row(file: Path, lineno: int, row: Any) -> tuple[str, str | None]:
    if not isinstance(row, dict):
        raise DataError(f"{file}:{lineno}: a line must be a JSON object, got {type(row).__name__}")
    for key in ("id", "prediction"):
        if key not in row:
            raise DataError(f"{file}:{lineno}: field {key!r} is missing (have: {', '.join(row)})")
    sid, text = row["id"], row["prediction"]
    if not isinstance(sid, str | int) or isinstance(sid, bool):
        raise DataError(f"{file}:{lineno}: field 'id' must be a string or integer, got {sid!r}")
    if text is not None and not isinstance(text, str):
        raise DataError(
            f"{file}:{lineno}: field 'prediction' must be the model's reply as a string "
            f"(or null), got {type(text).__name__}"
        )
    return str(sid), text


def _check_ids(file: Path, texts: dict[str, str | None], bench: str, ids: list[str]) -> None:
    known = set(ids)
    unknown = [sid for sid in texts if sid not in known]
    if not unknown:
        return
    shown = ", ".join(map(repr, unknown[:_SHOW]))
    more = f" and {len(unknown) - _SHOW} more" if len(unknown) > _SHOW else ""
    examples = ", ".join(map(repr, ids[:3]))
    raise DataError(
        f"{file}: {len(unknown)} prediction id(s) are not samples of {bench}: {shown}{more}; "
        f"{bench}'s ids look like {examples} — write the ids evalkit loads for this benchmark"
    )


def _ids(ids: list[str]) -> str:
    """The first ids, quoted, and how many more there are."""
    more = f" and {len(ids) - _SHOW} more" if len(ids) > _SHOW else ""
    return ", ".join(map(repr, ids[:_SHOW])) + more
