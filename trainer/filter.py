"""Pass-rate filtering: keep training items the current model solves sometimes, not always/never.

For each item, k responses are sampled (one engine request with ``n=k``) and scored by the
evalkit scorer of its task type; the pass rate is the mean score. Items with 0 < rate < 1
carry a GRPO learning signal; the rest would give all-equal rewards. Writes the kept rows
verbatim (JSONL), ``<out>.hist.json`` (items per number of passes) and ``<out>.hist.png``.

The engine is called directly with bounded concurrency rather than through
:class:`evalkit.pipeline.Pipeline`: the pipeline's sink scores one text per sample into a
run store, while filtering needs all k texts scored and no run directory.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.engines.base import Engine, Request, SamplingParams
from evalkit.sample import Sample


@dataclass
class FilterReport:
    """Pass rate per item, which were kept, and where the outputs went."""

    rates: list[float]
    kept: list[int]
    histogram: dict[int, int]
    out: Path | None = None


def keep(rate: float) -> bool:
    """0 < pass rate < 1: the model sometimes, but not always, gets it right."""
    return 0.0 < rate < 1.0


async def _rates(
    samples: Sequence[Sample],
    engine: Engine,
    build: Callable[[Sample], Request],
    k: int,
    sampling: SamplingParams,
    concurrency: int,
) -> list[float]:
    from dataclasses import replace

    from evalkit.scoring import score

    gate = asyncio.Semaphore(concurrency)

    async def one(i: int, sample: Sample) -> float:
        async with gate:
            request = await asyncio.to_thread(build, sample)
            request = replace(request, sampling=replace(sampling, n=k, seed=sampling.seed or i))
            done = await engine.generate(request)
        if len(done.texts) != k:
            raise RuntimeError(
                f"sample {sample.id}: engine returned {len(done.texts)} texts, not {k}"
            )
        values = [score(sample, text).value for text in done.texts]
        return sum(float(v or 0.0) for v in values) / k

    return list(await asyncio.gather(*(one(i, s) for i, s in enumerate(samples))))


def pass_rates(
    samples: Sequence[Sample],
    engine: Engine,
    build: Callable[[Sample], Request],
    k: int,
    sampling: SamplingParams | None = None,
    concurrency: int = 8,
) -> list[float]:
    """Mean evalkit score over ``k`` sampled responses, per sample."""
    if k < 1:
        raise ValueError(f"k must be >= 1, got {k}")
    params = sampling or SamplingParams(temperature=1.0)
    return asyncio.run(_rates(samples, engine, build, k, params, concurrency))


def histogram(rates: Sequence[float], k: int) -> dict[int, int]:
    """Items per number of passes 0..k (pass rate x k, rounded)."""
    counts = dict.fromkeys(range(k + 1), 0)
    for r in rates:
        counts[round(r * k)] += 1
    return counts


def write_outputs(
    rows: Sequence[dict[str, Any]], rates: Sequence[float], k: int, out: str | Path
) -> FilterReport:
    """Kept rows (JSONL), the histogram as JSON and as a PNG (matplotlib, Agg)."""
    out = Path(out)
    out.parent.mkdir(parents=True, exist_ok=True)
    kept = [i for i, r in enumerate(rates) if keep(r)]
    out.write_text("".join(json.dumps(rows[i], sort_keys=True) + "\n" for i in kept))
    hist = histogram(rates, k)
    summary = {"k": k, "items": len(rates), "kept": len(kept), "passes_histogram": hist}
    out.with_suffix(".hist.json").write_text(json.dumps(summary, indent=2) + "\n")
    _plot(hist, k, len(kept), out.with_suffix(".hist.png"))
    return FilterReport(list(rates), kept, hist, out)


def _plot(hist: dict[int, int], k: int, n_kept: int, path: Path) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6, 3.5))
    xs = list(hist)
    colours = ["tab:green" if 0 < x < k else "tab:gray" for x in xs]
    ax.bar(xs, [hist[x] for x in xs], color=colours)
    ax.set_xlabel(f"passes out of k={k}")
    ax.set_ylabel("items")
    ax.set_title(f"pass-rate filter: {n_kept} of {sum(hist.values())} kept (green)")
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def run_filter(
    data: str | Path,
    model: str,
    k: int,
    out: str | Path,
    *,
    engine: str = "hf",
    temperature: float = 1.0,
    max_tokens: int = 256,
    video_root: str | None = None,
    cache_root: str | None = None,
    concurrency: int = 8,
) -> FilterReport:
    """``python -m evalkit.trainer filter``: load items, sample k each, keep 0 < rate < 1."""
    from evalkit import engines
    from evalkit.bench.files import read_rows
    from evalkit.cache import FrameCache
    from evalkit.engines.family import detect_family

    from .config import DataConfig
    from .data import TrainData, load_items

    items = load_items(data, video_root)
    rows = [row for _, row in read_rows(Path(data))]
    factor = detect_family(model).factor
    train = TrainData(items, DataConfig(shuffle=False), FrameCache(cache_root), 0, factor)
    build = train.request_builder(SamplingParams())
    eng = engines.build(engine, model)
    sampling = SamplingParams(max_tokens=max_tokens, temperature=temperature)
    try:
        rates = pass_rates([it.sample for it in items], eng, build, k, sampling, concurrency)
    finally:
        asyncio.run(eng.close())
    report = write_outputs(rows, rates, k, out)
    print(f"kept {len(report.kept)} of {len(rates)} items -> {out}")
    return report
