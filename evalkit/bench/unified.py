"""The EasyVideoR1-style unified JSON/JSONL schema as an ad-hoc benchmark.

A row has ``problem``, ``problem_type``, ``options`` (``"A. ..."`` strings, sometimes
``"A: ..."``, sometimes listed out of letter order), ``solution`` (``<answer>X</answer>``,
or odd wrappers such as ``<think>{json}</think><[PLHD..]>`` on Charades-STA, or bare text
on caption rows), ``path``, ``data_type``, ``data_source``, ``problem_id`` and an optional
``image_path``. Every other field is kept in ``Sample.fields``.

Sample ids are ``<source>/<problem_id>`` where ``source`` is ``data_source`` when it is a
plain name, else the file's stem (some files leave ``data_source`` empty, others put a
video URL there). A bad row fails that row only (a ``Problem`` with file, row, field and
reason; the rest loads). A repeated id is not an error: the repeat is loaded as
``<id>#2`` (``#3``, ... by order in the file) and reported as a warning (LiveSports-3K
QA reuses a few ids for different questions). Rows that name a known benchmark are
mapped onto its spec by :mod:`evalkit.bench.unified_known`.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from evalkit import tasks
from evalkit.bench import answers
from evalkit.bench.files import Loaded, RowError, iter_file_rows, unique_id
from evalkit.bench.spec import BenchmarkSpec
from evalkit.errors import DataError, Problem
from evalkit.registry import RegistryError
from evalkit.sample import ImageRef, Sample, VideoRef

DATA_IDS = (
    "a --data row's sample id is <source>/<problem_id>, source = its data_source when that "
    "is a plain name (no '/' or URL), else the file's name without extension (VideoMathQA "
    "multi-binary rows add /mbin<mbinary_id>; a repeated id loads as <id>#2, #3, ...)"
)
"""How the ids of a ``--data`` file's samples are formed, for the errors that name them."""

# problem_type values whose meaning is specific to these files and must win over the
# scorers' general aliases: OVO-Bench's forward-active tasks write their task code as the
# problem type: CRR (clues reveal) and SSR (sequential steps) are Yes/No questions and
# REC (repetition event count) is a count, not "referring expression comprehension".
OVERRIDES: dict[str, str] = {"crr": "boolean", "ssr": "boolean", "rec": "numerical"}


_CORE = {"problem", "options", "solution", "path", "data_type", "image_path"}


def canonical(problem_type: str) -> str:
    """Canonical task type of an EasyVideoR1 ``problem_type`` (KeyError if unknown)."""
    key = str(problem_type).strip().lower()
    if key in OVERRIDES:
        return OVERRIDES[key]
    try:
        return tasks.canonical(problem_type)
    except RegistryError as exc:
        raise KeyError(str(exc)) from None


def _source(row: dict[str, Any], file: Path) -> str:
    ds = row.get("data_source")
    if isinstance(ds, str) and ds.strip() and "://" not in ds and "/" not in ds:
        return ds.strip()
    return file.stem


def row_to_sample(row: dict[str, Any], file: Path, where: str, video_root: Path | None) -> Sample:
    """One unified row as a Sample; DataError names the file, row and field at fault."""
    try:
        return build_sample(row, file, where, video_root)
    except RowError as exc:
        field = f", field {exc.field!r}" if exc.field else ""
        raise DataError(f"{file}, {where}{field}: {exc.message}") from None


def build_sample(row: dict[str, Any], file: Path, where: str, video_root: Path | None) -> Sample:
    """One unified row as a Sample; RowError names the field at fault."""
    for key in ("problem_id", "problem_type", "solution"):
        if row.get(key) is None:
            raise RowError(key, "missing" + (f" ({DATA_IDS})" if key == "problem_id" else ""))
    try:
        task = canonical(row["problem_type"])
    except KeyError as exc:
        raise RowError("problem_type", str(exc.args[0])) from None
    try:
        options = answers.parse_options(row.get("options"))
    except ValueError as exc:
        raise RowError("options", str(exc)) from None
    try:
        target = tasks.get(task).parse_target(
            answers.unwrap_solution(row["solution"]), len(options)
        )
    except ValueError as exc:
        raise RowError("solution", str(exc)) from None
    if task == "multiple_choice" and not options:
        raise RowError("options", "a multiple-choice row needs options")
    try:
        media = _media(row, video_root if video_root is not None else file.parent)
    except (TypeError, ValueError) as exc:
        raise RowError("start", f"not a number of seconds: {exc}") from None
    return Sample(
        id=f"{_source(row, file)}/{row['problem_id']}",
        task_type=task,
        question=str(row.get("problem") or ""),
        options=options,
        target=target,
        media=media,
        benchmark=file.stem,
        fields={k: v for k, v in row.items() if k not in _CORE},
    )


def _media(row: dict[str, Any], base: Path) -> list[VideoRef | ImageRef]:
    media: list[VideoRef | ImageRef] = []
    if row.get("path"):
        kind = str(row.get("data_type") or "video")
        path = str(base / str(row["path"]))
        if kind == "image":
            media.append(ImageRef(path=path))
        else:
            start, end = row.get("start"), row.get("end")
            media.append(VideoRef(path=path, start=_num(start), end=_num(end)))
    if row.get("image_path"):
        media.append(ImageRef(path=str(base / str(row["image_path"]))))
    return media


def _num(x: Any) -> float | None:
    return None if x in (None, "") else float(x)


Refine = Callable[[dict[str, Any], Sample, str], Sample]
"""A hook ``(row, sample, where) -> sample`` run on each row's Sample before ids are
checked (maps a known benchmark's fields and task types); RowError makes the row invalid."""


OnProblem = Callable[[Any, Problem], None]
"""A hook ``(row, problem)`` told of each problem with the row it came from (the row is a
Problem itself for a line that is not JSON): ``load_data`` files it under its benchmark."""


def load_unified(
    file: str | Path,
    video_root: str | Path | None = None,
    *,
    refine: Refine | None = None,
    on_problem: OnProblem | None = None,
    on_sample: Callable[[dict[str, Any], Sample], None] | None = None,
    hold: bool = True,
    keep: int | None = None,
) -> Loaded:
    """Samples of one unified JSON/JSONL file, with the problems of its bad rows.

    Media paths are resolved under ``video_root`` (default: the file's folder). A bad row
    is left out and named in ``.problems`` (each counted, the first ``keep`` kept; None:
    all); a repeated id loads as ``<id>#2`` with a warning. Rows are read one at a time
    (a JSONL file line by line); ``on_sample(row, sample)``, when given, gets each valid
    sample as it is made; ``hold=False`` leaves them out of the list (``Loaded.streamed``
    counts them). DataError only when the file cannot be read at all.
    """
    file = Path(file)
    root = Path(video_root) if video_root is not None else None
    out = Loaded(keep=keep)
    seen: dict[str, str] = {}

    def problem(row: Any, p: Problem) -> None:
        out.problems.append(p)
        if on_problem is not None:
            on_problem(row, p)

    for where, row in iter_file_rows(file):
        out.rows += 1
        if isinstance(row, Problem):
            problem(row, row)
            continue
        if not isinstance(row, dict):
            problem(row, Problem(str(file), where, None, "a row must be a JSON object"))
            continue
        try:
            sample = build_sample(row, file, where, root)
            if refine is not None:
                sample = refine(row, sample, where)
        except RowError as exc:
            problem(row, Problem(str(file), where, exc.field, exc.message))
            continue
        sid, first = unique_id(seen, sample.id, where)
        if first is not None:
            problem(
                row,
                Problem(
                    str(file),
                    where,
                    "problem_id",
                    f"duplicate id {sample.id!r} (first at {first}): loaded as {sid!r}",
                    "warning",
                ),
            )
            sample = sample.model_copy(update={"id": sid})
        if on_sample is not None:
            on_sample(row, sample)
        if hold:
            out.append(sample)
        else:
            out.streamed += 1
    return out


def unified_spec(file: str | Path, video_root: str | Path | None = None) -> BenchmarkSpec:
    """A spec for an ad-hoc unified file (``evalkit run --data FILE --video-root DIR``).

    Samples come from :func:`load_unified`; the spec supplies the defaults around them:
    FrameSpec, prompt, generation, and a pooled mean with per-``data_source`` and
    per-``problem_type`` breakdowns (ad-hoc data has no official aggregate).
    """
    file = Path(file)
    return BenchmarkSpec.model_validate(
        {
            "name": file.stem,
            "citation": "ad-hoc data in the EasyVideoR1 unified schema",
            "data": {"local_path": str(video_root if video_root is not None else file.parent)},
            "layout": f"{file.name}: rows with problem, problem_type, options, solution, "
            "path, data_type, data_source, problem_id[, image_path]; media under the video root",
            "files": [{"path": file.name}],
            "mapping": {"id": {"template": "{data_source}/{problem_id}"}, "question": "problem"},
            "aggregation": {
                "name": "mean",
                "breakdowns": ["data_source", "problem_type"],
                "source": "none: pooled accuracy of an ad-hoc file (no official rule)",
            },
        }
    )
