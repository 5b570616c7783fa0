"""The curve of a watch: each benchmark's official score against the training step.

A watch directory (``evalkit watch``) holds ``curve.jsonl`` (one row per checkpoint and
benchmark: the headline ``evalkit report`` gives that checkpoint's run, its standard error
and a 95% interval, headline +- 1.96 standard errors) and ``watch.json`` (every
checkpoint's outcome). The page shows, per benchmark, the score against the step with its
intervals (the base model, when watched, as step 0), the best checkpoint marked and named,
and a table of every point; checkpoints that failed to load or were skipped are listed.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

from evalkit.atomic import write_text_atomic
from evalkit.errors import DataError

from .plots import _pyplot, _save
from .render import to_html
from .sections import Section

CURVE = "curve.jsonl"
MANIFEST = "watch.json"
PAGE = "curve.html"


def is_watch(path: Path) -> bool:
    """Whether ``path`` is a watch directory."""
    return (path / MANIFEST).is_file()


def read_curve(path: Path) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """(the curve's rows, watch.json) of watch directory ``path``."""
    try:
        doc = json.loads((path / MANIFEST).read_text(encoding="utf-8"))
        curve = path / CURVE
        lines = curve.read_text(encoding="utf-8").splitlines() if curve.is_file() else []
        rows = [json.loads(line) for line in lines if line.strip()]
    except (OSError, ValueError) as exc:
        raise DataError(f"{path}: not a readable watch directory ({exc})") from None
    return rows, doc


def best_rows(rows: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """Per benchmark, the row with the highest headline (the earliest step on a tie)."""
    out: dict[str, dict[str, Any]] = {}
    for row in sorted(rows, key=lambda r: r["step"]):
        if row.get("headline") is None:
            continue
        held = out.get(row["benchmark"])
        if held is None or row["headline"] > held["headline"]:
            out[row["benchmark"]] = row
    return out


def sections(path: Path, figures: bool = True) -> list[Section]:
    """The curve as report sections: per benchmark a table of its points and (``figures``)
    its plot; then the checkpoints that were not evaluated."""
    rows, doc = read_curve(path)
    best = best_rows(rows)
    out: list[Section] = []
    for bench in sorted({r["benchmark"] for r in rows}):
        points = sorted((r for r in rows if r["benchmark"] == bench), key=lambda r: r["step"])
        top = best.get(bench)
        table = [
            [
                str(r["step"]),
                r.get("checkpoint", ""),
                _score(r),
                _interval(r),
                f"{r.get('samples', 0)}",
                f"{r.get('wall_s', 0):.1f}",
                "best" if top is not None and top["step"] == r["step"] else "",
            ]
            for r in points
        ]
        notes = []
        if top is not None:
            notes.append(
                f"best checkpoint: step {top['step']} ({top.get('checkpoint', '')}): "
                f"{top['headline']:.2f}"
            )
        if points and not points[0].get("official", True):
            notes.append("pooled mean: not the benchmark's official aggregate")
        notes.append("interval: 95%, headline +- 1.96 standard errors of that run")
        plots = [(f"{bench}: score by step", plot_curve(path, bench, points))] if figures else []
        out.append(
            Section(
                bench,
                ["step", "checkpoint", "score", "95% interval", "samples", "wall s", ""],
                table,
                notes,
                figures=plots,
            )
        )
    left = [
        [str(c["step"]), c["name"], c["status"], c.get("reason", "")]
        for c in doc.get("checkpoints", {}).values()
        if c["status"] != "done"
    ]
    if left:
        out.append(Section("checkpoints not evaluated", ["step", "folder", "status", "why"], left))
    return out


def _score(row: dict[str, Any]) -> str:
    if row.get("headline") is None:
        return "unscored"
    stderr = row.get("stderr")
    return f"{row['headline']:.2f}" + (f" ± {stderr:.2f}" if stderr is not None else "")


def _interval(row: dict[str, Any]) -> str:
    ci = row.get("ci95")
    return f"[{ci[0]:.2f}, {ci[1]:.2f}]" if ci else "-"


def plot_curve(path: Path, bench: str, points: list[dict[str, Any]]) -> Path:
    """One benchmark's score against the step, with 95% intervals; the best point marked."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(7, 3.6))
    scored = [r for r in points if r.get("headline") is not None]
    steps = [r["step"] for r in scored]
    values = [r["headline"] for r in scored]
    low = [r["headline"] - r["ci95"][0] if r.get("ci95") else 0 for r in scored]
    high = [r["ci95"][1] - r["headline"] if r.get("ci95") else 0 for r in scored]
    ax.errorbar(steps, values, yerr=[low, high], marker="o", capsize=3, color="#4c72b0")
    top = best_rows(scored).get(bench)
    if top is not None:
        ax.scatter([top["step"]], [top["headline"]], s=140, facecolors="none", edgecolors="#c44e52")
        ax.annotate(
            f"best: step {top['step']}",
            (top["step"], top["headline"]),
            textcoords="offset points",
            xytext=(6, 8),
            color="#c44e52",
        )
    if 0 in steps:
        ax.axhline(values[steps.index(0)], color="#999999", linestyle=":", label="base (step 0)")
        ax.legend(loc="lower right")
    ax.set_xlabel("training step")
    ax.set_ylabel("official score")
    ax.set_title(bench)
    ax.grid(alpha=0.3)
    safe = "".join(ch if ch.isalnum() or ch in "-_" else "_" for ch in bench)
    return _save(fig, path / "plots" / f"curve_{safe}.png")


def write_page(path: Path) -> Path:
    """``curve.html`` in watch directory ``path`` (plots embedded), replaced whole."""
    page = path / PAGE
    title = f"Watch {path.name}: scores by training step"
    write_text_atomic(page, to_html(title, sections(path), path))
    return page
