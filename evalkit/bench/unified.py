"""The EasyVideoR1-style unified JSON/JSONL schema as an ad-hoc benchmark.

A row has ``problem``, ``problem_type``, ``options`` (``"A. ..."`` strings, sometimes
``"A: ..."``, sometimes listed out of letter order), ``solution`` (``<answer>X</answer>``,
or odd wrappers such as ``<think>{json}</think><[PLHD..]>`` on Charades-STA, or bare text
on caption rows), ``path``, ``data_type``, ``data_source``, ``problem_id`` and an optional
``image_path``. Every other field is kept in ``Sample.fields``.

Sample ids are ``<source>/<problem_id>`` where ``source`` is ``data_source`` when it is a
plain name, else the file's stem (some files leave ``data_source`` empty, others put a
video URL there). Two rows with the same id are an error naming both rows.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalkit.bench import parse
from evalkit.bench.spec import BenchmarkSpec
from evalkit.errors import DataError
from evalkit.sample import ImageRef, Sample, VideoRef

# problem_type values whose meaning is specific to these files and must win over the
# scorers' general aliases: OVO-Bench's forward-active tasks write their task code as the
# problem type: CRR (clues reveal) and SSR (sequential steps) are Yes/No questions and
# REC (repetition event count) is a count, not "referring expression comprehension".
OVERRIDES: dict[str, str] = {"crr": "boolean", "ssr": "boolean", "rec": "numerical"}


_CORE = {"problem", "options", "solution", "path", "data_type", "image_path"}


def canonical(problem_type: str) -> str:
    """Canonical task type of an EasyVideoR1 ``problem_type`` (KeyError if unknown)."""
    from evalkit.registry import RegistryError
    from evalkit.scoring import canonical_task_type

    key = str(problem_type).strip().lower()
    if key in OVERRIDES:
        return OVERRIDES[key]
    try:
        return canonical_task_type(problem_type)
    except RegistryError as exc:
        raise KeyError(str(exc)) from None


def read_rows(file: Path) -> list[tuple[str, Any]]:
    """(where, row) pairs of a ``.json`` list or a ``.jsonl`` file."""
    text = file.read_text(encoding="utf-8")
    if file.suffix == ".jsonl":
        out = []
        for n, line in enumerate(text.splitlines(), 1):
            if line.strip():
                try:
                    out.append((f"line {n}", json.loads(line)))
                except json.JSONDecodeError as exc:
                    raise DataError(f"{file}, line {n}: not valid JSON: {exc}") from None
        return out
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise DataError(f"{file}: not valid JSON: {exc}") from None
    if not isinstance(data, list):
        raise DataError(f"{file}: expected a JSON list of rows, got {type(data).__name__}")
    return [(f"item {i}", r) for i, r in enumerate(data)]


def _target(task: str, answer: str, n_options: int) -> Any:
    if task == "multiple_choice":
        return parse.parse_letter(answer, n_options)
    if task in ("numerical", "regression"):
        return parse.to_number(answer)
    if task == "boolean":
        low = answer.strip().lower()
        if low not in ("yes", "no", "true", "false"):
            raise ValueError(f"{answer!r} is not yes/no")
        return "Yes" if low in ("yes", "true") else "No"
    if task in ("temporal_grounding", "spatiotemporal_grounding", "spatial_grounding"):
        value = parse.maybe_json(answer)
        if isinstance(value, str):
            raise ValueError(f"grounding answer {answer[:60]!r} is not JSON")
        if task == "temporal_grounding" and isinstance(value, dict):
            value = value.get("time", value)  # Charades-STA: {"time": [s, e], "boxes": {}}
        return value
    return answer


def _source(row: dict[str, Any], file: Path) -> str:
    ds = row.get("data_source")
    if isinstance(ds, str) and ds.strip() and "://" not in ds and "/" not in ds:
        return ds.strip()
    return file.stem


def row_to_sample(row: dict[str, Any], file: Path, where: str, video_root: Path | None) -> Sample:
    """One unified row as a Sample; DataError names the file, row and field at fault."""

    def fail(field: str, msg: str) -> DataError:
        return DataError(f"{file}, {where}, field {field!r}: {msg}")

    for key in ("problem_id", "problem_type", "solution"):
        if row.get(key) is None:
            raise fail(key, "missing")
    try:
        task = canonical(row["problem_type"])
    except KeyError as exc:
        raise fail("problem_type", str(exc.args[0])) from None
    try:
        options = parse.parse_options(row.get("options"))
    except ValueError as exc:
        raise fail("options", str(exc)) from None
    try:
        target = _target(task, parse.unwrap_solution(row["solution"]), len(options))
    except ValueError as exc:
        raise fail("solution", str(exc)) from None
    if task == "multiple_choice" and not options:
        raise fail("options", "a multiple-choice row needs options")
    media: list[VideoRef | ImageRef] = []
    base = video_root if video_root is not None else file.parent
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
    fields = {k: v for k, v in row.items() if k not in _CORE}
    return Sample(
        id=f"{_source(row, file)}/{row['problem_id']}",
        task_type=task,
        question=str(row.get("problem") or ""),
        options=options,
        target=target,
        media=media,
        benchmark=file.stem,
        fields=fields,
    )


def _num(x: Any) -> float | None:
    return None if x in (None, "") else float(x)


def load_unified(file: str | Path, video_root: str | Path | None = None) -> list[Sample]:
    """Samples of one unified JSON/JSONL file; media paths are resolved under ``video_root``
    (default: the file's folder). DataError at the first bad row or duplicate id."""
    file = Path(file)
    root = Path(video_root) if video_root is not None else None
    samples: list[Sample] = []
    seen: dict[str, str] = {}
    for where, row in read_rows(file):
        if not isinstance(row, dict):
            raise DataError(f"{file}, {where}: a row must be a JSON object")
        sample = row_to_sample(row, file, where, root)
        if sample.id in seen:
            raise DataError(
                f"{file}, {where}: duplicate id {sample.id!r} (data_source + problem_id), "
                f"first at {seen[sample.id]}"
            )
        seen[sample.id] = where
        samples.append(sample)
    return samples


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
