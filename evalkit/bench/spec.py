"""The pinned benchmark spec: one typed model per ``benchmarks/<name>.yaml``.

Everything that moves a score is pinned in one reviewed YAML file: where the data comes
from and how a row becomes a ``Sample`` (the models of ``evalkit.bench.layout``), how
frames are sampled, which prompt and answer rule are used, and how the per-sample scores
are combined into the OFFICIAL number (never a pooled mean where the benchmark defines
something else). Unknown keys are errors everywhere.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, PrivateAttr, model_validator

from evalkit import tasks
from evalkit.bench.layout import DataSource, FieldMap, FileSpec, MediaPath
from evalkit.registry import normalize_name
from evalkit.video.types import FrameSpec, ImageSpec

_STRICT = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)

FETCH_ONLY = ("archives", "media_elsewhere", "size", "gated", "by_hand")
"""``DataSource`` fields that say how a release is fetched, not what is scored."""


class OfficialPrompt(BaseModel):
    """The exact prompt a benchmark's official evaluation sends, pinned verbatim.

    ``template`` is a Jinja2 string rendered with ``question``, ``options`` (a list of
    (letter, text) pairs), ``letters`` ("A, B, C or D"), ``fields`` (the sample's fields)
    and ``sample``; the official wording is kept as is, including its oddities, and so is
    the start of the assistant's turn where the official code pre-fills it.
    """

    model_config = _STRICT
    template: str
    """The user prompt, verbatim from the official code, as a Jinja2 template."""
    system: str | None = None
    """The official system prompt, if the evaluation sends one."""
    thinking: bool = False
    """The official prompt asks for reasoning first (its token budget is the thinking one)."""
    assistant_prefix: str | None = Field(default=None, min_length=1)
    """Text the official code writes at the start of the assistant's turn for the model to
    continue (MLVU's "Best Option: ("), verbatim. Engines send it after the generation
    prompt; the reply is the continuation only, and the rules are given prefix +
    continuation (``evalkit.scoring.prefill``). None: the model starts its turn itself."""
    source: str
    """The file (repository and path) the wording comes from (and the prefix, if any)."""


class PromptSpec(BaseModel):
    """Which prompt template renders a sample (templates live in ``prompts/``)."""

    model_config = _STRICT
    template: str = "multiple_choice"
    """Template name (one per task type family)."""
    variant: Literal["official", "plain", "thinking"] = "plain"
    """The pinned variant: the benchmark's official prompt, evalkit's direct answer, or
    evalkit's reasoning-then-answer."""
    instruction: str | None = None
    """The benchmark's own answer instruction, in our words, when it has a fixed one."""
    official: dict[str, OfficialPrompt] = Field(default_factory=dict)
    """Task type (or ``"*"`` for all) -> the official prompt, where the benchmark's own
    evaluation prescribes one (the ``official`` variant renders it)."""


class ScoringSpec(BaseModel):
    """Which answer-extraction rule gives the headline number (``evalkit.scoring.rules``)."""

    model_config = _STRICT
    rule: Literal["official", "evalkit"] = "official"
    """Headline rule: the benchmark's official one where it has one, else evalkit's robust
    rule. Every other rule of the task type is scored too (extraction sensitivity)."""
    official: dict[str, str] = Field(default_factory=dict)
    """Task type -> registered rule name of the official evaluation, where it is not the
    rule named after the benchmark (its normalised name, e.g. ``videomme``)."""


class CrossVariantSpec(BaseModel):
    """A headline over several variants, each run separately (TempCompass's "Avg. All"
    over its four formats); computed by ``evalkit.bench.aggregations.variants``."""

    model_config = _STRICT
    name: str
    """Label of the combined number (``avg_all``)."""
    variants: list[str]
    """The variants combined (``base`` = the spec without a variant)."""
    how: Literal["pooled", "mean"] = "pooled"
    """``pooled``: accuracy over all their questions; ``mean``: mean of their numbers."""
    source: str
    """Where the benchmark defines the combined number."""


class AggregationSpec(BaseModel):
    """The official aggregate, by name from the aggregation registry."""

    model_config = _STRICT
    name: str = "mean"
    """Registered aggregation (``mean``, ``macro_mean``, ``mbin``, ...) or an adapter
    ``"module:function"``."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Keyword arguments of the aggregation (e.g. ``field: task``)."""
    breakdowns: list[str] = Field(default_factory=list)
    """``Sample.fields`` names to report per-group values for."""
    source: str
    """Where the official rule is defined (paper section, repository file)."""
    across_variants: CrossVariantSpec | None = None
    """A headline combining several variants' runs, where the benchmark publishes one."""


class JudgeSpec(BaseModel):
    """The default LLM judge of a judged benchmark (used only when a judge engine is
    configured; without one, judged samples are reported as not scored)."""

    model_config = _STRICT
    model: str
    """The judge model the benchmark's authors used (``gpt-4o-2024-11-20``)."""
    prompt: str = "judge"
    """Judge prompt template in ``prompts/``."""
    source: str
    """Where the benchmark prescribes this judge."""


class GenerationDefaults(BaseModel):
    """Decoding settings the reference numbers were produced with."""

    model_config = _STRICT
    greedy: bool = True
    """Greedy decoding (temperature 0)."""
    max_tokens: int = 128
    """Maximum new tokens for the plain prompt variant."""
    max_tokens_thinking: int = 4096
    """Maximum new tokens for the thinking variant (and an official prompt that thinks)."""
    temperature: float | None = None
    """Sampling temperature, where the reference numbers were sampled (``greedy: false``)."""
    top_p: float | None = None
    """Nucleus sampling mass, where the reference numbers were sampled (None = 1.0)."""
    top_k: int | None = None
    """Top-k cut-off, where the reference numbers were sampled (None = off)."""

    @model_validator(mode="after")
    def _greedy_or_sampled(self) -> GenerationDefaults:
        sampled = [k for k in ("temperature", "top_p", "top_k") if getattr(self, k) is not None]
        if self.greedy and sampled:
            raise ValueError(f"greedy decoding takes no {', '.join(sampled)}; set greedy: false")
        if not self.greedy and not self.temperature:
            raise ValueError("greedy: false needs the temperature > 0 the authors sampled with")
        return self


class ReferenceScore(BaseModel):
    """A published number to reproduce, with where it was published."""

    model_config = _STRICT
    model: str
    """Model name as published."""
    value: float
    """The published value, in percent."""
    metric: str = "overall"
    """``overall`` or ``<breakdown field>/<group>`` (e.g. ``duration/long``)."""
    variant: str | None = None
    """Spec variant the number belongs to (``with_subtitles``), None = the base spec."""
    settings: str = ""
    """Frames, resolution and prompt the authors used, as they state them."""
    source: str
    """URL or paper table the number comes from (required)."""
    data_commit: str | None = None
    """The commit of ``data.hf_dataset`` the number was measured on, where its authors
    say (``evalkit repro`` names a run that read another)."""

    @model_validator(mode="after")
    def _has_source(self) -> ReferenceScore:
        if not self.source.strip():
            raise ValueError("a reference score needs its source (URL or paper table)")
        return self


class BenchmarkSpec(BaseModel):
    """A benchmark pinned in one reviewed file: data, mapping, frames, prompt, scoring."""

    model_config = _STRICT
    name: str
    """Display name (``Video-MME``)."""
    aliases: list[str] = Field(default_factory=list)
    """Other names it is looked up by; lookup ignores case and punctuation. ``ALIAS:VARIANT``
    makes ALIAS stand for one of its variants (other tools' task names, e.g. lmms-eval's
    ``videomme_w_subtitle:with_subtitles``)."""
    description: str = ""
    """One line on what it measures."""
    citation: str
    """Paper reference (title, venue/arXiv id)."""
    data: DataSource
    """Where the official release comes from."""
    layout: str
    """The expected folder layout, shown in errors about missing files."""
    files: list[FileSpec]
    """Annotation files read, in order."""
    mapping: FieldMap
    """Row -> Sample."""
    video: MediaPath | None = None
    """How a row names its video."""
    image: MediaPath | None = None
    """How a row names an extra image (appended after the video)."""
    subtitles: MediaPath | None = None
    """How a row names its subtitle file (path put in ``Sample.fields["subtitle_path"]``)."""
    frames: FrameSpec = Field(default_factory=FrameSpec)
    """Temporal sampling and resizing of the video."""
    images: ImageSpec = Field(default_factory=ImageSpec)
    """Resizing of still images."""
    prompt: PromptSpec = Field(default_factory=PromptSpec)
    """Prompt template and variant."""
    scorers: dict[str, str] = Field(default_factory=dict)
    """Task type -> scorer name, where it is not the task type's default scorer."""
    scoring: ScoringSpec = Field(default_factory=ScoringSpec)
    """The headline extraction rule."""
    aggregation: AggregationSpec
    """The official aggregate and its breakdowns."""
    generation: GenerationDefaults = Field(default_factory=GenerationDefaults)
    """Decoding defaults."""
    judge: JudgeSpec | None = None
    """Default LLM judge for judged task types (open-ended, captioning)."""
    adapter: str | None = None
    """``"module:function"`` hook for row rules YAML cannot express: ``fn(row)`` returns
    the row to map (computed fields added), a finished ``Sample``, or None to skip the
    row. ``module`` is looked up next to the YAML first (``benchmarks/<module>.py``)."""
    variants: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Named overrides of this spec (``with_subtitles``, ``test``), deep-merged onto it."""
    references: list[ReferenceScore] = Field(default_factory=list)
    """Published numbers for reproduction checks."""
    variant: str | None = None
    """Set on a spec produced by :meth:`with_variant`; None for the base spec."""
    _source: str | None = PrivateAttr(default=None)

    @property
    def source_path(self) -> str | None:
        """The YAML file this spec was loaded from (adapters are looked up beside it)."""
        return self._source

    def located(self, path: str) -> BenchmarkSpec:
        """Record the YAML file this spec came from; returns self."""
        self._source = path
        return self

    @property
    def key(self) -> str:
        """Normalised lookup key of the name."""
        return normalize_name(self.name)

    @property
    def label(self) -> str:
        """Its one name in a run, its results file and every message: ``NAME``, or
        ``NAME:VARIANT`` for a variant (as ``--bench`` spells it)."""
        return f"{self.name}:{self.variant}" if self.variant else self.name

    @property
    def task_types(self) -> list[str]:
        """Task types its samples can have."""
        m = self.mapping
        return sorted(set(m.task_type_map.values())) if m.task_type_field else [m.task_type]

    def official_rule(self, task_type: str) -> str | None:
        """The registered official rule for ``task_type``, or None if there is none."""
        from evalkit.errors import ConfigError
        from evalkit.scoring.rules import has_rule

        kind = tasks.canonical(task_type)
        named = {tasks.canonical(k): v for k, v in self.scoring.official.items()}
        if kind in named:  # named in the YAML: it must exist, never a silent fallback
            if not has_rule(named[kind], kind):
                raise ConfigError(
                    f"{self.name}: scoring.official names rule {named[kind]!r} for {kind}, "
                    "which is not registered (evalkit/scoring/rules/)"
                )
            return named[kind]
        return self.key if has_rule(self.key, kind) else None

    def headline_rule(self, task_type: str, choice: str | None = None) -> str:
        """The rule whose verdict is the headline number for samples of ``task_type``.

        ``choice`` overrides ``scoring.rule``: ``official+judge`` is the official rule with
        the authors' LLM judge for the replies it cannot decide (``<rule>+judge``) where the
        benchmark's code does that for this task type, else the official rule.
        """
        from evalkit.scoring.rules import has_rule

        pick = choice or self.scoring.rule
        if pick == "evalkit":
            return "evalkit"
        official = self.official_rule(task_type)
        if pick == "official+judge" and official and has_rule(f"{official}+judge", task_type):
            return f"{official}+judge"
        return official or "evalkit"

    @model_validator(mode="after")
    def _aliased_variants_exist(self) -> BenchmarkSpec:
        for alias in self.aliases:
            variant = alias.partition(":")[2]
            if variant and variant not in self.variants:
                known = ", ".join(sorted(self.variants)) or "none"
                raise ValueError(f"alias {alias!r} names no variant of it (variants: {known})")
        return self

    @model_validator(mode="after")
    def _official_prompt_for_every_task_type(self) -> BenchmarkSpec:
        official = self.prompt.official
        missing = [t for t in self.task_types if t not in official and "*" not in official]
        if self.prompt.variant == "official" and missing:
            raise ValueError(
                f"prompt.variant is official but prompt.official has no prompt for "
                f"{', '.join(missing)}: add one (or a '*' entry), or pin plain/thinking"
            )
        return self

    def recorded(self) -> dict[str, Any]:
        """The spec as a run records and hashes it (``spec_hash``, the manifest's specs):
        its dump without the ``data`` fields that only say how the release is fetched
        (:data:`FETCH_ONLY`) and the data commit a reference names (reports read the live
        references): neither changes a result, and runs made before those fields existed
        keep their fingerprint."""
        out = self.model_dump(
            mode="json",
            exclude={"data": set(FETCH_ONLY), "references": {"__all__": {"data_commit"}}},
        )
        for override in out.get("variants", {}).values():  # a variant's own archives too
            data = override.pop("data", None)
            kept = {k: v for k, v in (data or {}).items() if k not in FETCH_ONLY}
            if kept:
                override["data"] = kept
        return out

    def with_variant(self, variant: str | None) -> BenchmarkSpec:
        """This spec with the named variant's overrides applied (None = unchanged)."""
        if not variant:
            return self
        if variant not in self.variants:
            known = ", ".join(sorted(self.variants)) or "none"
            raise KeyError(f"{self.name} has no variant {variant!r} (variants: {known})")
        data = _deep_merge(self.model_dump(exclude_unset=False), self.variants[variant])
        data["variant"] = variant
        out = BenchmarkSpec.model_validate(data)
        out._source = self._source
        return out


def _deep_merge(base: dict[str, Any], over: dict[str, Any]) -> dict[str, Any]:
    out = dict(base)
    for k, v in over.items():
        if isinstance(v, dict) and isinstance(out.get(k), dict):
            out[k] = _deep_merge(out[k], v)
        else:
            out[k] = v
    return out
