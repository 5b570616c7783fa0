"""Renders a spec's pinned official prompt strictly, for the official-prompt tests."""

from __future__ import annotations

import jinja2

from evalkit.bench.registry import get_benchmark
from evalkit.sample import Sample

# Two whitespace regimes: Jinja's defaults and evalkit's template settings (trim_blocks,
# lstrip_blocks, trailing newline dropped). A pinned string must read the same in both,
# so its newlines never hang on a block tag or at the very end.
_SETTINGS = (
    {"keep_trailing_newline": True},
    {"trim_blocks": True, "lstrip_blocks": True, "keep_trailing_newline": False},
)


def render_official(
    benchmark: str, task_type: str, sample: Sample, variant: str | None = None
) -> str:
    """The spec's official prompt for ``task_type`` (or "*") rendered with StrictUndefined."""
    spec = get_benchmark(benchmark).with_variant(variant)
    assert spec.prompt.variant == "official"
    official = spec.prompt.official.get(task_type) or spec.prompt.official["*"]
    letters = sample.letters
    variables = {
        "question": sample.question.strip(),
        "options": list(zip(letters, sample.options, strict=True)),
        "letters": ", ".join(letters[:-1]) + " or " + letters[-1] if len(letters) > 1 else "",
        "fields": sample.fields,
        "sample": sample,
    }
    texts = {
        jinja2.Environment(undefined=jinja2.StrictUndefined, **settings)  # type: ignore[arg-type]
        .from_string(official.template)
        .render(**variables)
        for settings in _SETTINGS
    }
    assert len(texts) == 1, f"whitespace-sensitive template: {texts}"
    return texts.pop()
