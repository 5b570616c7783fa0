"""Report figures as PNG files (matplotlib, Agg backend, imported only when plotting)."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from .replicas import Lane
from .timeline import in_engine, occupancy, spans, utilisation

if TYPE_CHECKING:
    from .model import RunReport
    from .uncertainty import Comparison

_STAGES = (  # (label, start stamp, end stamp, colour)
    ("IO", "io_start", "io_end", "#4c72b0"),
    ("queued", "io_end", "submitted", "#dd8452"),
    ("prefill", "submitted", "first_token", "#55a868"),
    ("decode", "first_token", "finished", "#8fd19e"),
)


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")  # no display on servers and in CI
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.tight_layout()
    fig.savefig(path, format="png", dpi=110)
    _pyplot().close(fig)
    return path


def empty_reason(values: list[float | None], why_unscored: str) -> str | None:
    """Why a bar chart of ``values`` shows no bar (every value 0 or unscored), else None."""
    if any(v for v in values):
        return None
    if all(v is None for v in values):
        return f"no bars: nothing was scored ({why_unscored})"
    if all(v is not None for v in values):
        return "no bars: every score is 0.00"
    return f"no bars: every score is 0.00 or unscored ({why_unscored})"


def scores_empty(run: RunReport) -> str | None:
    """Why the run's scores chart is empty (every benchmark at 0 or unscored), else None."""
    benches = list(run.benchmarks.values())
    unscored = sum(b.counts.unscored for b in benches)
    failed = sum(b.counts.failed for b in benches)
    parts = [f"{unscored} unscored: judged, no --judge-model"] if unscored else []
    parts += [f"{failed} failed"] if failed else []
    return empty_reason([b.overall for b in benches], ", ".join(parts) or "no samples")


def _say_empty(ax: Any, reason: str | None) -> None:
    """Write why the axes hold no bar across them, so an empty chart is never mute."""
    if reason:
        text = reason.replace(" (", "\n(", 1)  # two lines: fits a one-benchmark chart
        box = {"facecolor": "#fff3cd", "edgecolor": "#c9a227"}
        ax.text(0.5, 0.5, text, transform=ax.transAxes, ha="center", va="center", bbox=box)


def plot_scores(run: RunReport, path: Path) -> Path:
    """Official number (± standard error) per benchmark, with matched reference scores."""
    plt = _pyplot()
    names = list(run.benchmarks)
    fig, ax = plt.subplots(figsize=(max(4.0, 1.3 * len(names) + 2), 3.8))
    xs = range(len(names))
    vals = [run.benchmarks[n].overall or 0.0 for n in names]
    errs = [run.benchmarks[n].stderr or 0.0 for n in names]
    ax.bar(xs, vals, 0.6, yerr=errs, capsize=4, color="#4c72b0", label=run.run_id)
    labelled = False
    for x, n in zip(xs, names, strict=True):
        for ref in (r for r in run.benchmarks[n].references if r.metric == "overall"):
            ax.hlines(
                ref.reference,
                x - 0.35,
                x + 0.35,
                colors="#c44e52",
                linewidth=2.5,
                label=None if labelled else "reference",
            )
            labelled = True
        if run.benchmarks[n].overall is None:
            ax.text(x, 1, "unscored", ha="center", va="bottom", fontsize=8, rotation=90)
        elif run.benchmarks[n].overall == 0:  # a bar of height 0: say it is one
            ax.text(x, 1, "0.00", ha="center", va="bottom", fontsize=8)
    _say_empty(ax, scores_empty(run))
    ax.set_xticks(list(xs), names, rotation=20, ha="right")
    ax.set_ylabel("score (%)")
    ax.set_ylim(0, 100)
    ax.set_title(f"{run.run_id}: official scores vs reference")
    ax.legend(loc="upper right", fontsize=8)
    return _save(fig, path)


def compare_empty(comps: list[Comparison]) -> str | None:
    """Why the A-vs-B bars are empty (both runs at 0 or unscored everywhere), else None."""
    values = [v for c in comps for v in (c.a, c.b)]
    return empty_reason(values, "unscored or failed in both runs")


def plot_compare(a: RunReport, b: RunReport, comps: list[Comparison], path: Path) -> Path:
    """Run A vs run B per benchmark, and B - A with its paired 95% interval."""
    plt = _pyplot()
    names = [c.benchmark for c in comps]
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(max(7.0, 1.6 * len(names) + 4), 3.8))
    xs = list(range(len(names)))
    ax1.bar([x - 0.2 for x in xs], [c.a or 0.0 for c in comps], 0.4, label=f"A {a.run_id}")
    ax1.bar([x + 0.2 for x in xs], [c.b or 0.0 for c in comps], 0.4, label=f"B {b.run_id}")
    ax1.set_xticks(xs, names, rotation=20, ha="right")
    ax1.set_ylabel("score (%)")
    ax1.set_ylim(0, 100)
    ax1.legend(fontsize=7)
    ax1.set_title("run A vs run B")
    _say_empty(ax1, compare_empty(comps))
    for x, c in zip(xs, comps, strict=True):
        if c.delta is None:
            continue
        lo, hi = c.ci_low if c.ci_low is not None else c.delta, c.ci_high or c.delta
        colour = (
            "#55a868"
            if c.significant and c.delta > 0
            else ("#c44e52" if c.significant else "#7f7f7f")
        )
        ax2.errorbar(
            [x], [c.delta], yerr=[[c.delta - lo], [hi - c.delta]], fmt="o", color=colour, capsize=5
        )
    if all(c.delta is None for c in comps):
        shared = any(c.n_common for c in comps)
        why = "nothing scored in both runs" if shared else "the runs share no sample id"
        _say_empty(ax2, f"no delta ({why})")
    ax2.axhline(0.0, color="black", linewidth=0.8)
    ax2.set_xticks(xs, names, rotation=20, ha="right")
    ax2.set_ylabel("B - A (points), 95% paired bootstrap")
    ax2.set_title("delta (grey = not significant)")
    return _save(fig, path)


def plot_timeline(run: RunReport, path: Path, max_rows: int = 2000) -> Path:
    """Per-sample stage bars over time, and requests in the engine over time."""
    plt = _pyplot()
    all_spans = [s for b in run.benchmarks.values() for s in spans(b.records, b.name)]
    all_spans.sort(key=lambda s: s.io_start or 0.0)
    t0 = min((s.io_start for s in all_spans if s.io_start is not None), default=0.0)
    shown = all_spans[:max_rows]
    fig, (ax1, ax2) = plt.subplots(
        2, 1, figsize=(9, 6), sharex=True, gridspec_kw={"height_ratios": [3, 1]}
    )
    for label, a, b, colour in _STAGES:
        bars = [
            (row, getattr(s, a) - t0, getattr(s, b) - getattr(s, a))
            for row, s in enumerate(shown)
            if getattr(s, a) is not None and getattr(s, b) is not None
        ]
        if bars:
            rows, starts, widths = zip(*bars, strict=True)
            ax1.barh(
                rows,
                [max(w, 0.0) for w in widths],
                left=starts,
                height=0.8,
                color=colour,
                label=label,
            )
    failed = [row for row, s in enumerate(shown) if s.status == "failed"]
    if failed:
        ax1.scatter(
            [(shown[r].end or t0) - t0 for r in failed],
            failed,
            marker="x",
            color="#c44e52",
            label="failed",
            zorder=3,
        )
    ax1.set_ylabel("sample (by IO start)")
    ax1.invert_yaxis()
    ax1.legend(loc="upper right", fontsize=8, ncol=5)
    ax1.yaxis.get_major_locator().set_params(integer=True)
    title = f"{run.run_id}: pipeline stages per sample"
    if len(all_spans) > max_rows:
        title += f" (first {max_rows} of {len(all_spans)})"
    ax1.set_title(title)
    steps = occupancy(in_engine(all_spans))
    if steps:
        ax2.step([t - t0 for t, _ in steps], [n for _, n in steps], where="post")
    u = utilisation(all_spans)
    if u is not None:
        ax2.set_title(
            f"requests in the engine: busy {100 * u.busy_fraction:.0f}% of wall time, "
            f"mean {u.mean_in_flight:.2f}, max {u.max_in_flight}",
            fontsize=9,
        )
    ax2.set_ylabel("in engine")
    ax2.set_xlabel("seconds since the first IO start")
    return _save(fig, path)


def plot_replicas(run: RunReport, run_lanes: list[Lane], path: Path) -> Path:
    """One lane per replica: when it was busy, and its idle tail up to the run's end."""
    plt = _pyplot()
    wall = max((ln.end_s for ln in run_lanes if ln.end_s is not None), default=0.0)
    fig, ax = plt.subplots(figsize=(9, 1.2 + 0.45 * len(run_lanes)))
    for row, ln in enumerate(run_lanes):
        ax.broken_barh([(a, b - a) for a, b in ln.segments], (row - 0.35, 0.7), color="#4c72b0")
        if ln.end_s is not None and wall > ln.end_s:
            ax.broken_barh(
                [(ln.end_s, wall - ln.end_s)],
                (row - 0.35, 0.7),
                facecolor="#f2f2f2",
                edgecolor="#aaaaaa",
                hatch="//",
            )
        ax.text(wall, row, f" n={ln.samples}", va="center", fontsize=8)
    ax.set_yticks(range(len(run_lanes)), [ln.replica for ln in run_lanes])
    ax.set_ylim(len(run_lanes) - 0.5, -0.5)
    ax.set_xlabel("seconds since the first IO start (busy: blue; idle tail: hatched)")
    ax.set_title(f"{run.run_id}: samples per replica (right) and busy time", fontsize=10)
    return _save(fig, path)
