"""Predictions made elsewhere: read in the format they were written, matched to samples.

Four formats, told apart by the file (``FORMATS``, first match wins):

- ``evalkit``: JSONL, one ``{"id": ..., "prediction": ...}`` per line (the id may be
  replaced by the benchmark's natural fields, see below);
- ``lmms-eval``: the JSONL ``--log_samples`` writes (``samples_<task>.jsonl``), one object
  per document: ``doc_id``, ``doc`` (the dataset row), ``target``, ``arguments``,
  ``resps`` (per request, the list of generations) and ``filtered_resps`` (per request,
  the filtered reply) - lmms_eval/evaluator.py ``evaluate``, the ``log_samples`` block;
  the reply is the first ``filtered_resps`` entry (``resps`` when absent), keys are the
  ``doc``'s fields;
- ``vlmevalkit``: VLMEvalKit's prediction sheet (``<model>_<dataset>_<n>frame.xlsx`` or
  ``.tsv``): the dataset's TSV columns (``index``, ``question``, ...) plus ``prediction``
  (vlmeval/inference_video.py ``infer_data_job_video``: ``meta['prediction'] =
  [str(data_all[x]) ...]``); keys are its columns. xlsx needs openpyxl, tsv nothing;
- ``tempcompass``: TempCompass's own ``predictions/<model>/<format>.json``, the input of its
  ``eval_*.py``: ``{video_id: {dim: [{question, answer, prediction | response}]}}`` (its
  authors' published outputs); keys are ``video_id``, ``dim`` and the item's fields.

A row is matched to a sample by evalkit's id (``id``) when it names one, else by the
benchmark's natural fields (``IdSpec.natural``: TempCompass ``video_id``, ``dim`` and
``question``; OVO-Bench ``id`` and ``probe``; listed by ``evalkit bench ids``), compared as
text. A list-valued reply is read as its first element (OVO-Bench's Qwen2-VL wrappers
write ``["B"]``); a null reply is a failed sample. A sample given twice keeps its first
row (the others are counted as duplicated); a question a release asks twice (ids ``x``,
``x#2``) takes its rows in file order.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import DataError, not_utf8
from evalkit.registry import Registry


@dataclass(frozen=True)
class PredictionRow:
    """One row of a predictions file: where it is, its key fields and the reply."""

    where: str
    keys: dict[str, Any]
    reply: str | None


@dataclass(frozen=True)
class PredictionFormat:
    """How to recognise a file of one tool and read its rows."""

    name: str
    sniff: Callable[[Path, dict[str, Any] | None], bool]
    """True for a file of this format (``first``: its first JSON object, if JSONL)."""
    read: Callable[[Path], Iterator[PredictionRow]]


FORMATS: Registry[PredictionFormat] = Registry("predictions format")
_ORDER: list[str] = []  # sniffed in registration order, the catch-all (evalkit) last


def _register(fmt: PredictionFormat) -> PredictionFormat:
    FORMATS.register(fmt.name, fmt)
    _ORDER.append(fmt.name)
    return fmt


def reply_text(value: Any, where: str) -> str | None:
    """A reply as text: a list gives its first element, null stays None (failed)."""
    while isinstance(value, list | tuple):
        value = value[0] if value else None
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)  # a count written as a number
    raise DataError(
        f"{where}: the reply must be text (or a list of texts, or null), got {type(value).__name__}"
    )


def _json_lines(file: Path) -> Iterator[tuple[int, Any]]:
    try:
        lines = file.read_text(encoding="utf-8").splitlines()
    except UnicodeDecodeError as exc:
        raise DataError(f"{file}: {not_utf8(exc)}") from None
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            row = json.loads(line)
        except ValueError as exc:
            raise DataError(
                f"{file}:{lineno}: not valid JSON ({exc}); each line must be one object "
                '{"id": ..., "prediction": "..."} (or an lmms-eval --log_samples line)'
            ) from None
        if not isinstance(row, dict):
            raise DataError(
                f"{file}:{lineno}: a line must be a JSON object, got {type(row).__name__}"
            )
        yield lineno, row


def _first_object(file: Path) -> dict[str, Any] | None:
    if file.suffix.lower() in (".xlsx", ".tsv") or _nested_document(file) is not None:
        return None
    for _, row in _json_lines(file):
        return dict(row)
    return None


def _read_lmms_eval(file: Path) -> Iterator[PredictionRow]:
    for lineno, row in _json_lines(file):
        where = f"{file}:{lineno}"
        doc = row.get("doc")
        if not isinstance(doc, dict):
            raise DataError(f"{where}: field 'doc' (the dataset row) is missing or not an object")
        replies = row.get("filtered_resps", row.get("resps"))
        keys = {**doc, "doc_id": row.get("doc_id")}
        yield PredictionRow(where, keys, reply_text(replies, where))


def _read_evalkit(file: Path) -> Iterator[PredictionRow]:
    for lineno, row in _json_lines(file):
        where = f"{file}:{lineno}"
        if "prediction" not in row:
            raise DataError(
                f"{where}: field 'prediction' is missing (have: {', '.join(row) or 'nothing'}); "
                'each line is {"id": ..., "prediction": "..."} (or the benchmark\'s natural '
                "fields instead of id: evalkit bench ids NAME lists them)"
            )
        sid = row.get("id")
        if sid is not None and (not isinstance(sid, str | int) or isinstance(sid, bool)):
            raise DataError(f"{where}: field 'id' must be a string or integer, got {sid!r}")
        keys = {k: v for k, v in row.items() if k != "prediction"}
        yield PredictionRow(where, keys, reply_text(row["prediction"], where))


def _read_vlmevalkit(file: Path) -> Iterator[PredictionRow]:
    import pandas as pd

    # every cell as written: VLMEvalKit wrote str(reply), "None" included
    opts: dict[str, Any] = {"dtype": str, "keep_default_na": False, "na_filter": False}
    if file.suffix.lower() == ".xlsx":
        try:
            import openpyxl  # noqa: F401  (pandas' xlsx reader)
        except ImportError:
            raise DataError(
                f"{file}: reading .xlsx needs openpyxl (pip install openpyxl), or save the "
                "sheet as .tsv"
            ) from None
        frame = pd.read_excel(file, **opts)
    else:
        frame = pd.read_csv(file, sep="\t", **opts)
    if "prediction" not in frame.columns:
        have = ", ".join(map(str, frame.columns))
        raise DataError(f"{file}: no 'prediction' column (have: {have}): not a prediction sheet")
    for i, row in enumerate(frame.to_dict("records"), 2):  # row 1 is the header
        keys = {str(k): v for k, v in row.items() if k != "prediction"}
        yield PredictionRow(f"{file} row {i}", keys, str(row["prediction"]))


def _nested_document(file: Path) -> dict[str, Any] | None:
    """The document of a TempCompass-style ``.json`` file, else None."""
    if file.suffix.lower() != ".json":
        return None
    try:
        doc = json.loads(file.read_text(encoding="utf-8"))
    except (ValueError, UnicodeDecodeError):
        return None
    if not isinstance(doc, dict) or not doc:
        return None
    first = next(iter(doc.values()))
    if not isinstance(first, dict) or not first:
        return None
    items = next(iter(first.values()))
    return doc if isinstance(items, list) and all(isinstance(x, dict) for x in items) else None


def _read_tempcompass(file: Path) -> Iterator[PredictionRow]:
    doc = _nested_document(file) or {}
    for video_id, dims in doc.items():
        for dim, items in dims.items():
            for i, item in enumerate(items):
                where = f"{file} [{video_id!r}][{dim!r}][{i}]"
                # eval_*.py: "if 'prediction' not in pred and 'response' in pred" -> response
                reply = item["prediction"] if "prediction" in item else item.get("response")
                keys = {**item, "video_id": video_id, "dim": dim}
                keys.pop("prediction", None)
                yield PredictionRow(where, keys, reply_text(reply, where))


_register(
    PredictionFormat(
        "vlmevalkit",
        lambda file, first: file.suffix.lower() in (".xlsx", ".tsv"),
        _read_vlmevalkit,
    )
)
_register(
    PredictionFormat(
        "lmms-eval",
        lambda file, first: first is not None and "doc_id" in first and "doc" in first,
        _read_lmms_eval,
    )
)
_register(
    PredictionFormat(
        "tempcompass",
        lambda file, first: _nested_document(file) is not None,
        _read_tempcompass,
    )
)
_register(PredictionFormat("evalkit", lambda file, first: True, _read_evalkit))


def detect(file: Path) -> PredictionFormat:
    """The format of ``file`` (DataError when there is no such file)."""
    if not file.is_file():
        raise DataError(f"{file}: no such predictions file")
    first = _first_object(file)
    return next(f for f in map(FORMATS.get, _ORDER) if f.sniff(file, first))


@dataclass
class Matched:
    """Replies by sample id, and how the file's rows were matched."""

    format: str
    texts: dict[str, str | None] = field(default_factory=dict)
    by_id: int = 0
    by_fields: int = 0
    duplicated: list[str] = field(default_factory=list)
    """Where each row for a sample already given is (ignored: the first row is kept)."""
    unmatched: list[PredictionRow] = field(default_factory=list)

    def take(self, row: PredictionRow, sids: list[str], named: bool, fmt: str) -> None:
        """Give ``row`` to the first of ``sids`` without a reply (else: a duplicate)."""
        if fmt not in self.format.split(", "):
            self.format = ", ".join(x for x in (self.format, fmt) if x)
        free = [s for s in sids if s not in self.texts]
        if not free:
            self.duplicated.append(row.where)
            return
        self.texts[free[0]] = row.reply
        self.by_id += named
        self.by_fields += not named

    @property
    def rows(self) -> int:
        """Rows read."""
        return self.by_id + self.by_fields + len(self.duplicated) + len(self.unmatched)


def _key(values: dict[str, Any], names: tuple[str, ...]) -> tuple[str, ...] | None:
    if any(values.get(n) is None for n in names):
        return None
    return tuple(str(values[n]) for n in names)


class Matcher:
    """Sample ids, and the field sets that lead to them (``Loaded.keys``: the natural
    fields, then the other tools' ones)."""

    def __init__(self, ids: list[str], keys: dict[str, list[dict[str, Any]]]) -> None:
        self.ids = set(ids)
        self.index: dict[tuple[str, ...], dict[tuple[str, ...], list[str]]] = {}
        for sid in ids:
            for values in keys.get(sid) or ():
                names = tuple(sorted(values))
                key = _key(values, names)
                if names and key is not None:
                    self.index.setdefault(names, {}).setdefault(key, []).append(sid)
        # the most specific field set first: OVO-Bench's (id, probe) before (id)
        self.field_sets = sorted(self.index, key=len, reverse=True)

    def candidates(self, row: PredictionRow) -> tuple[list[str], bool]:
        """The samples a row may stand for, and whether it named evalkit's id."""
        sid = row.keys.get("id")
        if sid is not None and str(sid) in self.ids:
            return [str(sid)], True
        for names in self.field_sets:
            key = _key(row.keys, names)
            if key is not None and key in self.index[names]:
                return self.index[names][key], False
        return [], False

    def match(self, rows: Iterable[PredictionRow], fmt: str) -> Matched:
        """Every row given to the first of its samples not yet given a reply."""
        out = {"": Matched(fmt)}
        out[""].unmatched = match_all(rows, {"": self}, out, fmt)
        return out[""]

    def describe(self) -> str:
        """How rows are matched, for an error message."""
        sets = " or ".join("+".join(names) for names in self.field_sets)
        return "by evalkit's id ('id')" + (f" or by the fields {sets}" if sets else "")


def match_all(
    rows: Iterable[PredictionRow],
    matchers: dict[str, Matcher],
    out: dict[str, Matched],
    fmt: str,
) -> list[PredictionRow]:
    """Each row to the first matcher that has its sample (recorded in ``out`` under the
    matcher's name); the rows no matcher has are returned."""
    unmatched = []
    for row in rows:
        for name, matcher in matchers.items():
            sids, named = matcher.candidates(row)
            if sids:
                out[name].take(row, sids, named, fmt)
                break
        else:
            unmatched.append(row)
    return unmatched


def read_matched(file: Path, ids: list[str], keys: dict[str, list[dict[str, Any]]]) -> Matched:
    """The file's replies keyed by sample id (see the module for formats and matching)."""
    fmt = detect(file)
    return Matcher(ids, keys).match(fmt.read(file), fmt.name)


__all__ = [
    "FORMATS",
    "Matched",
    "Matcher",
    "PredictionFormat",
    "PredictionRow",
    "detect",
    "match_all",
    "read_matched",
    "reply_text",
]
