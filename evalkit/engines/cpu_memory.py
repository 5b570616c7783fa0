"""vLLM's memory on a CPU: what an engine will reserve, checked against what is free before
it starts, for ``evalkit run``, ``sweep``, the judge and the trainer alike.

On the CPU backend vLLM reads ``gpu_memory_utilization`` as the share of the memory node's
total memory to reserve (vllm/v1/worker/cpu_worker.py, ``CPUWorker.__init__``: requested =
ceil(total * fraction), refused when it exceeds the node's available memory), and fills
what the weights leave of it with KV cache, zeroed, so every byte is taken. Its default 0.9
does not fit a box where anything else runs (21.2 of 23.5 GiB with 19.0 free: the engine
dies after a minute, its reason in a log). ``VLLM_CPU_KVCACHE_SPACE`` (GiB), or the engine
option ``kv_cache_memory_bytes``, fixes the KV cache instead, which skips that check.

evalkit's runs size it themselves where the user set none of the three (:func:`fit`): a
KV cache of :data:`DEFAULT_KV_GIB` per engine, or what the free memory allows beside the
weights when that is less; too little for any KV cache, or a size the user set that does
not fit, is refused in one line naming the value that fits, before the engine starts.
"""

from __future__ import annotations

import json
import logging
import math
import os
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError

log = logging.getLogger(__name__)

KV_ENV = "VLLM_CPU_KVCACHE_SPACE"
"""vLLM's variable fixing a CPU engine's KV cache, in GiB (it sets kv_cache_memory_bytes)."""
DEFAULT_KV_GIB = 4.0
"""The KV cache evalkit gives a CPU engine when nothing sets one: enough for tens of
thousands of tokens of a 7B model in flight, without taking a shared box's memory."""
MIN_KV_GIB = 0.25
"""Less free memory than this for the KV cache (beside the weights) is refused."""
HEADROOM_GIB = 1.5
"""Left free beside the engines: the run's own process, its decoders, the engine's runtime."""
_GIB = 1024**3
_DTYPE_BYTES = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2, "I8": 1, "U8": 1, "F8_E4M3": 1}
_RUN_BYTES = {"float32": 4, "float": 4, "float16": 2, "half": 2, "bfloat16": 2}


def gib(n: float) -> str:
    """``n`` bytes in GiB, two decimals."""
    return f"{n / _GIB:.2f} GiB"


@dataclass(frozen=True)
class CpuAsk:
    """What vLLM's CPU workers will ask of the memory node under ``gpu_memory_utilization``
    ``fraction``, and what it has."""

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

    @property
    def room(self) -> float:
        """The largest fraction that fits, floored to two decimals."""
        return math.floor(100 * self.available / (self.total * self.engines)) / 100

    def describe(self) -> str:
        """One line: what is asked and what is free, in GiB."""
        each = gib(self.per_engine)
        ask = each if self.engines == 1 else f"{self.engines} x {each}"
        return (
            f"vLLM (CPU) will reserve {ask} (gpu_memory_utilization {self.fraction:g} of "
            f"{gib(self.total)}); {gib(self.available)} available"
        )


def reserves_cpu_memory(engine: str) -> bool:
    """Whether backend ``engine`` reserves a share of this machine's RAM when it starts: one
    that reserves a share of its device's memory (``EngineSpec.reserves_memory``: vLLM)
    where there is no GPU."""
    import torch

    from evalkit.engines import engine_spec

    return engine_spec(engine).reserves_memory and not torch.cuda.is_available()


def memory_node() -> tuple[int, int]:
    """(total, available) bytes of memory node 0 as vLLM's CPU worker counts them (vLLM's own
    ``get_memory_node_info``: node meminfo, clamped to the cgroup limit)."""
    from vllm.utils.cpu_resource_utils import get_memory_node_info

    info = get_memory_node_info(0)
    return int(info.total_memory), int(info.available_memory)


def check_share(
    fraction: float, engines: int, node: tuple[int, int], fix: str, weights: int = 0
) -> CpuAsk:
    """ConfigError naming ``fix`` (the option to set, ``<= room`` appended) unless
    ``engines`` engines reserving ``fraction`` of the node fit, and each share holds more
    than the ``weights`` (vLLM fills the rest with KV cache); else the ask."""
    ask = CpuAsk(fraction, engines, *node)
    if not ask.fits:
        raise ConfigError(
            f"{ask.describe()}: it does not fit; set {fix} <= {ask.room:g} "
            f"(or {KV_ENV}=<GiB>), or free memory"
        )
    if weights and ask.per_engine <= weights:
        raise ConfigError(
            f"{ask.describe()}: the weights alone take {gib(weights)}, which leaves no KV "
            f"cache; set {fix} higher, or {KV_ENV}=<GiB>"
        )
    return ask


def checkpoint_bytes(model: str, dtype: str = "auto") -> int:
    """Bytes the weights of checkpoint folder ``model`` take once loaded as ``dtype`` (0 when
    it is no folder of safetensors: a hub id not in the cache, other formats)."""
    folder = Path(model).expanduser()
    files = sorted(folder.glob("*.safetensors")) if folder.is_dir() else []
    size = sum(f.stat().st_size for f in files)
    want = _RUN_BYTES.get(dtype)
    stored = _stored_bytes(files[0]) if files and want else None
    return size * want // stored if want and stored else size


def _stored_bytes(path: Path) -> int | None:
    """Bytes per value of the first tensor in a safetensors file (its JSON header)."""
    try:
        with open(path, "rb") as f:
            (length,) = struct.unpack("<Q", f.read(8))
            header = json.loads(f.read(min(length, 1 << 24)))
    except (OSError, ValueError, struct.error):
        return None
    dtypes = [v.get("dtype") for k, v in header.items() if k != "__metadata__"]
    return _DTYPE_BYTES.get(dtypes[0]) if dtypes else None


def fit(
    options: dict[str, Any],
    weights: int,
    *,
    engines: int = 1,
    node: tuple[int, int] | None = None,
    opt_flag: str = "--engine-opt",
) -> dict[str, Any]:
    """A vLLM CPU engine's ``options`` sized to this machine before it starts: unchanged where
    the user fixed the KV cache (``VLLM_CPU_KVCACHE_SPACE`` or ``kv_cache_memory_bytes``) or
    the share (``gpu_memory_utilization``) and it fits; else with ``kv_cache_memory_bytes``
    set (:data:`DEFAULT_KV_GIB`, or less where memory is short). ConfigError in one line,
    naming the value that fits, otherwise. ``weights``: bytes per engine; ``node``: (total,
    available) bytes, measured when None."""
    total, available = node if node is not None else memory_node()
    free = available - engines * weights - int(HEADROOM_GIB * _GIB)
    fixed = _fixed_kv(options)
    if fixed is not None:
        kv, fix = fixed
        if engines * (kv + weights) > available:
            room = math.floor(4 * max(free, 0) / engines / _GIB) / 4
            raise ConfigError(
                f"vLLM (CPU): {fix} asks {gib(kv)} of KV cache per engine beside "
                f"{gib(weights)} of weights{_times(engines)}, more than the {gib(available)} "
                f"available; set it to {room:g} GiB or less, or free memory"
            )
        log.info("vLLM (CPU): %s of KV cache per engine (%s)", gib(kv), fix)
        return options
    if "gpu_memory_utilization" in options:
        fix = f"{opt_flag} gpu_memory_utilization"
        ask = check_share(
            float(options["gpu_memory_utilization"]), engines, (total, available), fix, weights
        )
        log.info("%s", ask.describe())
        return options
    quarters = math.floor(4 * min(DEFAULT_KV_GIB * _GIB, free / engines) / _GIB)
    kv = quarters * _GIB // 4  # whole quarters of a GiB
    if kv < MIN_KV_GIB * _GIB:
        raise ConfigError(
            f"vLLM (CPU): {gib(available)} available is too little for the weights "
            f"({gib(weights)}{_times(engines)}), {MIN_KV_GIB:g} GiB of KV cache per engine and "
            f"{HEADROOM_GIB:g} GiB for the run; free memory (or set {KV_ENV}=<GiB>)"
        )
    short = kv < DEFAULT_KV_GIB * _GIB  # memory is short: say so where it is seen
    (log.warning if short else log.info)(
        "vLLM (CPU): %s of KV cache per engine, sized by evalkit to the %s available "
        "(%s kv_cache_memory_bytes=N or %s=<GiB> sets it)",
        gib(kv),
        gib(available),
        opt_flag,
        KV_ENV,
    )
    return {**options, "kv_cache_memory_bytes": kv}


def _times(engines: int) -> str:
    return f", x {engines} engines" if engines > 1 else ""


def _fixed_kv(options: dict[str, Any]) -> tuple[int, str] | None:
    """The KV cache size the user fixed, in bytes, and how (None: not fixed)."""
    if os.environ.get(KV_ENV, "") != "":
        return int(float(os.environ[KV_ENV]) * _GIB), f"{KV_ENV}={os.environ[KV_ENV]}"
    value = options.get("kv_cache_memory_bytes")
    if value is None:
        value = (options.get("engine_kwargs") or {}).get("kv_cache_memory_bytes")
    if value is None:
        return None
    return int(value), f"kv_cache_memory_bytes={value}"
