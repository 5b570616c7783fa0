"""Inference backends behind one protocol (``evalkit.engines.base.Engine``).

``ENGINES`` maps a backend name to its engine class, lazily: listing or looking up a name
does not import vLLM, torch or an HTTP client until that backend is used.
"""

from __future__ import annotations

from typing import Any

from evalkit.registry import Registry

ENGINES: Registry[Any] = Registry("engine")
ENGINES.register("vllm", "evalkit.engines.vllm_engine:VLLMEngine")
ENGINES.register("vllm_batch", "evalkit.engines.vllm_engine:VLLMBatchEngine")
ENGINES.register("hf", "evalkit.engines.hf_engine:HFEngine")
ENGINES.register("openai", "evalkit.engines.openai_engine:OpenAIEngine")

# Each engine class's typed config, by the same names.
ENGINE_CONFIGS: Registry[Any] = Registry("engine config")
ENGINE_CONFIGS.register("vllm", "evalkit.engines.vllm_engine:VLLMConfig")
ENGINE_CONFIGS.register("vllm_batch", "evalkit.engines.vllm_engine:VLLMConfig")
ENGINE_CONFIGS.register("hf", "evalkit.engines.hf_engine:HFConfig")
ENGINE_CONFIGS.register("openai", "evalkit.engines.openai_engine:OpenAIConfig")

__all__ = ["ENGINES", "ENGINE_CONFIGS"]
