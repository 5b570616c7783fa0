"""What the perf scripts that run the tiny model on vLLM's CPU engine share: its engine
options and the offline, quiet environment it runs in."""

from __future__ import annotations

import os

ENGINE_OPTIONS = {
    "dtype": "float32",
    "enforce_eager": True,
    "max_num_batched_tokens": 256,
    "max_num_seqs": 8,
    "max_model_len": 2048,
}
"""The tiny model's vLLM settings on CPU (CPU_STACK: float32, eager, small batches)."""


def offline_env() -> None:
    """No hub, a fixed KV cache, vLLM at WARNING (values already set are kept)."""
    for k, v in {
        "VLLM_CPU_KVCACHE_SPACE": "1",
        "HF_HUB_OFFLINE": "1",
        "TRANSFORMERS_OFFLINE": "1",
        "VLLM_LOGGING_LEVEL": "WARNING",
        "VLLM_NO_USAGE_STATS": "1",
    }.items():
        os.environ.setdefault(k, v)
