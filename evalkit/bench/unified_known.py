"""Unified-schema rows that name a known benchmark run under that benchmark's spec.

``evalkit run --data FILE`` used to pool every file into one mean. Here each row is
matched to a shipped spec (``evalkit.bench.registry``) by its ``data_source`` when that
is a known name or alias, else by the file's name (``mlvu-dev.json`` -> MLVU,
``videommmu_with_image.json`` -> Video-MMMU: the longest known prefix, a recognised
variant suffix such as ``mlvu-test`` applied). Matched rows keep the benchmark's task
types, judge, frames, prompt, headline rule and official aggregate; the fields that
aggregate needs are mapped from the unified row's names (:data:`FIELDS`). Judged task
types are routed to the judge (without one they are "not scored", never ROUGE'd).

A file mixing several known sources is SPLIT into one benchmark of the run per source
(and per variant: VideoMathQA's multi-binary rows become ``VideoMathQA:mbin``), each
aggregated by its own rule; rows of unknown sources stay together under the file's name
with today's pooled mean. When the rows lack a field the official aggregate needs (MLVU
rows carry no task, MVBench rows an empty one) the benchmark is aggregated as a pooled
mean and labelled so: never an official-looking number computed on missing groups.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit import tasks
from evalkit.bench.files import Loaded, Problems, RowError
from evalkit.bench.spec import AggregationSpec, BenchmarkSpec
from evalkit.bench.unified import Refine, load_unified, unified_spec
from evalkit.errors import DataError, Problem
from evalkit.registry import RegistryError, normalize_name
from evalkit.sample import Sample

if TYPE_CHECKING:
    from evalkit.bench.media import MissingMedia

# Spec field -> unified row fields tried in order (the spec's own field name is tried
# first). From EasyVideoR1's eval/data/valid_data files: VSI-Bench keeps the question
# type as original_question_type, OVO-Bench its task and category as ovo_task /
# ovo_category, LiveSports-3K as q_type_livesports / ocr_livesports, VideoMathQA groups
# by problem_id; MLVU / MVBench rows carry no task (MVBench's original_question_type is "").
FIELDS: dict[str, dict[str, tuple[str, ...]]] = {
    "vsibench": {"question_type": ("original_question_type",)},
    "mlvu": {"task": ("question_type", "task_type", "original_question_type")},
    "mvbench": {"task": ("task_type", "original_question_type")},
    "ovobench": {"task": ("ovo_task",), "category": ("ovo_category",)},
    "videomathqa": {"question_id": ("problem_id",)},
    "livesports3kqa": {"question_type": ("q_type_livesports",), "ocr": ("ocr_livesports",)},
    "videomme": {"task": ("task_type",), "video_id": ("videoID",)},
    "motionbench": {"category": ("original_question_type",)},
}


def _path_part(index: int) -> Callable[[dict[str, Any]], Any]:
    def get(row: dict[str, Any]) -> Any:
        parts = [p for p in str(row.get("path") or "").split("/") if p not in ("", ".")]
        return parts[index] if len(parts) > abs(index) else None

    return get


# Breakdown fields the unified rows only carry inside the video path:
# VSI-Bench's ./<dataset>/<scene>.mp4, MMVU's ./videos/<Subject>/<n>.mp4.
DERIVED: dict[str, dict[str, Callable[[dict[str, Any]], Any]]] = {
    "vsibench": {"source_dataset": _path_part(0)},
    "mmvu": {"subject": _path_part(-2)},
}


@dataclass(frozen=True)
class Part:
    """Rows that are parts of one question: the field telling them apart, and the variant
    of the spec that aggregates them (the question id stays in ``group_field``)."""

    field: str
    variant: str


# VideoMathQA's multi-binary rows share problem_id with their multiple-choice question
# and carry mbinary_id; the mbin variant groups them by question_id (lmms-eval
# tasks/videomathqa/utils.py, videomathqa_multi_binary_aggregate_results).
PARTS: dict[str, Part] = {"videomathqa": Part("mbinary_id", "mbin")}


@dataclass
class Tally:
    """What the choice of aggregation needs of a benchmark's samples, counted one at a
    time: how many, how many lack each field the official rule reads, which breakdown
    fields any of them has."""

    needed: list[str]
    breakdowns: list[str]
    valid: int = 0
    lacking: dict[str, int] = field(default_factory=dict)
    present: set[str] = field(default_factory=set)

    @classmethod
    def of(cls, spec: BenchmarkSpec) -> Tally:
        """An empty tally for the fields ``spec``'s aggregation reads."""
        return cls(required_fields(spec), list(spec.aggregation.breakdowns))

    def add(self, sample: Sample) -> None:
        """Count one more sample."""
        self.valid += 1
        for f in self.needed:
            if sample.fields.get(f) in (None, ""):
                self.lacking[f] = self.lacking.get(f, 0) + 1
        self.present.update(b for b in self.breakdowns if sample.fields.get(b) is not None)


@dataclass
class DataBench:
    """One benchmark of a run made from (some of) the rows of a ``--data`` file."""

    name: str
    """Name in the run (``VSI-Bench (vsibench.json)``; the file's stem for unknown rows)."""
    spec: BenchmarkSpec
    samples: list[Sample] = field(default_factory=list)
    """Its samples (empty when ``load_data`` counted them instead: ``samples=False``)."""
    problems: Problems = field(default_factory=Problems)
    benchmark: str | None = None
    """The registry benchmark (``NAME[:VARIANT]``) the rows named, None = unknown source."""
    official: bool = False
    """Aggregated by the benchmark's official rule (False: pooled mean)."""
    note: str = ""
    """How the rows were matched and aggregated, for the report."""
    tally: Tally = field(default_factory=lambda: Tally([], []))
    media: MissingMedia | None = None
    """Its samples' media check, made as they were read (``samples=False``)."""
    keys: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    """Sample id -> the field sets that name it in its benchmark's official layout
    (``key_sets``: Video-MME's question_id, or video + question), as the row holds them:
    predictions made elsewhere are matched by them as against the official layout."""

    def info(self, file: Path) -> dict[str, Any]:
        """What the run directory records about this benchmark (``extra.data_benchmarks``)."""
        return {
            "file": str(file),
            "benchmark": self.benchmark,
            "official": self.official,
            "note": self.note,
            "valid": self.tally.valid,
            "invalid": self.problems.counts["error"],
        }


@dataclass
class DataFile:
    """A ``--data`` file as loaded: every row's fate, and the benchmarks it makes."""

    loaded: Loaded
    benches: list[DataBench]


Key = tuple[str, str | None]  # (registry name, variant); ("", None) = unknown source


def match_benchmark(name: str) -> Key | None:
    """The registry benchmark and variant a ``data_source`` or file stem names, or None."""
    from evalkit.bench.registry import registry

    reg = registry()
    name = name.strip()
    if not name or "://" in name or "/" in name:
        return None
    if name in reg:  # a name, or an alias that may stand for a variant (mlvu_test)
        return reg.resolve(name)
    parts = [p for p in re.split(r"[-_\s]+", name) if p]
    for k in range(len(parts) - 1, 0, -1):
        head = "-".join(parts[:k])
        if head in reg:
            bench, implied = reg.resolve(head)
            base = reg.get(bench)
            tail = "_".join(parts[k:])
            return base.name, tail if tail in base.variants else implied
    return None


def _row_key(row: Any, file_key: Key) -> Key:
    if not isinstance(row, dict):
        return file_key
    ds = row.get("data_source")
    key = match_benchmark(ds) if isinstance(ds, str) else None
    if key is None or key[0] == file_key[0]:
        key = file_key  # the file's name may add the variant (mlvu-test.json: MLVU:test)
    part = PARTS.get(normalize_name(key[0]))
    if part is not None and row.get(part.field) not in (None, ""):
        key = (key[0], part.variant)
    return key


def route_task(spec: BenchmarkSpec, task: str) -> str:
    """The task type a row of ``spec`` is scored as: the spec's scorer override
    (MMVU, VCR-Bench: open-ended -> llm_judge), or the judge where the spec judges every
    free-form answer (VideoReasonBench), else the row's own type."""
    if task in spec.scorers:
        return tasks.canonical(spec.scorers[task])
    if task == "open_ended" and task not in spec.task_types and "llm_judge" in spec.task_types:
        return "llm_judge"
    return task


def _refiner(spec: BenchmarkSpec, label: str) -> Callable[[dict[str, Any], Sample, str], Sample]:
    key = spec.key
    names = {**{n: () for n in spec.mapping.fields}, **FIELDS.get(key, {})}
    derived = DERIVED.get(key, {})
    part = PARTS.get(key)

    def refine(row: dict[str, Any], sample: Sample, where: str) -> Sample:
        fields = dict(sample.fields)
        for name, alts in names.items():
            if fields.get(name) in (None, ""):
                value = next((row[a] for a in alts if row.get(a) not in (None, "")), None)
                if value is not None:
                    fields[name] = value
        for name, get in derived.items():
            if fields.get(name) in (None, ""):
                fields[name] = get(row)
        sid = sample.id
        if part is not None and row.get(part.field) not in (None, ""):
            sid = f"{sid}/{part.variant}{row[part.field]}"
        try:
            task = route_task(spec, sample.task_type)
        except RegistryError as exc:  # a scorer name the spec routes to is not registered
            raise RowError("problem_type", f"{spec.name}: {exc}") from None
        return sample.model_copy(
            update={"id": sid, "task_type": task, "fields": fields, "benchmark": label}
        )

    return refine


def natural_keys(spec: BenchmarkSpec, row: dict[str, Any]) -> list[dict[str, Any]]:
    """The field sets that name ``row``'s sample in ``spec``'s official layout
    (``loader.key_sets``), read from the unified row: it keeps the release's own fields
    (EasyVideoR1's Video-MME rows: question_id, videoID, question), or holds one under a
    name :data:`FIELDS` maps. A set missing a field is left out."""
    from evalkit.bench.loader import key_sets

    alternatives = FIELDS.get(spec.key, {})
    out = []
    for wanted in key_sets(spec):
        values = {}
        for name, column in wanted.items():
            names = (column, *alternatives.get(column, ()))
            value = next((row[n] for n in names if row.get(n) not in (None, "")), None)
            if value is None:
                break
            values[name] = value
        else:
            out.append(values)
    return out


def required_fields(spec: BenchmarkSpec) -> list[str]:
    """Sample fields the official aggregation reads (its ``*field`` parameters)."""
    params = spec.aggregation.params
    return [str(v) for k, v in params.items() if k.endswith("field") and isinstance(v, str)]


def _decide(spec: BenchmarkSpec, tally: Tally) -> tuple[BenchmarkSpec, bool, str]:
    agg = spec.aggregation
    lacking = {f: n for f in tally.needed if (n := tally.lacking.get(f, 0))}
    if not lacking:
        absent = [b for b in agg.breakdowns if b not in tally.present]
        gone = f" (breakdowns the rows lack: {', '.join(absent)})" if absent else ""
        return spec, True, f"rows named {spec.name}: aggregated by its official {agg.name}{gone}"
    what = ", ".join(f"{f!r} ({n} of {tally.valid} rows lack it)" for f, n in lacking.items())
    pooled = AggregationSpec(
        name="mean",
        breakdowns=list(agg.breakdowns),
        source=f"none: pooled mean; {spec.name}'s {agg.name} needs {what}",
    )
    note = (
        f"rows named {spec.name}, but its official {agg.name} needs field {what}: "
        "pooled mean, NOT the official number (add the field to the rows)"
    )
    return spec.model_copy(update={"aggregation": pooled}), False, note


def load_data(
    file: str | Path,
    video_root: str | Path | None = None,
    *,
    keep: int | None = None,
    samples: bool = True,
) -> DataFile:
    """A ``--data`` file as one benchmark per known source (+ one for unknown rows).

    One pass over the rows, one at a time: each row's benchmark is looked up as it is
    read. ``keep``: problems kept per benchmark and in all (each one counted; None: all,
    as a run records them). ``samples=False`` (``bench validate``): each valid sample is
    counted and its media checked as it is read, then dropped, so memory does not grow
    with the rows (but for the ids, kept to find repeats, and the media paths seen)."""
    from evalkit.bench.media import MissingMedia
    from evalkit.bench.registry import registry

    file = Path(file)
    file_key: Key = match_benchmark(file.stem) or ("", None)
    media_root = str(video_root) if video_root is not None else str(file.parent)
    benches: dict[Key, DataBench] = {}
    refiners: dict[Key, Refine] = {}

    def key_of(row: Any) -> Key:
        """The row's benchmark, its DataBench made the first time a row names it."""
        key = _row_key(row, file_key)
        if key not in benches:
            spec = registry().get(key[0]).with_variant(key[1]) if key[0] else None
            if spec is not None:
                refiners[key] = _refiner(spec, _label(key))
            b = benches[key] = _bench(file, video_root, key, spec, Problems(keep=keep))
            if not samples:
                b.media = MissingMedia(b.name, media_root, keep=keep)
        return key

    def refine(row: dict[str, Any], sample: Sample, where: str) -> Sample:
        fn = refiners.get(key_of(row))
        return fn(row, sample, where) if fn else sample

    def on_sample(row: dict[str, Any], sample: Sample) -> None:
        b = benches[key_of(row)]
        b.tally.add(sample)
        if b.media is not None:
            b.media.add(sample)
            return
        b.samples.append(sample)
        if b.benchmark is not None:
            b.keys[sample.id] = natural_keys(b.spec, row)

    def on_problem(row: Any, problem: Problem) -> None:
        benches[key_of(row)].problems.append(problem)

    loaded = load_unified(
        file,
        video_root,
        refine=refine,
        on_problem=on_problem,
        on_sample=on_sample,
        hold=samples,
        keep=keep,
    )
    ordered = [benches[k] for k in sorted(benches, key=lambda k: (k[0], k[1] or ""))]
    return DataFile(loaded, _finish(ordered))


def _label(key: Key) -> str:
    return f"{key[0]}:{key[1]}" if key[1] else key[0]


UNKNOWN_ROWS_NOTE = "rows of no known benchmark: pooled mean (ad-hoc data, no official rule)"


def _bench(
    file: Path,
    video_root: str | Path | None,
    key: Key,
    spec: BenchmarkSpec | None,
    problems: Problems,
) -> DataBench:
    if spec is None:
        return DataBench(
            name=file.stem,
            spec=unified_spec(file, video_root),
            problems=problems,
            note=UNKNOWN_ROWS_NOTE,
            tally=Tally([], []),  # its pooled mean needs no field
        )
    label = _label(key)
    return DataBench(
        name=f"{label} ({file.name})",
        spec=spec,
        problems=problems,
        benchmark=label,
        tally=Tally.of(spec),
    )


def _finish(benches: list[DataBench]) -> list[DataBench]:
    out: list[DataBench] = []
    orphans = Problems()
    for b in benches:
        if not b.tally.valid:
            orphans += b.problems  # rows of a benchmark none of whose rows loaded
            continue
        if b.benchmark is not None:
            b.spec, b.official, b.note = _decide(b.spec, b.tally)
        out.append(b)
    if out:
        out[0].problems += orphans
    return out


def data_benches(file: str | Path, video_root: str | Path | None = None) -> list[DataBench]:
    """The benchmarks of a ``--data`` file; DataError when not one row loads."""
    data = load_data(file, video_root)
    if not data.benches:
        shown = "\n".join(f"  {p}" for p in data.loaded.invalid[:5])
        raise DataError(f"{file}: not one row could be loaded:\n{shown}")
    return data.benches
