"""Renders a spec's pinned official prompt strictly, for the official-prompt tests."""

from __future__ import annotations

import jinja2

from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample


def render_official(
    benchmark: str, task_type: str, sample: Sample, variant: str | None = None
) -> str:
    """The spec's official prompt for ``task_type`` (or "*") rendered with StrictUndefined."""
    spec = get_benchmark(benchmark).with_variant(variant)
    assert spec.prompt.variant == "official"
    official = spec.prompt.official.get(task_type) or spec.prompt.official["*"]
    env = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    options = list(zip(sample.letters, sample.options, strict=True))
    letters = ", ".join(sample.letters[:-1]) + " or " + sample.letters[-1] if options else ""
    return env.from_string(official.template).render(
        question=sample.question,
        options=options,
        letters=letters,
        fields=sample.fields,
        sample=sample,
    )
