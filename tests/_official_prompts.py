"""Renders a benchmark's pinned official prompt for the official-prompt tests.

The text is evalkit's own rendering (``evalkit.prompts.render_official``, what a run
sends), checked against a second rendering under Jinja's defaults (a block tag keeps its
line, a trailing newline is kept): a pinned string must read the same under both, so its
newlines never hang on a block tag or at the very end.
"""

from __future__ import annotations

import jinja2

from evalkit.bench.registry import get_benchmark
from evalkit.bench.spec import BenchmarkSpec
from evalkit.prompts import letter_range
from evalkit.prompts import render_official as render_pinned
from evalkit.sample import Sample


def render_official(
    bench: str | BenchmarkSpec, task_type: str, sample: Sample, variant: str | None = None
) -> str:
    """The official prompt of ``bench`` (a name or a spec) for ``task_type`` (or "*")."""
    spec = (get_benchmark(bench) if isinstance(bench, str) else bench).with_variant(variant)
    official = spec.prompt.official.get(task_type) or spec.prompt.official["*"]
    text = render_pinned(official, sample)
    # the variables OfficialPrompt documents, written out here rather than read from evalkit
    variables = {
        "question": sample.question.strip(),
        "options": list(zip(sample.letters, sample.options, strict=True)),
        "letters": letter_range(sample.letters),
        "fields": sample.fields,
        "sample": sample,
        "subtitles": sample.fields.get("subtitles", []),
    }
    bare = jinja2.Environment(undefined=jinja2.StrictUndefined, keep_trailing_newline=True)
    again = bare.from_string(official.template).render(**variables)
    assert again == text, f"whitespace-sensitive template: {again!r} != {text!r}"
    return text
