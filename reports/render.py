"""Sections -> terminal (rich), Markdown, self-contained HTML; report objects -> JSON."""

from __future__ import annotations

import base64
import html
from pathlib import Path
from typing import TYPE_CHECKING, Any

from .sections import Section

if TYPE_CHECKING:
    from rich.console import Console

    from .model import RunReport
    from .timeline import Utilisation
    from .uncertainty import Comparison


def to_terminal(sections: list[Section], console: Console) -> None:
    """Print every section as a table with its notes, within the console's width, words
    never split (a table too wide for it is printed compact, or one block per row)."""
    from rich.text import Text

    from evalkit.textwidth import table, wrap

    width = console.width
    for sec in sections:
        if not sec.rows:
            continue
        console.print(table(sec.headers, sec.rows, width, title=sec.title))
        for note in sec.notes:
            for line in wrap(note, width, "  ", "    "):
                console.print(Text(line, style="dim"), soft_wrap=True)


def _md_cell(s: str) -> str:
    return s.replace("|", "\\|").replace("\n", " ")


def to_markdown(title: str, sections: list[Section], out_dir: Path) -> str:
    """A Markdown document; figures are linked by path relative to ``out_dir``."""
    lines = [f"# {title}", ""]
    for sec in sections:
        lines += [f"{'#' * sec.level} {sec.title}", ""]
        if sec.rows:
            lines.append("| " + " | ".join(_md_cell(h) for h in sec.headers) + " |")
            lines.append("|" + "---|" * len(sec.headers))
            lines += ["| " + " | ".join(_md_cell(c) for c in row) + " |" for row in sec.rows]
        else:
            lines.append("(none)")
        lines.append("")
        lines += [f"- {n}" for n in sec.notes]
        if sec.notes:
            lines.append("")
        for caption, path in sec.figures:
            lines += [f"![{caption}]({path.relative_to(out_dir).as_posix()})", ""]
    return "\n".join(lines)


# Tables stay inside the page: a cell holding a long unspaced word (a reply, a path, a URL,
# a sample id) may break it anywhere (class "long"), so no table's narrowest layout is wider
# than the page; other cells break at spaces only, so numbers and verdicts stay whole.
_CSS = """
body{font-family:system-ui,sans-serif;margin:2em;max-width:1400px;color:#222}
table{border-collapse:collapse;margin:.5em 0 1em;max-width:100%}
th,td{border:1px solid #ccc;padding:3px 8px;font-size:13px;text-align:left}
td.long{overflow-wrap:anywhere;min-width:8em}
th{background:#f0f0f0} td.miss{color:#b00;font-weight:bold} td.match{color:#070}
td.headline{background:#e8f0fe;color:#1a4d8f;font-weight:bold}
p.note{color:#555;font-size:12px;margin:.2em 0} figure{margin:1em 0}
img{max-width:100%;border:1px solid #ddd}
"""


def to_html(title: str, sections: list[Section], out_dir: Path) -> str:
    """A self-contained page: PNGs embedded as base64, each linked to its file on disk."""
    e = html.escape
    parts = [
        f"<!DOCTYPE html><html><head><meta charset='utf-8'><title>{e(title)}</title>",
        f"<style>{_CSS}</style></head><body><h1>{e(title)}</h1>",
    ]
    for sec in sections:
        level = min(sec.level, 6)
        parts.append(f"<h{level}>{e(sec.title)}</h{level}>")
        if sec.rows:
            parts.append("<table><tr>" + "".join(f"<th>{e(h)}</th>" for h in sec.headers) + "</tr>")
            for row in sec.rows:
                parts.append("<tr>" + "".join(_td(c) for c in row) + "</tr>")
            parts.append("</table>")
        else:
            parts.append("<p class='note'>(none)</p>")
        parts += [f"<p class='note'>{e(n)}</p>" for n in sec.notes]
        parts += [_figure(caption, path, out_dir) for caption, path in sec.figures]
    parts.append("</body></html>")
    return "\n".join(parts)


_LONG_WORD = 24  # characters: an unspaced run this long may be broken anywhere


def _td(cell: str) -> str:
    e = html.escape
    classes = [cell] if cell in ("miss", "match", "headline") else []
    if any(len(word) >= _LONG_WORD for word in cell.split()):
        classes.append("long")
    return f"<td class='{' '.join(classes)}'>{e(cell)}</td>" if classes else f"<td>{e(cell)}</td>"


def _figure(caption: str, path: Path, out_dir: Path) -> str:
    e = html.escape
    data = base64.b64encode(path.read_bytes()).decode("ascii")
    rel = path.relative_to(out_dir).as_posix()
    return (
        f"<figure><img alt='{e(caption)}' src='data:image/png;base64,{data}'>"
        f"<figcaption>{e(caption)} (<a href='{e(rel)}'>{e(rel)}</a>)</figcaption></figure>"
    )


def run_dict(run: RunReport, util: dict[str, Utilisation | None]) -> dict[str, Any]:
    """One run as plain JSON-able data."""
    benches = {}
    for name, b in run.benchmarks.items():
        benches[name] = {
            "variant": b.variant,
            "aggregation": b.aggregation,
            "official": b.official,
            "overall": b.overall,
            "stderr": b.stderr,
            "stderr_method": b.stderr_method,
            "breakdowns": b.result.breakdowns,
            "group_sizes": b.group_sizes,
            "metrics": b.result.metrics,
            "counts": {
                "total": b.counts.total,
                "scored": b.counts.scored,
                "failed": b.counts.failed,
                "unscored": b.counts.unscored,
                "failed_by_stage": b.counts.failed_by_stage,
                "scorer_failed": b.counts.scorer_failed,
            },
            "aggregate_counts": {
                "n": b.result.n,
                "n_scored": b.result.n_scored,
                "n_unscored": b.result.n_unscored,
            },
            "settings": b.settings,
            "references": [r.to_dict() for r in b.references],
            "utilisation": u.to_dict() if (u := util.get(name)) else None,
            "notes": b.notes,
            "sensitivity": b.sensitivity.to_dict() if b.sensitivity else None,
            "headline_plugin": b.headline_plugin,
        }
    return {
        "run_id": run.run_id,
        "path": str(run.path),
        "model": run.model,
        "failed_policy": run.failed_policy,
        "fingerprint": run.manifest.fingerprint,
        "created": run.manifest.created,
        "versions": run.manifest.versions,
        "plugins": [p.model_dump(mode="json") for p in run.manifest.plugins],
        "result_config": run.result_config.dump(),
        "benchmarks": benches,
    }


def comparison_dict(a: RunReport, b: RunReport, comps: list[Comparison]) -> dict[str, Any]:
    """A two-run comparison as plain JSON-able data."""
    return {"a": a.run_id, "b": b.run_id, "benchmarks": [c.to_dict() for c in comps]}
