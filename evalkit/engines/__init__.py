"""Inference backends behind one protocol (``evalkit.engines.base.Engine``).

Each backend describes itself in one :class:`EngineSpec` registration: its class and typed
config (lazy ``"module:attr"`` references: listing or looking up a name does not import
vLLM, torch or an HTTP client until that backend is used), whether ``--model`` is a local
checkpoint it reads, and the batch variant that ``--mode sync`` runs. Callers (the runner,
the preflight checks, the CLI, the trainer) ask the registration instead of naming
engines; adding a backend is one module and one :func:`register_engine` call.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

from evalkit.registry import Registry, resolve_ref


@dataclass(frozen=True)
class EngineSpec:
    """What a backend is and can do."""

    name: str
    engine: str
    """The engine class, ``"module:Class"``."""
    config: str
    """Its typed config (a pydantic model; throughput-only fields marked), ``"module:Class"``."""
    local_checkpoint: bool = True
    """``--model`` is a checkpoint folder or a hub id in the local cache (not a served name)."""
    batch: str | None = None
    """The registered name of its batch variant (a ``BatchEngine``), run by ``--mode sync``."""
    choice: bool = True
    """Offered as ``--engine`` (a batch variant is reached through ``--mode sync``)."""


ENGINE_SPECS: Registry[EngineSpec] = Registry("engine", base=EngineSpec, group="evalkit.engines")
"""Every backend's registration (plug-ins: entry points ``evalkit.engines``, each an
:class:`EngineSpec` registered under the entry point's name, or a module that calls
:func:`register_engine`)."""


class _Resolved:
    """One lazy reference of every registration, by the backend's name (a view)."""

    def __init__(self, field: str) -> None:
        self._field = field

    def get(self, name: str) -> Any:
        """What the registration of ``name`` references (imported on first use)."""
        spec = ENGINE_SPECS.get(name)
        return resolve_ref(getattr(spec, self._field), where=f"engine {name!r}")

    def __contains__(self, name: object) -> bool:
        return name in ENGINE_SPECS

    def __iter__(self) -> Iterator[str]:
        return iter(ENGINE_SPECS)


ENGINES = _Resolved("engine")
"""Engine classes by name (from the registrations)."""
ENGINE_CONFIGS = _Resolved("config")
"""Each engine class's typed config, by the same names."""


def register_engine(spec: EngineSpec) -> EngineSpec:
    """Register a backend (its class and config by lazy reference); a name taken is an error."""
    ENGINE_SPECS.register(spec.name, spec)
    return spec


def engine_spec(name: str) -> EngineSpec:
    """The registration of backend ``name`` (RegistryError with a hint when unknown)."""
    return ENGINE_SPECS.get(name)


def engine_choices() -> list[str]:
    """The backends ``--engine`` offers."""
    return [n for n in ENGINE_SPECS if ENGINE_SPECS.get(n).choice]


def reads_local_checkpoint(name: str) -> bool:
    """Whether backend ``name`` reads ``--model`` from disk (an unregistered name, e.g. the
    ``external`` predictions of ``evalkit score``, is assumed to, as a checkpoint path)."""
    return name not in ENGINE_SPECS or engine_spec(name).local_checkpoint


def engine_for_mode(name: str, mode: str) -> str:
    """The backend a run of ``mode`` uses: ``sync`` takes the batch variant where one exists."""
    batch = engine_spec(name).batch if name in ENGINE_SPECS else None  # unknown: said later
    return batch if mode == "sync" and batch else name


_VLLM = "evalkit.engines.vllm_engine"
register_engine(
    EngineSpec("vllm", f"{_VLLM}:VLLMEngine", f"{_VLLM}:VLLMConfig", batch="vllm_batch")
)
register_engine(
    EngineSpec("vllm_batch", f"{_VLLM}:VLLMBatchEngine", f"{_VLLM}:VLLMConfig", choice=False)
)
register_engine(
    EngineSpec("hf", "evalkit.engines.hf_engine:HFEngine", "evalkit.engines.hf_engine:HFConfig")
)
register_engine(
    EngineSpec(
        "openai",
        "evalkit.engines.openai_engine:OpenAIEngine",
        "evalkit.engines.openai_engine:OpenAIConfig",
        local_checkpoint=False,
    )
)

__all__ = [
    "ENGINES",
    "ENGINE_CONFIGS",
    "ENGINE_SPECS",
    "EngineSpec",
    "engine_choices",
    "engine_for_mode",
    "engine_spec",
    "reads_local_checkpoint",
    "register_engine",
]
