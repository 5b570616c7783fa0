"""Task types: the vocabulary that prompts, benchmarks and scorers share.

A task type names what a question asks for (``multiple_choice``, ``temporal_grounding``,
...). Its one registration says all the other layers need to know: the aliases data files
write it as, the prompt template that asks it, how a target written as text in a data file
becomes the value its scorer compares against, the scorer itself (a lazy ``"module:attr"``
reference, so naming a task type never imports a scorer) and whether an LLM judge scores
it. This module is a leaf (it imports nothing of evalkit's but the registry): the
prompts, the benchmark loaders and the scorers all ask it, none asks another for a name.
A new task type is one :func:`register` call.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from evalkit.registry import Registry, normalize_name, resolve_ref

ScorerFn = Callable[[str, Any, Any], Any]
"""``(prediction, target, sample) -> Score`` (``evalkit.scoring.router.ScorerFn``)."""
TargetFn = Callable[[str, int], Any]
"""``(answer text, number of options) -> target``; ValueError when the text is no answer."""


def resolve(ref: str | Callable[..., Any]) -> Callable[..., Any]:
    """The object a ``"module:attr"`` reference names (a callable is returned as it is)."""
    if not isinstance(ref, str):
        return ref
    obj: Callable[..., Any] = resolve_ref(ref)
    return obj


@dataclass(frozen=True)
class TaskType:
    """One task type: its name, aliases, prompt template, target parser, scorer, judge."""

    name: str
    scorer: str | ScorerFn
    """The scorer, or a lazy ``"module:attr"`` reference to it."""
    aliases: tuple[str, ...] = ()
    template: str | None = None
    """Prompt template file (default ``<name>.jinja``)."""
    target: str | TargetFn | None = None
    """Parser of a target written as text (or its reference); None keeps the text."""
    judged: bool = False
    """Scored by an LLM judge: its scorer is also given ``judge=`` (the scoring context's,
    None without one); async callers await the judge instead; no other extraction rules."""
    _loaded: dict[str, Callable[..., Any]] = field(
        default_factory=dict, init=False, repr=False, compare=False
    )

    @property
    def template_file(self) -> str:
        """The prompt template that asks this task type."""
        name = self.template or self.name
        return name if name.endswith(".jinja") else f"{name}.jinja"

    def _get(self, what: str, ref: str | Callable[..., Any]) -> Callable[..., Any]:
        fn = self._loaded.get(what)
        if fn is None:  # imported once: scoring a sample asks per sample
            fn = self._loaded[what] = resolve(ref)
        return fn

    def scorer_fn(self) -> ScorerFn:
        """The scorer function (imported on first use)."""
        return self._get("scorer", self.scorer)

    def parse_target(self, answer: str, n_options: int = 0) -> Any:
        """A target written as text, as this task type's scorer compares against it."""
        if self.target is None:
            return answer
        return self._get("target", self.target)(answer, n_options)


TASKS: Registry[TaskType] = Registry(
    "task type", base=TaskType, normalize=normalize_name, group="evalkit.tasks"
)
"""Every task type by name and alias (plug-ins: entry points ``evalkit.tasks``, each a
:class:`TaskType` or a module that calls :func:`register`)."""


def register(task: TaskType) -> TaskType:
    """Add a task type under its name and aliases (a name or alias taken twice is an error)."""
    TASKS.register(task.name, task, aliases=task.aliases)
    return task


def unregister(name: str) -> None:
    """Remove a task type and its aliases (a test's own task type, when it is done)."""
    TASKS.unregister(name)


def canonical(name: str) -> str:
    """The canonical task type for ``name`` or an alias (case/space/hyphen-insensitive)."""
    return TASKS.canonical(name)


def get(name: str) -> TaskType:
    """The task type ``name`` or an alias stands for (RegistryError with a hint if none)."""
    return TASKS.get(name)


def names() -> list[str]:
    """Every canonical task type, sorted."""
    return TASKS.names()


_S = "evalkit.scoring."
_P = "evalkit.bench.answers:"
_BUILTIN = (
    TaskType(
        "multiple_choice",
        f"{_S}choice:multiple_choice",
        ("multiple choice", "mc", "mcq", "choice"),
        target=f"{_P}choice_target",
    ),
    TaskType(
        "boolean",
        f"{_S}choice:boolean",
        ("bool", "yes_no", "yes/no", "true_false", "judgement"),
        target=f"{_P}yes_no_target",
    ),
    TaskType(
        "open_ended",
        f"{_S}text:open_ended",
        ("open-ended", "open", "free_form", "caption", "rouge"),
    ),
    TaskType("ocr", f"{_S}text:ocr", ("OCR", "text_recognition")),
    TaskType(
        "numerical",
        f"{_S}numeric:numerical",
        ("numeric", "number", "counting"),
        target=f"{_P}number_target",
    ),
    TaskType(
        "regression",
        f"{_S}numeric:regression",
        ("mra", "numerical_regression"),
        target=f"{_P}number_target",
    ),
    TaskType("llm_judge", f"{_S}judge:llm_judge", ("judge", "gpt_eval", "llm-judge"), judged=True),
    TaskType("math", f"{_S}mathverify:math", ("mathematics", "math_verify")),
    TaskType("code_python", f"{_S}code:code_python", ("python", "code", "code_generation")),
    TaskType("code_svg", f"{_S}code:code_svg", ("svg",)),
    TaskType("code_html", f"{_S}code:code_html", ("html", "webpage")),
    TaskType(
        "temporal_grounding",
        f"{_S}grounding:temporal_grounding",
        ("temporal grounding", "tvg", "moment_retrieval", "tg"),
        target=f"{_P}temporal_target",
    ),
    TaskType(
        "spatial_grounding",
        f"{_S}grounding:spatial_grounding",
        ("spatial grounding", "referring", "rec", "visual_grounding"),
        target=f"{_P}grounding_target",
    ),
    TaskType(
        "spatiotemporal_grounding",
        f"{_S}grounding:spatiotemporal_grounding",
        ("spatial-temporal grounding", "spatio-temporal grounding", "stvg"),
        target=f"{_P}grounding_target",
    ),
)
for _task in _BUILTIN:
    register(_task)

__all__ = [
    "TASKS",
    "ScorerFn",
    "TargetFn",
    "TaskType",
    "canonical",
    "get",
    "names",
    "register",
    "resolve",
    "unregister",
]
