"""Files other tools wrote, read safely: one line naming the file, the line (or row) and
what is wrong, never a traceback, and memory bounded whatever the file holds.

- Only regular files are read: a FIFO, a device (``/dev/zero``), a folder, a symlink loop
  or a dangling symlink is named as such (opened without blocking, then checked), never
  read and never called "no such file". An empty file is said to be empty.
- Text is UTF-8 (a byte-order mark is allowed); a line that is not names its number. A
  line is read whole only up to :data:`MAX_LINE_BYTES`.
- JSON: nesting deeper than the parser follows is refused by line (the parser's
  RecursionError), and so is a string holding a lone surrogate (``"\\ud800"``: half of a
  UTF-16 pair, which JSON's escapes can spell but no UTF-8 file can hold). The choice is
  to refuse, not to replace: the reply a record keeps is the one the file gave, or none.
- TSV (VLMEvalKit's sheets, written by pandas): quotes are honoured (a reply may hold
  tabs and newlines inside a quoted cell) and checked strictly; a row whose cell count is
  not the header's is refused by line, since an unbalanced quote swallows the rows after
  it into one cell.
- XLSX: read with openpyxl's streaming reader, after the archive's unpacked size is
  checked against :data:`XLSX_MAX_UNPACKED` (a zip bomb is refused before anything is
  inflated; zipfile never inflates past a member's declared size). A truncated archive or
  one that is not a workbook is named.

Rows keep their byte offset where the format allows it (JSONL, TSV), so a reader can
read one row again later (:func:`json_line_at`, :func:`tsv_row_at`) instead of holding
every reply in memory.
"""

from __future__ import annotations

import contextlib
import csv
import errno
import json
import os
import re
import stat
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO, Any

from evalkit.errors import DataError, not_utf8

MAX_LINE_BYTES = 64 << 20
"""The longest line (or TSV cell, or whole JSON document) read: a longer one is refused,
not held in memory."""
XLSX_MAX_UNPACKED = 256 << 20
"""The most an .xlsx may unpack to (every member, as its archive declares them): its
shared strings are held in memory while it is read. A bigger sheet can be saved as .tsv,
which is streamed."""

_KINDS = {
    stat.S_IFIFO: "a FIFO (named pipe), not a regular file",
    stat.S_IFCHR: "a character device, not a regular file",
    stat.S_IFBLK: "a block device, not a regular file",
    stat.S_IFSOCK: "a socket, not a regular file",
    stat.S_IFDIR: "a folder, not a predictions file",
}
_AGAIN = "; save the predictions to a regular file (they are read more than once)"


def open_regular(file: Path) -> IO[bytes]:
    """``file`` opened for reading in binary, once it is known to be a regular file
    (opened without blocking, so a FIFO without a writer is named, never waited on)."""
    try:
        fd = os.open(file, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    except OSError as exc:
        raise DataError(f"{file}: {_open_error(file, exc)}") from None
    try:
        kind = stat.S_IFMT(os.fstat(fd).st_mode)
        if kind != stat.S_IFREG:
            raise DataError(f"{file}: {_KINDS.get(kind, 'not a regular file')}{_AGAIN}")
        os.set_blocking(fd, True)
        return os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise


def _open_error(file: Path, exc: OSError) -> str:
    if exc.errno == errno.ELOOP:
        return "a symlink loop (it points, in the end, at itself): not a file"
    if exc.errno == errno.ENOENT:
        if file.is_symlink():
            return f"a symlink to a missing file ({os.readlink(file)})"
        return "no such predictions file"
    return f"cannot be read ({exc.strerror or exc})"


def check_regular(file: Path) -> int:
    """The size of ``file``, a regular file that is not empty (else a DataError)."""
    with open_regular(file) as f:
        size = os.fstat(f.fileno()).st_size
    if size == 0:
        raise DataError(f"{file}: the file is empty (0 bytes): no predictions in it")
    return size


@dataclass(frozen=True)
class Line:
    """One line of a text file: its number, where it starts (bytes) and its text."""

    number: int
    offset: int
    text: str


class Lines:
    """A binary file's lines as text (UTF-8, BOM allowed on the first), with their numbers
    and offsets; a line that is not UTF-8 or is longer than ``MAX_LINE_BYTES`` is named."""

    def __init__(self, f: IO[bytes], file: Path, number: int = 0) -> None:
        self.f, self.file = f, file
        self.number = number
        """The number of the last line read."""
        self.offset = f.tell()
        """Where the next line starts."""

    def __iter__(self) -> Lines:
        return self

    def __next__(self) -> str:
        raw = self.f.readline(MAX_LINE_BYTES + 1)
        if not raw:
            raise StopIteration
        self.number += 1
        self.offset += len(raw)
        if len(raw) > MAX_LINE_BYTES:
            raise DataError(
                f"{self.where()}: longer than {MAX_LINE_BYTES >> 20} MiB: not a line of "
                "predictions (a binary file, or one without line breaks?)"
            )
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as exc:
            raise DataError(f"{self.where()}: {not_utf8(exc)}") from None
        return text.removeprefix("\ufeff") if self.number == 1 else text

    def where(self) -> str:
        """``file, line N`` of the last line read."""
        return f"{self.file}, line {self.number}"


def lines(file: Path) -> Iterator[Line]:
    """The file's lines, one at a time (see :class:`Lines`)."""
    with open_regular(file) as f:
        it = Lines(f, file)
        start = it.offset
        for text in it:
            yield Line(it.number, start, text)
            start = it.offset


# a \u escape of a UTF-16 surrogate (paired or lone: the parsed strings tell which)
_SURROGATE_ESCAPE = re.compile(r"\\u[dD][89a-fA-F]")
_SURROGATE = re.compile("[\ud800-\udfff]")


def parse_json(text: str, where: str, hint: str = "") -> Any:
    """``text`` as JSON; DataError naming ``where`` when it is not (``hint``: what it
    should be), when it nests deeper than the parser follows, or when a string in it holds
    a lone surrogate."""
    try:
        value = json.loads(text)
    except RecursionError:
        raise DataError(
            f"{where}: nested too deeply (over {sys.getrecursionlimit()} levels of brackets) "
            "for a JSON reader: not a prediction row"
        ) from None
    except ValueError as exc:
        raise DataError(f"{where}: not valid JSON ({exc}){hint}") from None
    if _SURROGATE_ESCAPE.search(text):
        check_text(value, where)
    return value


def check_text(value: Any, where: str) -> None:
    """DataError naming the field when a string in ``value`` (keys included) holds a lone
    surrogate. Walked with a stack: the parser already bounded the depth."""
    stack: list[tuple[str, Any]] = [("", value)]
    while stack:
        path, item = stack.pop()
        if isinstance(item, dict):
            for k, v in item.items():
                sub = f"{path}.{k}" if path else str(k)
                if isinstance(k, str) and _SURROGATE.search(k):
                    _surrogate(where, sub, k)
                stack.append((sub, v))
        elif isinstance(item, list):
            stack.extend((f"{path}[{i}]", v) for i, v in enumerate(item))
        elif isinstance(item, str) and _SURROGATE.search(item):
            _surrogate(where, path, item)


def _surrogate(where: str, path: str, text: str) -> None:
    found = _SURROGATE.search(text)
    code = f"\\u{ord(found.group()):04x}" if found else "?"
    field = f"field {path.encode('ascii', 'backslashreplace').decode()!r}" if path else "the row"
    raise DataError(
        f"{where}: {field} holds a lone surrogate ({code}: half of a UTF-16 pair, not a "
        "character; no UTF-8 file can hold it): the file is refused rather than the text "
        "changed; fix that line (a reply cut inside an emoji?)"
    )


def json_line_at(file: Path, offset: int, number: int) -> Any:
    """The JSON value of the line starting at ``offset`` (line ``number``), read again."""
    with open_regular(file) as f:
        f.seek(offset)
        text = next(Lines(f, file, number - 1), "")
    return parse_json(text, f"{file}:{number}")


def json_document(file: Path) -> Any:
    """A whole JSON document (TempCompass's nested predictions), checked as lines are; one
    over ``MAX_LINE_BYTES`` is refused (predictions that large are JSONL, read by line)."""
    with open_regular(file) as f:
        raw = f.read(MAX_LINE_BYTES + 1)
    if len(raw) > MAX_LINE_BYTES:
        raise DataError(
            f"{file}: a JSON document over {MAX_LINE_BYTES >> 20} MiB: write predictions this "
            'large as JSONL, one {"id": ..., "prediction": "..."} per line'
        )
    try:
        text = raw.decode("utf-8").removeprefix("\ufeff")
    except UnicodeDecodeError as exc:
        line = raw.count(b"\n", 0, exc.start) + 1
        raise DataError(f"{file}, line {line}: {not_utf8(exc)}") from None
    return parse_json(text, str(file))


@dataclass(frozen=True)
class SheetRow:
    """A row of a sheet: where it is (for people), its offset (TSV; None: xlsx) and its
    cells by column name."""

    where: str
    offset: int | None
    cells: dict[str, Any]


_QUOTES = (
    "an unbalanced quote (\") in a cell? VLMEvalKit's sheets (pandas) quote a cell holding "
    "a quote, tab or line break, and double the quotes inside it"
)


def tsv_rows(file: Path) -> Iterator[SheetRow]:
    """The rows of a tab-separated sheet with a header row, one at a time; a cell count
    other than the header's, or a quote out of place, is named by line."""
    # the limit is per process; a 64k-character reply is a legal cell (the default is 128k)
    csv.field_size_limit(max(csv.field_size_limit(), MAX_LINE_BYTES))
    with open_regular(file) as f:
        it = Lines(f, file)
        reader = csv.reader(it, delimiter="\t", quotechar='"', strict=True)
        header: list[str] | None = None
        while True:
            start, first = it.offset, it.number + 1
            try:
                cells = next(reader)
            except StopIteration:
                return
            except csv.Error as exc:
                raise DataError(f"{file}, line {it.number}: {exc}: {_QUOTES}") from None
            if not cells:
                continue  # a blank line
            if header is None:
                header = cells
                continue
            if len(cells) != len(header):
                raise DataError(
                    f"{file}, line {first}: {len(cells)} cells where the header has "
                    f"{len(header)}: {_QUOTES}, or a stray tab?"
                )
            yield SheetRow(f"{file}, line {first}", start, dict(zip(header, cells, strict=True)))


def tsv_row_at(file: Path, offset: int) -> dict[str, str]:
    """The cells of the TSV row starting at ``offset``, read again (header first)."""
    header = next(_tsv_cells(file, 0), [])
    return dict(zip(header, next(_tsv_cells(file, offset), []), strict=False))


def _tsv_cells(file: Path, offset: int) -> Iterator[list[str]]:
    """The non-blank rows of a TSV file from ``offset`` on, as lists of cells."""
    csv.field_size_limit(max(csv.field_size_limit(), MAX_LINE_BYTES))
    with open_regular(file) as f:
        f.seek(offset)
        for cells in csv.reader(Lines(f, file), delimiter="\t", quotechar='"', strict=True):
            if cells:
                yield cells


_NOT_XLSX = "not an .xlsx workbook"


def xlsx_rows(file: Path) -> Iterator[SheetRow]:
    """The rows of the first sheet of an .xlsx workbook (header first), streamed, once
    its unpacked size is known to be within :data:`XLSX_MAX_UNPACKED`."""
    import zipfile

    check_regular(file)
    try:
        with zipfile.ZipFile(file) as zf:
            unpacked = sum(info.file_size for info in zf.infolist())
    except (zipfile.BadZipFile, EOFError, OSError) as exc:
        raise DataError(
            f"{file}: {_NOT_XLSX} (an .xlsx is a zip archive; this is not one, or a truncated "
            f"one: {exc})"
        ) from None
    if unpacked > XLSX_MAX_UNPACKED:
        raise DataError(
            f"{file}: unpacks to {unpacked >> 20} MiB, over the {XLSX_MAX_UNPACKED >> 20} MiB "
            "a spreadsheet is read up to (a zip bomb? a sheet this big: save it as .tsv, "
            "which is read a row at a time)"
        )
    yield from _xlsx_cells(file)


def _xlsx_cells(file: Path) -> Iterator[SheetRow]:
    try:
        import openpyxl
    except ImportError:
        raise DataError(
            f"{file}: reading .xlsx needs openpyxl (pip install openpyxl), or save the sheet "
            "as .tsv"
        ) from None
    number = 0
    try:
        with _quiet_openpyxl():
            book = openpyxl.load_workbook(file, read_only=True, data_only=True)
        try:
            if not book.worksheets:
                raise DataError(f"{file}: the workbook has no sheet")
            header: list[str] | None = None
            for values in book.worksheets[0].iter_rows(values_only=True):
                number += 1
                cells = [cell_text(v) for v in values]
                if header is None:
                    header = cells
                    continue
                cells += [""] * (len(header) - len(cells))
                yield SheetRow(f"{file} row {number}", None, dict(zip(header, cells, strict=False)))
        finally:
            book.close()
    except DataError:
        raise
    except Exception as exc:  # openpyxl, zipfile, zlib and the XML parser on a bad file
        row = f" at row {number}" if number else ""
        raise DataError(f"{file}: {_NOT_XLSX}, or a damaged one{row} ({_said(exc)})") from None


def cell_text(value: Any) -> str:
    """A cell as text, as pandas reads a sheet with ``dtype=str``: empty as "", a whole
    number without ".0"."""
    if value is None:
        return ""
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    return str(value)


@contextlib.contextmanager
def _quiet_openpyxl() -> Iterator[None]:
    import warnings

    with warnings.catch_warnings():
        # "Workbook contains no default style": every sheet pandas writes
        warnings.simplefilter("ignore", UserWarning)
        yield


def _said(exc: BaseException) -> str:
    text = " ".join(str(exc).split())[:160]
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__
