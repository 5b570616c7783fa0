"""Text that fits the terminal: its width, lines wrapped at spaces, tables that fit.

What evalkit prints for people in tables and long lines (``bench list``, ``bench show``,
``report``) is laid out here, for one width: the terminal's, ``COLUMNS`` where it is set,
and :data:`PIPED_WIDTH` when the output goes to a file or a pipe. Lines break at spaces
only; a word (a rule name, a variant, a path, a URL) is never cut in two, except one longer
than a whole line, which cannot be kept whole anywhere.

A table keeps its boxed form when every column can be at least as wide as its longest
word; failing that, a compact form (two spaces between columns, a rule under the
headers); failing that too, one block per row, its cells as ``header: value`` fields.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Collection, Sequence
from typing import TYPE_CHECKING, TextIO

if TYPE_CHECKING:
    from rich.console import RenderableType
    from rich.table import Table

PIPED_WIDTH = 100
"""Columns of output that goes to a file or a pipe (and ``COLUMNS`` is not set)."""
_NARROWEST = 20  # below this nothing lays out sensibly: treated as this wide
_COMPACT_GAP = "  "
_MAX_LEAD = 4  # a wrapped line's own leading spaces kept at most
_HANG = "    "  # indent of a row's fields in the one-block-per-row form
_FIELD_GAP = "   "  # between two ``header: value`` fields on one line of a row's block


def terminal_width(stream: TextIO | None = None) -> int:
    """``COLUMNS`` when set, else the width of the terminal ``stream`` (stdout) is, else
    :data:`PIPED_WIDTH`."""
    env = os.environ.get("COLUMNS", "").strip()
    if env.isdigit() and int(env) > 0:
        return max(int(env), _NARROWEST)
    stream = stream or sys.stdout
    try:
        if stream.isatty():
            return max(os.get_terminal_size(stream.fileno()).columns, _NARROWEST)
    except (AttributeError, OSError, ValueError):  # a stream without a descriptor
        pass
    return PIPED_WIDTH


def cells(text: str) -> int:
    """How many terminal columns ``text`` takes (wide characters count two)."""
    from rich.cells import cell_len

    return cell_len(text)


def wrap(text: str, width: int, first: str = "", rest: str | None = None) -> list[str]:
    """``text`` as lines of at most ``width`` columns, broken at spaces, the first starting
    with ``first`` and the others with ``rest`` (default: as many spaces); each of the
    text's own lines keeps its leading spaces (an indented layout stays indented)."""
    rest = " " * cells(first) if rest is None else rest
    out: list[str] = []
    for line in text.splitlines() or [""]:
        lead = line[: len(line) - len(line.lstrip())]
        if cells(first + line) > width:  # hand-aligned for a wider line: a modest indent
            lead = lead[:_MAX_LEAD]
        out += _fill(line.split(), width, (rest if out else first) + lead, rest + lead)
    return out


def _fill(words: list[str], width: int, first: str, rest: str) -> list[str]:
    """Greedy filling; a word goes whole to the next line, unless no line can hold it."""
    lines: list[str] = []
    line, fresh = first, True  # fresh: nothing but the prefix on ``line`` yet
    for word in words:
        if not fresh and cells(line) + 1 + cells(word) > width:
            lines.append(line)
            line, fresh = rest, True
        if fresh and cells(line) + cells(word) > width >= cells(rest) + cells(word):
            lines.append(line)  # the first prefix alone: the word fits after ``rest``
            line = rest
        while fresh and cells(line) + cells(word) > width:  # longer than any line
            room = max(width - cells(line), 1)
            lines.append(line + word[:room])
            line, word = rest, word[room:]
        line = line + word if fresh else f"{line} {word}"
        fresh = False
    lines.append(line)
    return [x.rstrip() for x in lines]


def longest_word(text: str) -> int:
    """The columns of the widest word of ``text`` (the narrowest it can be wrapped to)."""
    return max((cells(w) for w in text.split()), default=0)


def widest_line(text: str) -> int:
    """The columns of the widest line of ``text`` (as wide as it needs unwrapped)."""
    return max((cells(x) for x in text.splitlines()), default=0)


def fit_widths(lows: Sequence[int], highs: Sequence[int], room: int) -> list[int] | None:
    """Column widths within ``room``, each at least its ``lows`` (its longest word) and at
    most its ``highs`` (its widest line); None when even the lows do not fit. The spare goes
    to the columns that lack least first, each taking at most an even share of what is
    left, so that short cells stay on one line and the long ones share the rest."""
    if sum(lows) > room:
        return None
    widths = list(lows)
    spare = room - sum(lows)
    order = sorted(range(len(widths)), key=lambda i: highs[i] - lows[i])
    for done, i in enumerate(order):
        give = min(highs[i] - lows[i], spare // (len(order) - done))
        widths[i] += give
        spare -= give
    return widths


def table(
    headers: Sequence[str],
    rows: Sequence[Sequence[str]],
    width: int,
    *,
    title: str = "",
    whole: Collection[str] = (),
) -> RenderableType:
    """``rows`` under ``headers`` laid out within ``width`` columns, words never split (see
    the module docstring for the three forms). Cells of the columns named in ``whole``
    are kept on one line (a frame count such as ``2 fps ≤768``) where the table allows."""
    from rich.console import Group
    from rich.text import Text

    head = [Text(x) for x in wrap(title, width)] if title else []
    cols = [[h, *(row[i] for row in rows)] for i, h in enumerate(headers)]
    words = [max(map(longest_word, col)) for col in cols]
    highs = [max(map(widest_line, col)) for col in cols]
    kept = [hi if h in whole else lo for h, lo, hi in zip(headers, words, highs, strict=True)]
    n = len(headers)
    # Each form first with the ``whole`` cells kept on one line, then without.
    for chrome, boxed in ((3 * n + 1, True), (len(_COMPACT_GAP) * (n - 1), False)):
        for lows in (kept, words):
            widths = fit_widths(lows, highs, width - chrome)
            if widths is None:
                continue
            if boxed:
                return Group(*head, _boxed(headers, rows, widths))
            return Group(*head, *(Text(x) for x in _compact(headers, rows, widths)))
    return Group(*head, *(Text(x) for x in _blocks(headers, rows, width)))


def as_lines(renderable: RenderableType, width: int) -> list[str]:
    """What ``renderable`` prints at ``width`` columns, as plain lines."""
    import io

    from rich.console import Console

    buf = io.StringIO()
    Console(file=buf, width=width, color_system=None, force_terminal=False).print(renderable)
    return [x.rstrip() for x in buf.getvalue().splitlines()]


def _boxed(headers: Sequence[str], rows: Sequence[Sequence[str]], widths: list[int]) -> Table:
    from rich import box
    from rich.table import Table
    from rich.text import Text

    grid = Table(box=box.HEAVY_HEAD, expand=False)
    for h, w in zip(headers, widths, strict=True):
        grid.add_column(Text(h), width=w, overflow="fold")
    for row in rows:
        grid.add_row(*(Text(c) for c in row))  # Text: a reply's "[b]" is not markup
    return grid


def _compact(headers: Sequence[str], rows: Sequence[Sequence[str]], widths: list[int]) -> list[str]:
    rule = [["─" * w] for w in widths]
    out: list[str] = []
    for cells_ in ([_wrapped(h, w) for h, w in zip(headers, widths, strict=True)], rule):
        out += _side_by_side(cells_, widths)
    for row in rows:
        out += _side_by_side([_wrapped(c, w) for c, w in zip(row, widths, strict=True)], widths)
    return out


def _wrapped(text: str, width: int) -> list[str]:
    return wrap(text, width) if text else [""]


def _side_by_side(blocks: list[list[str]], widths: list[int]) -> list[str]:
    height = max(len(b) for b in blocks)
    lines = []
    for i in range(height):
        parts = [
            (b[i] if i < len(b) else "") + " " * (w - cells(b[i] if i < len(b) else ""))
            for b, w in zip(blocks, widths, strict=True)
        ]
        lines.append(_COMPACT_GAP.join(parts).rstrip())
    return lines


def _blocks(headers: Sequence[str], rows: Sequence[Sequence[str]], width: int) -> list[str]:
    """One block per row: its first cell as a heading, then its other cells as ``header:
    value`` fields, as many to a line as fit whole (a long one wrapped on its own)."""
    out: list[str] = []
    for row in rows:
        out += wrap(f"{headers[0]}: {row[0]}", width, "  ", "  " + _HANG)
        line = ""
        for h, c in zip(headers[1:], row[1:], strict=True):
            if not c:
                continue
            fld = f"{h}: {' '.join(c.split())}"
            if line and cells(_HANG + line + _FIELD_GAP + fld) <= width:
                line += _FIELD_GAP + fld
                continue
            if line:
                out.append(_HANG + line)
            line = fld if cells(_HANG + fld) <= width else ""
            if not line:
                out += wrap(fld, width, _HANG, _HANG * 2)
        if line:
            out.append(_HANG + line)
    return out
