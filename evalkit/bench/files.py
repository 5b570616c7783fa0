"""Reading annotation files into plain rows, with where each came from, and what was wrong."""

from __future__ import annotations

import csv
import glob
import json
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Literal

from evalkit.bench.layout import FileSpec
from evalkit.errors import DataError, Problem, not_utf8
from evalkit.sample import Sample


class RowError(Exception):
    """A row could not become a Sample: which field and why."""

    def __init__(self, field: str | None, message: str) -> None:
        self.field = field
        self.message = message
        super().__init__(message)


class Problems(list[Problem]):
    """Problems met while reading: every one counted by level, the first ``keep`` kept
    (None: all). ``bench validate`` keeps a few to print, so a file of a million bad
    rows costs a count, not a million Problems; a run keeps all (its run directory
    lists every invalid row)."""

    def __init__(self, problems: Iterable[Problem] = (), keep: int | None = None) -> None:
        super().__init__()
        self.keep = keep
        self.counts: dict[str, int] = {"error": 0, "warning": 0}
        self.extend(problems)

    def append(self, problem: Problem) -> None:
        self.counts[problem.level] += 1
        if self.keep is None or len(self) < self.keep:
            super().append(problem)

    def extend(self, problems: Iterable[Problem]) -> None:
        if not isinstance(problems, Problems):
            for p in problems:
                self.append(p)
            return
        for p in problems:  # its kept ones, then the counts of those it left out
            self.append(p)
        for level, n in problems.counts.items():
            self.counts[level] += n - sum(p.level == level for p in problems)

    def __iadd__(self, problems: Iterable[Problem]) -> Problems:  # type: ignore[override,misc]
        self.extend(problems)
        return self

    @property
    def total(self) -> int:
        """Problems met, kept or not."""
        return sum(self.counts.values())

    @property
    def left_out(self) -> int:
        """Problems counted but not kept."""
        return self.total - len(self)


class Loaded(list[Sample]):
    """The samples a loader produced, plus every problem met on the way.

    A list of the valid samples (so callers that only want samples use it as one), with
    ``problems`` (invalid rows, repaired rows), ``rows`` (rows read) and ``skipped``
    (rows an adapter leaves out on purpose, e.g. MMVU's open-ended ones in its mc subset).
    """

    def __init__(
        self,
        samples: list[Sample] | None = None,
        problems: list[Problem] | None = None,
        rows: int = 0,
        skipped: int = 0,
        keep: int | None = None,
    ) -> None:
        super().__init__(samples or [])
        self.problems = Problems(problems or [], keep)
        self.streamed = 0
        """Valid samples handed to a hook as they were read, not kept in the list."""
        self.rows = rows
        self.skipped = skipped
        self.sources: dict[str, dict[str, Any]] = {}
        """Sample id -> the row fields its id came from (``IdSpec.natural``)."""
        self.keys: dict[str, list[dict[str, Any]]] = {}
        """Sample id -> every field set that names it (``natural``, then ``IdSpec.also``)."""
        self.set_aside: dict[str, str] = {}
        """Id of an invalid row (where one could be built) -> why it was set aside."""

    @property
    def invalid(self) -> list[Problem]:
        """Rows (or files) that did not load."""
        return [p for p in self.problems if p.level == "error"]

    @property
    def warnings(self) -> list[Problem]:
        """Rows that loaded after a repair."""
        return [p for p in self.problems if p.level == "warning"]

    def summary(self) -> dict[str, Any]:
        """``rows``, ``valid``, ``invalid``, ``warnings``, ``skipped``, the ``reasons`` kept
        and how many were ``reasons_left_out`` (counted, not kept: ``keep``)."""
        return {
            "rows": self.rows,
            "valid": len(self) + self.streamed,
            "invalid": self.problems.counts["error"],
            "warnings": self.problems.counts["warning"],
            "skipped": self.skipped,
            "reasons": [p.to_dict() for p in self.problems],
            "reasons_left_out": self.problems.left_out,
        }


@dataclass(frozen=True)
class Row:
    """One row, the file it came from and its position written for people (``item 3``)."""

    file: str
    where: str
    data: dict[str, Any]


class FileError(DataError):
    """A file could not be read at all; ``problem`` says which and why (a spec's loader
    turns it into a Problem of its own, the unified readers let it propagate)."""

    def __init__(self, problem: Problem) -> None:
        self.problem = problem
        super().__init__(str(problem))


def plain(value: Any) -> Any:
    """numpy scalars/arrays (from parquet) as plain Python values."""
    if hasattr(value, "tolist") and not isinstance(value, str | bytes):
        return plain(value.tolist())
    if isinstance(value, list):
        return [plain(v) for v in value]
    if isinstance(value, dict):
        return {k: plain(v) for k, v in value.items()}
    return value


def _format(spec: FileSpec, path: Path) -> str:
    if spec.format:
        return spec.format
    suffix = path.suffix.lower().lstrip(".")
    if suffix in ("json", "jsonl", "parquet", "csv"):
        return suffix
    raise FileError(Problem(str(path), None, None, "unknown file format; set 'format' in the spec"))


def _records(obj: Any, key: str | None, path: Path) -> list[Any]:
    if key:
        for part in key.split("."):
            if not isinstance(obj, dict) or part not in obj:
                raise FileError(
                    Problem(str(path), None, key, f"no key {part!r} in the JSON object")
                )
            obj = obj[part]
    if not isinstance(obj, list):
        raise FileError(
            Problem(str(path), None, key, f"expected a JSON list of rows, got {type(obj).__name__}")
        )
    return obj


def _nested_rows(
    obj: Any, names: list[str], keys: dict[str, str], path: Path
) -> Iterator[tuple[str, Any]]:
    """Rows of ``{k1: {k2: [row, ...]}}`` with each key stored under its level's name."""
    where = "/".join(keys.values())
    if not names:
        if not isinstance(obj, list):
            raise FileError(Problem(str(path), where, None, "expected a list of rows here"))
        for i, rec in enumerate(obj):
            yield f"{where}[{i}]", {**rec, **keys} if isinstance(rec, dict) else rec
        return
    if not isinstance(obj, dict):
        raise FileError(
            Problem(str(path), where or None, None, f"expected an object of {names[0]}")
        )
    for key, value in obj.items():
        yield from _nested_rows(value, names[1:], {**keys, names[0]: str(key)}, path)


def _read(spec: FileSpec, path: Path) -> Iterator[tuple[str, Any]]:
    fmt = _format(spec, path)
    try:
        if fmt == "jsonl":
            with path.open(encoding="utf-8") as f:
                for lineno, line in enumerate(f, 1):
                    if not line.strip():
                        continue
                    try:
                        yield f"line {lineno}", json.loads(line)
                    except json.JSONDecodeError as exc:
                        where = f"line {lineno}"
                        yield where, Problem(str(path), where, None, f"not valid JSON: {exc}")
        elif fmt == "json":
            try:
                obj = json.loads(path.read_text(encoding="utf-8"))
            except json.JSONDecodeError as exc:
                raise FileError(Problem(str(path), None, None, f"not valid JSON: {exc}")) from exc
            if spec.nested and isinstance(obj, dict):
                yield from _nested_rows(obj, spec.nested, {}, path)
                return
            if spec.keyed and not spec.records and isinstance(obj, dict):
                for key, rec in obj.items():
                    row = {**rec, spec.keyed: key} if isinstance(rec, dict) else rec
                    yield f"key {key!r}", row
                return
            for i, rec in enumerate(_records(obj, spec.records, path)):
                yield f"item {i}", rec
        elif fmt == "csv":
            with path.open(encoding="utf-8", newline="") as f:
                for i, rec in enumerate(csv.DictReader(f)):
                    yield f"row {i}", rec
        else:
            import pandas as pd  # lazily: pandas + pyarrow only when a parquet file is read

            frame = pd.read_parquet(path)
            for i, rec in enumerate(frame.to_dict(orient="records")):
                yield f"row {i}", plain(rec)
    except OSError as exc:
        raise FileError(Problem(str(path), None, None, f"cannot read: {exc}")) from exc
    except UnicodeDecodeError as exc:
        raise FileError(Problem(str(path), None, None, not_utf8(exc))) from exc


def iter_file_rows(file: Path) -> Iterator[tuple[str, Any]]:
    """(where, row) pairs of a ``.json`` list or (by its suffix) a ``.jsonl`` file; a broken
    JSONL line is a (where, Problem) pair. FileError when the file cannot be read at all."""
    fmt: Literal["json", "jsonl"] = "jsonl" if file.suffix == ".jsonl" else "json"
    yield from _read(FileSpec(path=file.name, format=fmt), file)


def read_rows(file: Path) -> list[tuple[str, Any]]:
    """(where, row) pairs of a ``.json`` list or a ``.jsonl`` file; DataError at a broken line."""
    out = []
    for where, row in iter_file_rows(file):
        if isinstance(row, Problem):
            raise DataError(str(row))
        out.append((where, row))
    return out


def annotation_paths(spec: FileSpec, root: Path) -> list[Path]:
    """The files one file spec reads under ``root`` (a glob may match several; where it
    matches none, its ``or_else``'s); empty when none is there."""
    paths = _own_paths(spec, root)
    if paths or spec.or_else is None:
        return paths
    return annotation_paths(spec.or_else, root)


def _own_paths(spec: FileSpec, root: Path) -> list[Path]:
    # The glob runs inside root, so brackets or stars in the root's own path are harmless.
    if glob.has_magic(spec.path):
        paths = sorted(root / p for p in glob.glob(spec.path, root_dir=root))
    else:
        paths = [root / spec.path]
    return paths if paths and paths[0].exists() else []


def annotation_digest(specs: Iterable[FileSpec], root: Path) -> str:
    """A sha256 over the annotation files the file specs read under ``root`` (each file's
    path relative to ``root`` and its bytes): two copies of a release hash alike exactly
    when they hold the same annotations."""
    import hashlib

    h = hashlib.sha256()
    for fs in specs:
        for path in annotation_paths(fs, root):
            rel = path.relative_to(root).as_posix() if path.is_relative_to(root) else path.name
            h.update(rel.encode() + b"\0")
            with open(path, "rb") as f:
                h.update(hashlib.file_digest(f, "sha256").digest())
    return h.hexdigest()


def iter_rows(spec: FileSpec, root: Path) -> Iterator[Row | Problem]:
    """Rows of one file spec under ``root`` (a glob may match several files), or Problems."""
    paths = _own_paths(spec, root)
    if not paths and spec.or_else is not None:
        yield from iter_rows(spec.or_else, root)  # the release's other layout
        return
    if not paths:
        yield Problem(spec.path, None, None, f"annotation file not found under {root}")
        return
    for path in paths:
        label = str(path.relative_to(root)) if path.is_relative_to(root) else str(path)
        position = 0
        try:
            for where, rec in _read(spec, path):
                if isinstance(rec, Problem):
                    yield Problem(label, where, None, rec.message)
                    continue
                if not isinstance(rec, dict):
                    yield Problem(label, where, None, f"a row must be an object, got {rec!r:.60}")
                    continue
                # _position: the row's place in its file, for rules that depend on file
                # order (Video-MME-v2 groups); never used for ids.
                data = {**spec.constants, **plain(rec), "_position": position}
                position += 1
                yield from _explode(spec, label, where, data)
        except FileError as exc:
            p = exc.problem
            yield Problem(label, p.row, p.field, p.message)


def _explode(
    spec: FileSpec, label: str, where: str, rec: dict[str, Any]
) -> Iterator[Row | Problem]:
    if not spec.explode:
        yield Row(label, where, rec)
        return
    items = rec.get(spec.explode)
    if items is None and spec.explode_optional:
        yield Row(label, where, rec)
        return
    if not isinstance(items, list):
        yield Problem(label, where, spec.explode, "missing or not a list of questions")
        return
    parent = {k: v for k, v in rec.items() if k != spec.explode}
    for j, item in enumerate(items):
        if not isinstance(item, dict):
            yield Problem(
                label, f"{where}.{spec.explode}[{j}]", None, "a question must be an object"
            )
            continue
        # _explode_index: the element's place in its list (OVO-Bench probes sharing a
        # timestamp are told apart by it); like _position, never used unless mapped.
        yield Row(label, f"{where}.{spec.explode}[{j}]", {**parent, **item, "_explode_index": j})


def unique_id(seen: dict[str, str], sid: str, where: str) -> tuple[str, str | None]:
    """``sid``, or ``sid#k`` (lowest free k >= 2) when ``sid`` is taken, and where ``sid``
    was first seen (None when it is new). ``seen`` maps ids to where they were built; rows
    are read in file order, so the suffixes are the same on every load of one release."""
    if sid not in seen:
        seen[sid] = where
        return sid, None
    k = 2
    while f"{sid}#{k}" in seen:
        k += 1
    seen[f"{sid}#{k}"] = where
    return f"{sid}#{k}", seen[sid]
