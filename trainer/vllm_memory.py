"""vLLM's memory on CPU: the trainer's CPU-sized default and a preflight before any engine starts.

On the CPU backend vLLM reads ``gpu_memory_utilization`` as the share of the memory node's
total memory to reserve (vllm/v1/worker/cpu_worker.py, ``CPUWorker.__init__``: requested =
ceil(total * fraction), refused when it exceeds the node's available memory, unless
``VLLM_CPU_KVCACHE_SPACE`` fixes the KV cache size in GiB, which skips that check). vLLM's
default 0.9 asks ~18 GiB of a 20 GiB node: on a shared 24 GB box the engine dies two minutes
into a run. The trainer's rollout engines default to :data:`CPU_MEMORY_UTILIZATION` on CPU, and
:func:`preflight` states what the engines will ask and what is free, refusing up front (one
line, exit 2) when it cannot fit.
"""

from __future__ import annotations

import logging
import math
import os
from dataclasses import dataclass
from typing import Any

from evalkit.errors import ConfigError

log = logging.getLogger(__name__)

CPU_MEMORY_UTILIZATION = 0.2
"""The trainer's vLLM CPU default: 4.8 GiB of a 24 GiB node per engine (KV cache + weights of
the tiny model need far less); GPU runs keep vLLM's own default (or the worker's 0.5)."""

KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
_GIB = 1024**3


@dataclass(frozen=True)
class CpuAsk:
    """What vLLM's CPU workers will ask of the memory node, and what it has."""

    fraction: float
    engines: int
    total: int
    available: int

    @property
    def per_engine(self) -> int:
        """Bytes one engine requests (vLLM: ceil(total * fraction))."""
        return math.ceil(self.total * self.fraction)

    @property
    def fits(self) -> bool:
        """Whether every engine's request fits in the available memory."""
        return self.per_engine * self.engines <= self.available

    def describe(self) -> str:
        """One line: what is asked and what is free, in GiB."""
        each = f"{self.per_engine / _GIB:.2f} GiB"
        ask = each if self.engines == 1 else f"{self.engines} x {each}"
        return (
            f"vLLM (CPU) will reserve {ask} (gpu_memory_utilization {self.fraction:g} of "
            f"{self.total / _GIB:.2f} GiB); {self.available / _GIB:.2f} GiB available"
        )


def reserves_cpu_memory(engine: str) -> bool:
    """Whether backend ``engine`` reserves a share of this machine's RAM when it starts: one
    that reserves a share of its device's memory (``EngineSpec.reserves_memory``: vLLM)
    where there is no GPU. Its options then want :func:`cpu_options` and a :func:`preflight`."""
    import torch

    from evalkit.engines import engine_spec

    return engine_spec(engine).reserves_memory and not torch.cuda.is_available()


def cpu_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the CPU-sized ``gpu_memory_utilization`` unless one is set."""
    return {"gpu_memory_utilization": CPU_MEMORY_UTILIZATION, **options}


def memory_node() -> tuple[int, int]:
    """(total, available) bytes of memory node 0 as vLLM's CPU worker counts them (vLLM's own
    ``get_memory_node_info``: node meminfo, clamped to the cgroup limit)."""
    from vllm.utils.cpu_resource_utils import get_memory_node_info

    info = get_memory_node_info(0)
    return int(info.total_memory), int(info.available_memory)


def preflight(
    options: dict[str, Any], engines: int = 1, node: tuple[int, int] | None = None
) -> CpuAsk | None:
    """Check that ``engines`` CPU engines with ``options`` fit before one starts.

    Returns the ask (logged) or None when ``VLLM_CPU_KVCACHE_SPACE`` fixes the KV cache
    (vLLM then skips its check); raises :class:`ConfigError` naming the fix when it cannot fit.
    ``node``: (total, available) bytes, measured when None.
    """
    if os.environ.get(KV_ENV, "") != "":
        log.info("vLLM (CPU): %s=%s GiB of KV cache per engine", KV_ENV, os.environ[KV_ENV])
        return None
    fraction = float(options.get("gpu_memory_utilization", CPU_MEMORY_UTILIZATION))
    total, available = node if node is not None else memory_node()
    ask = CpuAsk(fraction, engines, total, available)
    if not ask.fits:
        room = math.floor(100 * available / (total * engines)) / 100
        raise ConfigError(
            f"{ask.describe()}: it does not fit; set rollout.engine_options."
            f"gpu_memory_utilization <= {room:g} (or {KV_ENV}=<GiB>), or free memory"
        )
    log.info("%s", ask.describe())
    return ask
