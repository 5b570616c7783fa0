"""Prompt rendering: evalkit's Jinja2 templates in ``prompts/`` and pinned official prompts.

Three variants. ``plain`` (answer directly) and ``thinking`` (reason inside
<think>...</think>, then the final answer inside <answer>...</answer>) render
``prompts/<canonical task type>.jinja`` (or the benchmark's own template); ``plain`` says
the benchmark's pinned ``prompt.instruction`` where it has one. ``official`` renders the
benchmark's pinned official prompt string (``prompt.official``) as written, with its
system prompt and, where the official code pre-fills the assistant's turn, that prefix.
Everything renders with StrictUndefined, so a template that names a variable the sample
does not have is an error, never an empty string.

:class:`PromptPlan` is the choice for one benchmark of a run (the pinned variant or the
run's override) and renders its samples.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from evalkit import tasks
from evalkit._layout import package_folder
from evalkit.errors import ConfigError
from evalkit.sample import Sample

if TYPE_CHECKING:
    from evalkit.bench.spec import BenchmarkSpec, OfficialPrompt

VARIANTS = ("plain", "thinking")
"""Variants rendered by evalkit's own templates."""
PROMPT_VARIANTS = ("official", *VARIANTS)
"""Every variant a run can ask for."""
# The package data evalkit.prompt_templates (the repository's prompts/ in a checkout,
# evalkit/prompt_templates/ in a wheel; see evalkit/_layout.py); EVALKIT_PROMPTS overrides it.
PROMPTS_DIR = Path(os.environ.get("EVALKIT_PROMPTS") or package_folder("evalkit.prompt_templates"))
_JINJA = {
    "undefined": jinja2.StrictUndefined,
    "autoescape": False,
    "keep_trailing_newline": False,
    "trim_blocks": True,
    "lstrip_blocks": True,
}


@lru_cache(maxsize=4)
def environment(directory: str = str(PROMPTS_DIR)) -> jinja2.Environment:
    """The Jinja2 environment over a prompts directory (StrictUndefined, no autoescape)."""
    return jinja2.Environment(loader=jinja2.FileSystemLoader(directory), **_JINJA)  # type: ignore[arg-type]


@lru_cache(maxsize=256)
def _compiled(source: str) -> jinja2.Template:
    # same whitespace rules as the files, no loader: a pinned string includes nothing
    return jinja2.Environment(**_JINJA).from_string(source)  # type: ignore[arg-type]


def letter_range(letters: list[str]) -> str:
    """ "A", "A or B", "A, B, C or D" — exactly the letters a question has."""
    if len(letters) <= 1:
        return "".join(letters)
    return f"{', '.join(letters[:-1])} or {letters[-1]}"


def template_name(sample: Sample, template: str | None = None) -> str:
    """The template file for a sample: an explicit name, else its task type's."""
    if template:
        return template if template.endswith(".jinja") else f"{template}.jinja"
    return tasks.get(sample.task_type).template_file


def render_template(name: str, **variables: Any) -> str:
    """Render one template file by name with explicit variables."""
    try:
        tpl = environment().get_template(name)
    except jinja2.TemplateNotFound:
        raise ConfigError(f"prompt template {name!r} not found in {PROMPTS_DIR}") from None
    return tpl.render(**variables).strip()


def _variables(sample: Sample) -> dict[str, Any]:
    """The variables every prompt (file or pinned string) is rendered with."""
    return {
        "sample": sample,
        "question": sample.question.strip(),
        "options": list(zip(sample.letters, sample.options, strict=True)),
        "letters": letter_range(sample.letters),
        "fields": sample.fields,
    }


def render(
    sample: Sample,
    variant: str = "plain",
    template: str | None = None,
    instruction: str | None = None,
) -> str:
    """The user prompt text for ``sample`` in evalkit's "plain" or "thinking" variant.

    ``instruction`` (a benchmark's pinned answer instruction) replaces the template's
    generic one in the plain variant; the thinking variant keeps its tag instruction.
    """
    if variant not in VARIANTS:
        raise ConfigError(f"unknown prompt variant {variant!r}; use one of {', '.join(VARIANTS)}")
    name = template_name(sample, template)
    try:
        return render_template(
            name,
            **_variables(sample),
            variant=variant,
            thinking=variant == "thinking",
            answer_instruction=instruction,
        )
    except jinja2.UndefinedError as exc:
        raise ConfigError(f"sample {sample.id}: prompt template {name}: {exc}") from None


def render_official(prompt: OfficialPrompt, sample: Sample) -> str:
    """A pinned official prompt for ``sample``, its wording exactly as written.

    Whitespace follows the file templates' rules (a block tag's own line and indent are
    dropped; one trailing newline, as a YAML ``|`` block adds, is dropped); nothing else
    is stripped or added.
    Variables are those of the file templates plus ``subtitles``: the timed lines
    attached by :func:`evalkit.bench.subtitles.with_subtitles` ([] when the video has no
    subtitle file; a subtitle file whose lines were never attached is an error).
    """
    fields = sample.fields
    if "subtitle_path" in fields and "subtitles" not in fields:
        raise ConfigError(
            f"sample {sample.id}: subtitles of {fields['subtitle_path']} were never attached "
            "(evalkit.bench.subtitles.with_subtitles) before rendering the official prompt"
        )
    try:
        return _compiled(prompt.template).render(
            **_variables(sample), subtitles=fields.get("subtitles", [])
        )
    except jinja2.UndefinedError as exc:
        raise ConfigError(
            f"sample {sample.id}: official prompt from {prompt.source}: {exc}"
        ) from None
    except jinja2.TemplateError as exc:
        raise ConfigError(f"official prompt from {prompt.source}: {exc}") from None


@dataclass(frozen=True)
class PromptPlan:
    """How one benchmark's samples are prompted: the variant in force and its pinned parts.

    Build it with :meth:`for_spec`; under ``official``, a task type without an official
    prompt is rendered with ``fallback`` (the benchmark's pinned evalkit variant).
    """

    variant: str = "plain"
    """The variant in force: official, plain or thinking."""
    template: str | None = None
    """evalkit template name (None: the template of each sample's task type)."""
    instruction: str | None = None
    """The benchmark's pinned answer instruction (plain variant)."""
    official: Mapping[str, OfficialPrompt] = field(default_factory=dict)
    """Task type (or "*") -> the pinned official prompt."""
    fallback: str = "plain"
    """evalkit variant for task types without an official prompt."""
    requested: str | None = None
    """The variant the run asked for, when it could not be honoured (no official prompt)."""

    @classmethod
    def for_spec(cls, spec: BenchmarkSpec, override: str | None = None) -> PromptPlan:
        """The plan of ``spec`` under the run's variant (None = the spec's pinned one)."""
        pinned = spec.prompt.variant
        if override is not None and override not in PROMPT_VARIANTS:
            raise ConfigError(
                f"unknown prompt variant {override!r}; use one of {', '.join(PROMPT_VARIANTS)}"
            )
        asked = override or pinned
        # the spec guarantees an official prompt for every task type when it pins official
        fallback = pinned if pinned != "official" else "plain"
        variant = asked
        if asked == "official" and not spec.prompt.official:
            variant = fallback
        return cls(
            variant=variant,
            # one template for a single-type spec; a mixed spec routes by task type
            template=spec.prompt.template if len(spec.task_types) == 1 else None,
            instruction=spec.prompt.instruction,
            official=dict(spec.prompt.official),
            fallback=fallback,
            requested=asked if variant != asked else None,
        )

    def official_for(self, task_type: str) -> OfficialPrompt | None:
        """The official prompt that renders ``task_type`` under this plan, if any."""
        if self.variant != "official":
            return None
        official = self.official
        return official.get(task_type) or official.get(_canonical(task_type)) or official.get("*")

    def variant_for(self, task_type: str) -> str:
        """The variant a sample of ``task_type`` is actually rendered in."""
        if self.variant != "official":
            return self.variant
        return "official" if self.official_for(task_type) else self.fallback

    def thinking(self, task_types: list[str]) -> bool:
        """Whether any of ``task_types`` is prompted to reason first (thinking budget)."""
        for t in task_types:
            prompt = self.official_for(t)
            if prompt.thinking if prompt else self.variant_for(t) == "thinking":
                return True
        return False

    def assistant_prefix(self, task_type: str) -> str | None:
        """The pre-filled start of the model's turn for ``task_type`` (official prompts only)."""
        prompt = self.official_for(task_type)
        return prompt.assistant_prefix if prompt is not None else None

    def render(self, sample: Sample) -> tuple[str, str | None]:
        """(user text, system prompt or None) for ``sample``."""
        prompt = self.official_for(sample.task_type)
        if prompt is not None:
            return render_official(prompt, sample), prompt.system
        variant = self.variant_for(sample.task_type)
        return render(sample, variant, self.template, self.instruction), None

    def describe(self, task_types: list[str]) -> dict[str, Any]:
        """What the run records of this plan (result_config, hence the fingerprint)."""
        out: dict[str, Any] = {"variant": self.variant}
        if self.requested:
            out["requested_variant"] = self.requested
        gaps = {t: self.fallback for t in task_types if self.variant_for(t) != self.variant}
        if gaps:
            out["fallback"] = gaps
        return out


def _canonical(task_type: str) -> str:
    return tasks.canonical(task_type)
