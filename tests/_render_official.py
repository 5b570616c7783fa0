"""Renders a spec's pinned official prompt the way OfficialPrompt documents its variables,
under both a bare StrictUndefined environment and evalkit's prompt environment (which
trims block lines), so a pinned template reads the same under either."""

from __future__ import annotations

import jinja2

from evalkit.bench.registry import get_benchmark
from evalkit.prompts import environment, letter_range
from evalkit.sample import Sample


def official_template(bench: str, variant: str | None = None, task_type: str = "*") -> str:
    """The pinned official template of a benchmark (after its variant's overrides)."""
    spec = get_benchmark(bench).with_variant(variant)
    return spec.prompt.official[task_type].template


def render_both(template: str, sample: Sample) -> list[str]:
    """The template rendered for ``sample`` under the two environments."""
    variables = {
        "question": sample.question,
        "options": list(zip(sample.letters, sample.options, strict=True)),
        "letters": letter_range(sample.letters),
        "fields": sample.fields,
        "sample": sample,
    }
    bare = jinja2.Environment(undefined=jinja2.StrictUndefined, autoescape=False)
    return [env.from_string(template).render(**variables) for env in (bare, environment())]
