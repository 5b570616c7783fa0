"""The engines' output: how loud their libraries are (vLLM and transformers log at WARNING
in a run unless ``--verbose``; set by the command before an engine starts, never at import),
and what a log of theirs says went wrong (:func:`root_cause`), for the one line a failed
start ends in.
"""

from __future__ import annotations

import logging
import os
import re
from pathlib import Path

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


_PREFIX = re.compile(
    r"^(?:\([^)]*\)\s+)?(?:(?:ERROR|WARNING|INFO|DEBUG|CRITICAL)\s+[\d-]+\s+[\d:.]+\s+\[[^\]]*\]\s*)?"
)
_RAISED = re.compile(r"^((?:[A-Za-z_]\w*\.)*[A-Za-z_]\w*(?:Error|Exception)): (\S.*)$")
_RELAYS = (
    "See root cause above",  # vLLM's front end, after its engine core died
    "Engine core initialization failed",
    "EngineCore encountered",
    "Engine process failed to start",
)
TAIL_BYTES = 1 << 20
"""How much of a log's end is read for a root cause (a start-up failure is recent)."""


def root_cause(log_path: str | Path, *, most: int = 2) -> list[str]:
    """The exception lines an engine's output ends with (``Type: message``), root causes
    first: the messages of tracebacks in the last :data:`TAIL_BYTES` of ``log_path``,
    without the lines that only relay another process's failure ("See root cause above"),
    each once, the ``most`` last. Empty when there is none (or no log)."""
    try:
        with open(log_path, "rb") as log:
            log.seek(0, os.SEEK_END)
            log.seek(max(0, log.tell() - TAIL_BYTES))
            text = log.read().decode("utf-8", "replace")
    except OSError:
        return []
    found: dict[str, None] = {}
    for line in text.splitlines():
        match = _RAISED.match(_PREFIX.sub("", line.strip()))
        if match and not any(relay in match.group(2) for relay in _RELAYS):
            said = f"{match.group(1).rsplit('.', 1)[-1]}: {' '.join(match.group(2).split())}"
            found.pop(said, None)
            found[said] = None  # the latest occurrence decides the order
    return list(found)[-most:]
