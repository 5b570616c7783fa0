"""Prompt rendering: Jinja2 templates in ``prompts/``, one per task type, two variants.

``render(sample, variant)`` picks ``prompts/<canonical task type>.jinja`` (or the
benchmark's own template) and renders it with StrictUndefined, so a template that
names a variable the sample does not have is an error, never an empty string.
Variants: ``plain`` (answer directly) and ``thinking`` (reason inside <think>...</think>,
then the final answer inside <answer>...</answer>).
"""

from __future__ import annotations

import os
from functools import lru_cache
from pathlib import Path
from typing import Any

import jinja2

from evalkit.errors import ConfigError
from evalkit.sample import Sample

VARIANTS = ("plain", "thinking")
# prompts/ sits at the repository root (editable installs); EVALKIT_PROMPTS overrides it.
PROMPTS_DIR = Path(
    os.environ.get("EVALKIT_PROMPTS", Path(__file__).resolve().parent.parent / "prompts")
)


@lru_cache(maxsize=4)
def environment(directory: str = str(PROMPTS_DIR)) -> jinja2.Environment:
    """The Jinja2 environment over a prompts directory (StrictUndefined, no autoescape)."""
    return jinja2.Environment(
        loader=jinja2.FileSystemLoader(directory),
        undefined=jinja2.StrictUndefined,
        autoescape=False,
        keep_trailing_newline=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )


def letter_range(letters: list[str]) -> str:
    """ "A", "A or B", "A, B, C or D" — exactly the letters a question has."""
    if len(letters) <= 1:
        return "".join(letters)
    return f"{', '.join(letters[:-1])} or {letters[-1]}"


def template_name(sample: Sample, template: str | None = None) -> str:
    """The template file for a sample: an explicit name, else its canonical task type."""
    if template:
        return template if template.endswith(".jinja") else f"{template}.jinja"
    from evalkit.scoring import canonical_task_type

    return f"{canonical_task_type(sample.task_type)}.jinja"


def render_template(name: str, **variables: Any) -> str:
    """Render one template file by name with explicit variables."""
    try:
        tpl = environment().get_template(name)
    except jinja2.TemplateNotFound:
        raise ConfigError(f"prompt template {name!r} not found in {PROMPTS_DIR}") from None
    return tpl.render(**variables).strip()


def render(sample: Sample, variant: str = "plain", template: str | None = None) -> str:
    """The user prompt text for ``sample`` in the given variant ("plain" or "thinking")."""
    if variant not in VARIANTS:
        raise ConfigError(f"unknown prompt variant {variant!r}; use one of {', '.join(VARIANTS)}")
    name = template_name(sample, template)
    try:
        return render_template(
            name,
            sample=sample,
            question=sample.question.strip(),
            options=list(zip(sample.letters, sample.options, strict=True)),
            letters=letter_range(sample.letters),
            fields=sample.fields,
            variant=variant,
            thinking=variant == "thinking",
        )
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"sample {sample.id}: prompt template {name}: {exc}") from None
