"""The trainer's vLLM engines on CPU: a CPU-sized default share and a preflight before any
engine starts (the check itself is evalkit's, ``evalkit.engines.cpu_memory``, shared with
``evalkit run``).

vLLM's default ``gpu_memory_utilization`` 0.9 asks ~18 GiB of a 20 GiB node: on a shared
24 GB box the engine dies two minutes into a run. The trainer's rollout engines default to
:data:`CPU_MEMORY_UTILIZATION` on CPU, and :func:`preflight` states what the engines will
ask and what is free, refusing up front (one line, exit 2) when it cannot fit.
"""

from __future__ import annotations

import logging
import os
from typing import Any

from evalkit.engines.cpu_memory import KV_ENV, CpuAsk, check_share, memory_node

log = logging.getLogger(__name__)

CPU_MEMORY_UTILIZATION = 0.2
"""The trainer's vLLM CPU default: 4.8 GiB of a 24 GiB node per engine (KV cache + weights of
the tiny model need far less); GPU runs keep vLLM's own default (or the worker's 0.5)."""


def cpu_options(options: dict[str, Any]) -> dict[str, Any]:
    """``options`` with the CPU-sized ``gpu_memory_utilization`` unless one is set."""
    return {"gpu_memory_utilization": CPU_MEMORY_UTILIZATION, **options}


def preflight(
    options: dict[str, Any], engines: int = 1, node: tuple[int, int] | None = None
) -> CpuAsk | None:
    """Check that ``engines`` CPU engines with ``options`` fit before one starts.

    Returns the ask (logged) or None when ``VLLM_CPU_KVCACHE_SPACE`` fixes the KV cache
    (vLLM then skips its check); raises ConfigError naming the fix when it cannot fit.
    ``node``: (total, available) bytes, measured when None.
    """
    if os.environ.get(KV_ENV, "") != "":
        log.info("vLLM (CPU): %s=%s GiB of KV cache per engine", KV_ENV, os.environ[KV_ENV])
        return None
    fraction = float(options.get("gpu_memory_utilization", CPU_MEMORY_UTILIZATION))
    fix = "rollout.engine_options.gpu_memory_utilization"
    ask = check_share(fraction, engines, node if node is not None else memory_node(), fix)
    log.info("%s", ask.describe())
    return ask
