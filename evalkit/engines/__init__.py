"""Inference backends behind one protocol (``evalkit.engines.base.Engine``).

Each backend describes itself in one :class:`EngineSpec` registration: its class and typed
config (lazy ``"module:attr"`` references: listing or looking up a name does not import
vLLM, torch or an HTTP client until that backend is used), whether ``--model`` is a local
checkpoint it reads, and the batch variant that ``--mode sync`` runs. Callers (the runner,
the preflight checks, the CLI, the Ray replicas, the trainer) ask the registration what a
backend can do instead of naming engines, and build one through :func:`build` (its options
validated against its typed config first); adding a backend is one module and one
:func:`register_engine` call.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ValidationError

from evalkit.errors import ConfigError
from evalkit.registry import Registry, resolve_ref

if TYPE_CHECKING:
    from evalkit.engines.base import Engine


@dataclass(frozen=True)
class EngineSpec:
    """What a backend is and can do."""

    name: str
    engine: str
    """The engine class, ``"module:Class"``."""
    config: str
    """Its typed config (a pydantic model; throughput-only fields marked), ``"module:Class"``."""
    local_checkpoint: bool = True
    """``--model`` is a checkpoint folder or a hub id in the local cache (not a served name):
    the backend runs the model itself, so a Ray replica of it is given GPUs where the cluster
    has them."""
    batch: str | None = None
    """The registered name of its batch variant (a ``BatchEngine``), run by ``--mode sync``."""
    choice: bool = True
    """Offered as ``--engine`` (a batch variant is reached through ``--mode sync``)."""
    uses_gpu: bool = False
    """Runs its model on the machine's GPU whenever there is one, without an option asking
    (vLLM): a judge of this backend shared by Ray replicas is given a GPU on a cluster that
    has them. (``hf`` runs where its ``device`` option says, the CPU by default; a served
    model needs none here.)"""
    tensor_parallel: bool = False
    """Splits the model over ``tensor_parallel_size`` devices with worker processes it starts
    as vLLM does (``engine_kwargs.distributed_executor_backend``): inside a Ray replica,
    which already holds the group's GPUs, they are started as the actor's own processes."""
    reserves_memory: bool = False
    """Reserves a share of the device's memory when it starts (``gpu_memory_utilization``);
    on the CPU a share of the memory node's RAM (vLLM's CPU backend), which runs, sweeps,
    the judge and the trainer size and check for room before an engine starts
    (``evalkit.engines.cpu_memory``)."""
    probe: str | None = None
    """A check of a backend that serves from elsewhere, ``"module:function"`` called with its
    typed config, the flag that chose it and the flag of its options, before a run starts
    (one line of ConfigError when the server is not there or does not serve the model)."""
    reloads_weights: bool = False
    """Its engine loads another checkpoint of the same architecture in place
    (``async load_weights(path)``, :class:`evalkit.engines.base.ReloadsWeights`): ``evalkit
    watch`` keeps it warm across checkpoints instead of starting it again."""
    weight_sync: bool = False
    """Its workers hold their own copy of the weights and can load new ones in memory (vLLM's
    ``worker_extension_cls``): the trainer can host it beside a training rank, colocated, and
    give it the actor's weights after each step (trainer.weight_sync)."""
    vllm_model: bool = False
    """It runs the checkpoint in vLLM's own model classes: a family vLLM 0.32 cannot serve
    (``FamilySpec.vllm_refusal``) is refused before a run starts, not after its cache is built."""


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


def engine_config(
    engine: str | EngineSpec,
    model: str,
    options: Mapping[str, Any],
    *,
    where: str = "engine",
) -> BaseModel:
    """The typed config of backend ``engine`` running ``model`` with ``options``. A bad
    option is one line of :class:`ConfigError` naming the backend (after ``where``), the
    option and what is wrong with it; an unknown backend is a RegistryError with a hint."""
    spec = engine if isinstance(engine, EngineSpec) else engine_spec(engine)
    config_type = resolve_ref(spec.config, where=f"engine {spec.name!r}")
    try:
        config: BaseModel = config_type.model_validate({"model": model, **options})
    except ValidationError as exc:
        bad = "; ".join(f"{'.'.join(str(x) for x in e['loc'])}: {e['msg']}" for e in exc.errors())
        raise ConfigError(
            f"{where} {spec.name!r}: {bad} (see the fields of {config_type.__name__})"
        ) from None
    return config


def probe(
    engine: str,
    model: str,
    options: Mapping[str, Any],
    *,
    flag: str = "--engine",
    opt_flag: str = "--engine-opt",
) -> None:
    """Ask backend ``engine`` whether it can serve ``model`` now, where its registration
    has a probe (a served model: is the server up, does it serve that name); ConfigError in
    one line otherwise, naming ``flag``. Backends that run the model themselves have none."""
    spec = engine_spec(engine)
    if spec.probe is None:
        return
    config = engine_config(spec, model, options, where=f"{opt_flag} for engine")
    check = resolve_ref(spec.probe, where=f"engine {spec.name!r}")
    check(config, f"{flag} {spec.name}", opt_flag)


def build(engine: str | EngineSpec, model: str, options: Mapping[str, Any] | None = None) -> Engine:
    """An engine of backend ``engine`` (a registered name or its spec) on ``model``, its
    ``options`` validated first (:func:`engine_config`); the backend's heavy imports (vLLM,
    torch, an HTTP client) happen here. The one place evalkit and the trainer build one."""
    spec = engine if isinstance(engine, EngineSpec) else engine_spec(engine)
    config = engine_config(spec, model, options or {})
    engine_type = resolve_ref(spec.engine, where=f"engine {spec.name!r}")
    built: Engine = engine_type(config)
    return built


_VLLM = "evalkit.engines.vllm_engine"
register_engine(
    EngineSpec(
        "vllm",
        f"{_VLLM}:VLLMEngine",
        f"{_VLLM}:VLLMConfig",
        batch="vllm_batch",
        uses_gpu=True,
        tensor_parallel=True,
        reserves_memory=True,
        reloads_weights=True,
        weight_sync=True,
        vllm_model=True,
    )
)
register_engine(
    EngineSpec(
        "vllm_batch",
        f"{_VLLM}:VLLMBatchEngine",
        f"{_VLLM}:VLLMConfig",
        choice=False,
        uses_gpu=True,
        tensor_parallel=True,
        reserves_memory=True,
        weight_sync=True,
        vllm_model=True,
    )
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
        probe="evalkit.engines.openai_engine:probe",
    )
)

__all__ = [
    "ENGINES",
    "ENGINE_CONFIGS",
    "ENGINE_SPECS",
    "EngineSpec",
    "build",
    "engine_choices",
    "engine_config",
    "engine_for_mode",
    "engine_spec",
    "probe",
    "reads_local_checkpoint",
    "register_engine",
]
