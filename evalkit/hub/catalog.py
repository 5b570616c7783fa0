"""``evalkit bench fetch --list``: for every benchmark, how its release is had (fetched
whole, annotations only, by hand), where from, and its size as a public source documents
it; all read from the specs' ``data`` sections."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from evalkit.bench.spec import BenchmarkSpec


@dataclass(frozen=True)
class CatalogRow:
    """One benchmark's line."""

    name: str
    how: str
    source: str
    media: str
    size: str


def how_fetched(spec: BenchmarkSpec) -> str:
    """``whole`` (annotations and media from the Hub), ``annotations only`` (the media
    come from elsewhere), ``by hand`` (nothing is fetched) or ``generated``."""
    d = spec.data
    if not d.hf_dataset:
        return "generated" if d.homepage is None else "by hand"
    if d.by_hand:
        return "by hand"
    return "annotations only" if d.media_elsewhere else "whole"


def row(spec: BenchmarkSpec) -> CatalogRow:
    """The catalog's line for ``spec``."""
    d = spec.data
    how = how_fetched(spec)
    if how == "generated":
        source = "generated here: evalkit synth"
    elif d.hf_dataset:
        source = d.hf_dataset + (" (gated)" if d.gated else "")
    else:
        source = d.homepage or d.local_path or "-"
    if how == "by hand":
        media = d.by_hand or "annotations and media from the homepage"
    elif d.media_elsewhere:
        media = f"from {d.media_elsewhere}"
    elif d.archives:
        media = "in " + ", ".join(d.archives)
    elif how == "whole":
        media = "loose files at the layout's paths"
    else:
        media = "-"
    return CatalogRow(spec.name, how, source, " ".join(media.split()), d.size or "-")


def catalog_lines(specs: Iterable[BenchmarkSpec]) -> list[str]:
    """The table within the terminal's width, then what its columns mean."""
    from evalkit.textwidth import as_lines, table, terminal_width, wrap

    rows = [row(s) for s in specs]
    width = terminal_width()
    headers = ["benchmark", "fetched", "source", "media", "size"]
    cells = [[r.name, r.how, r.source, r.media, r.size] for r in rows]
    title = f"where each benchmark comes from ({len(rows)})"
    lines = as_lines(table(headers, cells, width, title=title, whole=("size",)), width)
    legend = (
        "fetched: whole = annotations and media from the Hub, only the media of the samples "
        "run; annotations only = the media come from where the media column says (the "
        "missing ones are listed, pass them with --video-root); by hand = lay the release "
        "out yourself and pass --data-root. size: as a public source documents it (- : "
        "none found); `evalkit bench fetch NAME` says what it will download before it does."
    )
    return lines + wrap(legend, width)
