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

import dataclasses
import math
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.errors import DataError
from evalkit.foreign import (
    check_regular,
    json_document,
    json_line_at,
    lines,
    parse_json,
    tsv_row_at,
    tsv_rows,
    xlsx_rows,
)
from evalkit.registry import Registry

KEPT_CHARS = 2048
"""Replies up to this long are kept while a file is matched; a longer one is read again
from its file when its sample is scored (``Again``), so memory does not grow with them."""


@dataclass(frozen=True)
class Again:
    """Where a row's reply can be read again: its file, the row's byte offset and line
    number, and the format that reads it."""

    file: Path
    offset: int
    number: int
    format: str

    def read(self) -> str | None:
        """The reply, read again from the file (checked as on the first reading)."""
        fmt = FORMATS.get(self.format)
        assert fmt.again is not None  # only formats that can read again make an Again
        return fmt.again(self)


@dataclass(frozen=True)
class PredictionRow:
    """One row of a predictions file: where it is, its key fields and the reply."""

    where: str
    keys: dict[str, Any]
    reply: str | None
    again: Again | None = None
    """Where the reply can be read again (None: only as read now)."""


@dataclass(frozen=True)
class PredictionFormat:
    """How to recognise a file of one tool and read its rows."""

    name: str
    sniff: Callable[[Path, dict[str, Any] | None], bool]
    """True for a file of this format (``first``: its first JSON object, if JSONL)."""
    read: Callable[[Path], Iterator[PredictionRow]]
    again: Callable[[Again], str | None] | None = None
    """The reply of one row read again (formats whose rows have offsets)."""


FORMATS: Registry[PredictionFormat] = Registry("predictions format")
_ORDER: list[str] = []  # sniffed in registration order, the catch-all (evalkit) last


def _register(fmt: PredictionFormat) -> PredictionFormat:
    FORMATS.register(fmt.name, fmt)
    _ORDER.append(fmt.name)
    return fmt


def reply_text(value: Any, where: str) -> str | None:
    """A reply as text: a list gives its first element, null stays None (failed); NaN
    and infinities are no reply a model wrote, and are refused."""
    while isinstance(value, list | tuple):
        value = value[0] if value else None
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, float) and not math.isfinite(value):
        what = "NaN" if math.isnan(value) else str(value)
        raise DataError(
            f"{where}: the reply is {what} (a number no model wrote: a missing value, or one "
            "too large for a float), not a prediction; write null for a sample without one"
        )
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)  # a count written as a number
    raise DataError(
        f"{where}: the reply must be text (or a list of texts, or null), got {type(value).__name__}"
    )


_EACH_LINE = (
    '; each line must be one object {"id": ..., "prediction": "..."} (or an lmms-eval '
    "--log_samples line)"
)


def _json_lines(file: Path) -> Iterator[tuple[str, int, int, dict[str, Any]]]:
    """Each non-blank line's object: (where, offset, line number, object)."""
    for line in lines(file):
        if not line.text.strip():
            continue
        where = f"{file}:{line.number}"
        row = parse_json(line.text, where, _EACH_LINE)
        if not isinstance(row, dict):
            raise DataError(f"{where}: a line must be a JSON object, got {type(row).__name__}")
        yield where, line.offset, line.number, row


def _first_object(file: Path) -> dict[str, Any] | None:
    """The first line's object of a JSONL file (None: a sheet, or a first line that is
    no JSON object on its own, such as a pretty-printed document's ``{``)."""
    if file.suffix.lower() in (".xlsx", ".tsv"):
        return None
    try:
        for _, _, _, row in _json_lines(file):
            return dict(row)
    except DataError:
        return None  # the reader names what is wrong, with the line
    return None


def _lmms_eval_reply(row: dict[str, Any], where: str) -> str | None:
    return reply_text(row.get("filtered_resps", row.get("resps")), where)


def _read_lmms_eval(file: Path) -> Iterator[PredictionRow]:
    for where, offset, number, row in _json_lines(file):
        doc = row.get("doc")
        if not isinstance(doc, dict):
            raise DataError(f"{where}: field 'doc' (the dataset row) is missing or not an object")
        keys = {**doc, "doc_id": row.get("doc_id")}
        again = Again(file, offset, number, "lmms-eval")
        yield PredictionRow(where, keys, _lmms_eval_reply(row, where), again)


def _evalkit_reply(row: dict[str, Any], where: str) -> str | None:
    if "prediction" not in row:
        raise DataError(
            f"{where}: field 'prediction' is missing (have: {', '.join(row) or 'nothing'}); "
            'each line is {"id": ..., "prediction": "..."} (or the benchmark\'s natural '
            "fields instead of id: evalkit bench ids NAME lists them)"
        )
    return reply_text(row["prediction"], where)


def _read_evalkit(file: Path) -> Iterator[PredictionRow]:
    for where, offset, number, row in _json_lines(file):
        reply = _evalkit_reply(row, where)
        sid = row.get("id")
        if sid is not None and (not isinstance(sid, str | int) or isinstance(sid, bool)):
            raise DataError(f"{where}: field 'id' must be a string or integer, got {sid!r}")
        keys = {k: v for k, v in row.items() if k != "prediction"}
        yield PredictionRow(where, keys, reply, Again(file, offset, number, "evalkit"))


def _again_json(
    reply: Callable[[dict[str, Any], str], str | None],
) -> Callable[[Again], str | None]:
    def again(at: Again) -> str | None:
        row = json_line_at(at.file, at.offset, at.number)
        where = f"{at.file}:{at.number}"
        if not isinstance(row, dict):
            raise DataError(f"{where}: the line changed since it was read: read it again")
        return reply(row, where)

    return again


def _read_vlmevalkit(file: Path) -> Iterator[PredictionRow]:
    # every cell as written: VLMEvalKit wrote str(reply), "None" included
    rows = xlsx_rows(file) if file.suffix.lower() == ".xlsx" else tsv_rows(file)
    for row in rows:
        if "prediction" not in row.cells:
            have = ", ".join(map(str, row.cells))
            raise DataError(
                f"{file}: no 'prediction' column (have: {have}): not a prediction sheet"
            )
        keys = {k: v for k, v in row.cells.items() if k != "prediction"}
        again = Again(file, row.offset, 0, "vlmevalkit") if row.offset is not None else None
        yield PredictionRow(row.where, keys, str(row.cells["prediction"]), again)


def _again_vlmevalkit(at: Again) -> str | None:
    return str(tsv_row_at(at.file, at.offset).get("prediction", ""))


def _nested_shape(doc: Any) -> bool:
    """Whether ``doc`` looks like TempCompass's ``{video_id: {dim: [item, ...]}}``."""
    if not isinstance(doc, dict) or not doc:
        return False
    first = next(iter(doc.values()))
    if not isinstance(first, dict) or not first:
        return False
    items = next(iter(first.values()))
    return isinstance(items, list) and all(isinstance(x, dict) for x in items)


def _read_tempcompass(file: Path) -> Iterator[PredictionRow]:
    doc = json_document(file)
    if not _nested_shape(doc):
        raise DataError(
            f"{file}: not a predictions file: a JSON document must be TempCompass's "
            "{video_id: {dim: [{question, answer, prediction}]}}; other predictions are "
            'JSONL, one {"id": ..., "prediction": "..."} per line'
        )
    for video_id, dims in doc.items():
        if not isinstance(dims, dict):
            raise DataError(f"{file} [{video_id!r}]: must map each dimension to its items")
        for dim, items in dims.items():
            if not isinstance(items, list):
                raise DataError(f"{file} [{video_id!r}][{dim!r}]: must be a list of items")
            for i, item in enumerate(items):
                where = f"{file} [{video_id!r}][{dim!r}][{i}]"
                if not isinstance(item, dict):
                    raise DataError(f"{where}: an item must be an object")
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
        _again_vlmevalkit,
    )
)
_register(
    PredictionFormat(
        "lmms-eval",
        lambda file, first: first is not None and "doc_id" in first and "doc" in first,
        _read_lmms_eval,
        _again_json(_lmms_eval_reply),
    )
)
_register(
    PredictionFormat(
        "tempcompass",
        # a pretty-printed document's first line is no object; a one-line one is nested
        lambda file, first: (
            file.suffix.lower() == ".json" and (first is None or _nested_shape(first))
        ),
        _read_tempcompass,
    )
)
_register(
    PredictionFormat(
        "evalkit", lambda file, first: True, _read_evalkit, _again_json(_evalkit_reply)
    )
)


def detect(file: Path) -> PredictionFormat:
    """The format of ``file`` (DataError when it is no regular file, or an empty one)."""
    check_regular(file)
    first = _first_object(file)
    return next(f for f in map(FORMATS.get, _ORDER) if f.sniff(file, first))


def read_rows(file: Path, fmt: PredictionFormat) -> Iterator[PredictionRow]:
    """The rows of ``file`` in ``fmt``; DataError when it has none (only blank lines, a
    header alone)."""
    n = 0
    for row in fmt.read(file):
        n += 1
        yield row
    if not n:
        raise DataError(f"{file}: no prediction rows in it (only blank lines, or a header)")


@dataclass
class Matched:
    """Replies by sample id, and how the file's rows were matched."""

    format: str
    texts: dict[str, str | Again | None] = field(default_factory=dict)
    """Sample id -> its reply (a long one: where to read it again; None: null)."""
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
        long = row.again is not None and row.reply is not None and len(row.reply) > KEPT_CHARS
        self.texts[free[0]] = row.again if long else row.reply
        self.by_id += named
        self.by_fields += not named

    def given(self, sid: str) -> bool:
        """Whether the files give sample ``sid`` a reply (a null one is none)."""
        return self.texts.get(sid) is not None

    def reply(self, sid: str) -> str | None:
        """Sample ``sid``'s reply (read again from its file when it is a long one)."""
        value = self.texts.get(sid)
        return value.read() if isinstance(value, Again) else value

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
        """The field sets rows are matched by besides the id, for an error message
        (`` or by question+video or question_id``; empty when there are none)."""
        sets = " or ".join("+".join(names) for names in self.field_sets)
        return f" or by {sets}" if sets else ""


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
        else:  # kept for the error that names them: their keys, not their replies
            unmatched.append(dataclasses.replace(row, reply=None, again=None))
    return unmatched


def read_matched(file: Path, ids: list[str], keys: dict[str, list[dict[str, Any]]]) -> Matched:
    """The file's replies keyed by sample id (see the module for formats and matching)."""
    fmt = detect(file)
    return Matcher(ids, keys).match(read_rows(file, fmt), fmt.name)


__all__ = [
    "FORMATS",
    "Again",
    "Matched",
    "Matcher",
    "PredictionFormat",
    "PredictionRow",
    "detect",
    "match_all",
    "read_matched",
    "read_rows",
    "reply_text",
]
