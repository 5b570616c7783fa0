"""How loud the engines' libraries are: vLLM and transformers log at WARNING in a run
unless ``--verbose``. Called by the command before an engine starts, never at import."""

from __future__ import annotations

import logging
import os

# vLLM reads VLLM_LOGGING_LEVEL once, when ``vllm`` is first imported, and its engine
# processes inherit the environment; transformers reads TRANSFORMERS_VERBOSITY likewise.
_ENV = {"VLLM_LOGGING_LEVEL": "WARNING", "TRANSFORMERS_VERBOSITY": "warning"}
_LOGGERS = ("vllm", "transformers")


def quiet_engine_logs() -> None:
    """vLLM and transformers (and their engine processes) log warnings and errors only.

    A level the user set in the environment wins; loggers of libraries imported already
    (a library caller, a test) are lowered too, since their import read the environment.
    """
    for key, value in _ENV.items():
        os.environ.setdefault(key, value)
    for name in _LOGGERS:
        logger = logging.getLogger(name)
        if logger.getEffectiveLevel() < logging.WARNING:
            logger.setLevel(logging.WARNING)
