"""``evalkit bench fetch --list``: for every benchmark, how its release is had (fetched
whole, annotations only, by hand), where from, and its size as a public source documents
it; all read from the specs' ``data`` sections."""

from __future__ import annotations

import sys
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


def print_catalog(specs: Iterable[BenchmarkSpec]) -> None:
    """The table on stdout, then what its columns mean."""
    from rich.console import Console
    from rich.table import Table

    rows = [row(s) for s in specs]
    table = Table(title=f"where each benchmark comes from ({len(rows)})", title_justify="left")
    for h in ("benchmark", "fetched", "source", "media", "size"):
        table.add_column(h, overflow="fold", no_wrap=h in ("benchmark", "size"))
    for r in rows:
        table.add_row(r.name, r.how, r.source, r.media, r.size)
    width = Console().width if sys.stdout.isatty() else 160
    Console(width=width).print(table)
    print(
        "fetched: whole = annotations and media from the Hub, only the media of the samples "
        "run; annotations only = the media come from where the media column says (the "
        "missing ones are listed, pass them with --video-root); by hand = lay the release "
        "out yourself and pass --data-root. size: as a public source documents it (- : "
        "none found); `evalkit bench fetch NAME` says what it will download before it does."
    )
