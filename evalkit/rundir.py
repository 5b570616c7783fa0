"""A run directory: the frozen configuration of a run and one results store per benchmark.

``runs/<run-id>/config.json`` is the run's manifest (``evalkit.manifest.RunManifest``):
every setting that can change a result (model and its config hash, engine knobs, frame
specs, prompt variant, benchmark spec hashes), each benchmark's spec as run, and package
versions. ``RunDir`` owns every file name in the directory (config.json, amendments,
stores, invalid rows, frames.json, the judge's cache, the lock). The fingerprint is
stamped on every record; resuming under a different fingerprint is refused unless
forced, so results produced under two configurations are never silently mixed.
config.json is written once; every later change (a forced one, new limits, other package
versions) is appended to ``config.amendments`` with its own fingerprint, so each record
names the configuration that produced it. One process at a time writes a run directory
(``lock``).
"""

from __future__ import annotations

import hashlib
import json
import os
import time
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from evalkit.atomic import write_text_atomic
from evalkit.errors import ConfigError, DataError, not_utf8
from evalkit.manifest import ResultConfig, RunManifest, hash_json, lift_schema_1
from evalkit.runlock import RunLock
from evalkit.store import Store


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

    @property
    def amendments_path(self) -> Path:
        """``config.amendments``: one JSON line per reopening that changed a setting (not
        named ``*.jsonl``: those are the benchmarks' stores)."""
        return self.path / "config.amendments"

    def lock(self) -> RunLock:
        """The run's exclusive writer lock (``with rundir.lock(): ...``)."""
        return RunLock(self.path)

    @property
    def frames_path(self) -> Path:
        """``frames.json``: the frame counts and sizes each benchmark ran with."""
        return self.path / "frames.json"

    @property
    def startup_path(self) -> Path:
        """``startup.json``: seconds Ray and the engines took to start (``StartupTimes``)."""
        return self.path / "startup.json"

    @property
    def log_path(self) -> Path:
        """``output.log``: what vLLM, transformers, torch and Ray printed during the run
        (the terminal shows evalkit's own output unless ``--verbose``)."""
        return self.path / "output.log"

    @property
    def judge_cache_path(self) -> Path:
        """``judge_cache/``: the LLM judge's verdicts of this run."""
        return self.path / "judge_cache"

    def open(self, manifest: RunManifest, *, force: bool) -> str:
        """Create or reopen the run under ``manifest``; returns its fingerprint.

        Only ``result_config`` blocks a resume; ``extra`` (concurrency, limits) is recorded
        but does not. ``config.json`` is written once and never rewritten: a reopening that
        changes anything (``force`` for a result setting) appends an amendment instead, so
        every record's fingerprint stays traceable.
        """
        fingerprint = manifest.fingerprint
        doc = json.loads(json.dumps(manifest.dump(), default=str))  # as it would read back
        if not self.config_path.exists():
            self.path.mkdir(parents=True, exist_ok=True)
            write_text_atomic(self.config_path, json.dumps(doc, indent=2, sort_keys=True))
            return fingerprint
        latest = self.latest()
        if latest.get("fingerprint") != fingerprint and not force:
            diff = config_diff(latest.get("result_config", {}), doc["result_config"])[:8]
            raise ConfigError(
                f"{self.path}: this run was made under another configuration "
                f"({'; '.join(diff) or 'see config.json'}); resume with the same settings, "
                "use a new run directory, or pass --force to record the change as an amendment"
            )
        doc.pop("created", None)  # an amendment has its own time ("at")
        changes = [
            *config_diff(latest.get("result_config", {}), doc["result_config"]),
            *config_diff(latest.get("extra", {}), doc["extra"], "extra."),
            *config_diff(latest.get("versions", {}), doc["versions"], "versions."),
            *config_diff(_plugins(latest), _plugins(doc), "plugins."),
            # the data read: another commit or other annotations are said, not refused
            *config_diff(latest.get("data", {}), doc.get("data", {}), "data."),
        ]
        if changes:
            self._amend(doc, changes, latest.get("fingerprint"))
        return fingerprint

    def _amend(self, doc: dict[str, Any], changes: list[str], previous: Any) -> None:
        line = {
            "at": _now(),
            "previous_fingerprint": previous,
            "changes": changes,
            **doc,
        }
        data = (json.dumps(line, sort_keys=True, default=str) + "\n").encode()
        fd = os.open(self.amendments_path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        try:
            os.write(fd, data)
            os.fsync(fd)
        finally:
            os.close(fd)

    def amendments(self) -> list[dict[str, Any]]:
        """Every amendment, oldest first (a torn last line, from a crash, is skipped)."""
        if not self.amendments_path.is_file():
            return []
        data = self.amendments_path.read_bytes()
        lines = data[: data.rfind(b"\n") + 1].splitlines()
        return [json.loads(x) for x in lines if x.strip()]

    def original(self) -> dict[str, Any]:
        """``config.json`` as first written (a schema-1 one with its specs lifted out of
        ``extra``, as schema 2 keeps them)."""
        doc = _read_json_object(self.config_path)
        _check_result_config(self.config_path, doc)
        return lift_schema_1(doc)

    def latest(self) -> dict[str, Any]:
        """The configuration the run was last opened under (config.json or its last
        amendment): fingerprint, result_config, extra, specs, versions."""
        doc = self.original()
        for amendment in map(lift_schema_1, self.amendments()):
            doc.update({k: amendment[k] for k in _AMENDED if k in amendment})
        return doc

    def configurations(self) -> list[dict[str, Any]]:
        """Every configuration records may carry: ``label`` (config.json, amendment N of
        <time>), ``fingerprint``, ``result_config``, ``changes`` (from the previous)."""
        out = [{"label": "config.json", "changes": [], **self.original()}]
        for i, amendment in enumerate(self.amendments(), 1):
            out.append({**amendment, "label": f"amendment {i} of {amendment.get('at')}"})
        return out

    def store_path(self, benchmark: str) -> Path:
        """Where a benchmark's results store lives (``<benchmark>.jsonl``; a variant's is
        ``NAME:VARIANT.jsonl``, or the ``NAME_VARIANT.jsonl`` an older run wrote)."""
        return _existing(self.path, benchmark)

    def store(self, benchmark: str) -> Store:
        """The results store of one benchmark in this run."""
        return Store(self.store_path(benchmark))

    def problems_path(self, benchmark: str) -> Path:
        """``invalid/<benchmark>.jsonl``: the rows of a benchmark that did not load (or
        loaded repaired), one ``Problem.to_dict()`` per line. Outside the results stores'
        ``*.jsonl`` so it is never mistaken for a benchmark."""
        return _existing(self.path / "invalid", benchmark)

    def write_problems(self, benchmark: str, problems: list[Any]) -> None:
        """Record a benchmark's load problems (rewritten each time the run is opened)."""
        path = self.problems_path(benchmark)
        if not problems:
            path.unlink(missing_ok=True)
            return
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(
            path, "".join(json.dumps(p.to_dict(), default=str) + "\n" for p in problems)
        )

    def problems(self, benchmark: str) -> list[dict[str, Any]]:
        """A benchmark's recorded load problems (``file``, ``row``, ``field``, ``reason``,
        ``level`` "error" = an invalid row left out, "warning" = loaded repaired)."""
        path = self.problems_path(benchmark)
        if not path.is_file():
            return []
        return [json.loads(x) for x in path.read_text().splitlines() if x.strip()]

    def config(self) -> dict[str, Any]:
        """The run's configuration as a report reads it: the latest one (see ``latest``),
        with the benchmarks and specs of earlier ones kept, since their records remain."""
        doc = self.original()
        amendments = [lift_schema_1(a) for a in self.amendments()]
        for amendment in amendments:
            for key in _AMENDED:
                if key in amendment:
                    doc[key] = _keep_benchmarks(key, doc.get(key), amendment[key])
        doc["amendments"] = len(amendments)
        return doc

    def manifest(self) -> RunManifest:
        """The run's manifest as a report reads it (``config``, typed); DataError naming
        config.json and the field when it is not one this evalkit reads."""
        doc = self.config()
        doc.pop("amendments")
        try:
            return RunManifest.model_validate(doc)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            raise DataError(
                f"{self.config_path}: not a run manifest this evalkit reads (field {where}: "
                f"{err['msg']}); report it with the evalkit version that wrote it "
                f"({doc.get('evalkit_version') or 'before 0.1.0 manifests'})"
            ) from None

    def benchmarks(self) -> list[str]:
        """Benchmarks that have a results file in this run."""
        return sorted(p.stem for p in self.path.glob("*.jsonl"))


def _read_json_object(path: Path) -> dict[str, Any]:
    """A JSON object file; DataError naming the file and what is wrong with it."""
    damaged = "the run directory's manifest is damaged: restore it, or start a new run"
    try:
        doc = json.loads(path.read_bytes())
    except UnicodeDecodeError as exc:
        raise DataError(f"{path}: {not_utf8(exc)}; {damaged}") from None
    except ValueError as exc:
        raise DataError(f"{path}: not valid JSON ({exc}); {damaged}") from None
    if not isinstance(doc, dict):
        raise DataError(
            f"{path}: a JSON {type(doc).__name__}, not a run manifest (an object); {damaged}"
        )
    return doc


def _check_result_config(path: Path, doc: dict[str, Any]) -> None:
    """Refuse a ``result_config`` with keys this evalkit does not write (edited by hand:
    the run's fingerprint would no longer say what made its records)."""
    rc = doc.get("result_config")
    if not isinstance(rc, dict):
        raise DataError(f"{path}: result_config is missing or not an object; restore config.json")
    unknown = sorted(set(rc) - set(ResultConfig.model_fields))
    if unknown:
        raise DataError(
            f"{path}: result_config has key(s) this evalkit never writes: "
            f"{', '.join(map(repr, unknown))} (edited by hand?); remove them or start a new run"
        )


_AMENDED = (
    "fingerprint",
    "result_config",
    "extra",
    "versions",
    "specs",
    "data_benchmarks",
    "benchmark_samples",
    "data",
    "schema_version",
    "evalkit_version",
)
# top-level keys keyed by benchmark
_PER_BENCHMARK = ("specs", "data_benchmarks", "benchmark_samples", "data")


def _keep_benchmarks(key: str, old: Any, new: Any) -> Any:
    """``new``, with per-benchmark entries of ``old`` that ``new`` lacks kept."""
    if not isinstance(old, dict) or not isinstance(new, dict):
        return new
    if key in _PER_BENCHMARK:
        return {**old, **new}
    out = dict(new)
    if isinstance(old.get("benchmarks"), dict) and isinstance(new.get("benchmarks"), dict):
        out["benchmarks"] = {**old["benchmarks"], **new["benchmarks"]}
    return out


def _now() -> str:
    return time.strftime("%Y-%m-%dT%H:%M:%S%z")


def store_stems(name: str) -> tuple[str, ...]:
    """The file stems a benchmark's store may have (``<stem>.jsonl``): its name made
    file-safe, then the stem runs written before a variant kept its ``:`` gave it."""
    stem = _safe(name, keep="-_.:")
    legacy = _safe(name, keep="-_.")
    return (stem,) if legacy == stem else (stem, legacy)


def _existing(folder: Path, name: str) -> Path:
    """``folder/<stem>.jsonl`` for ``name``: the first of its stems with a file there, else
    the current one (where a new file goes)."""
    paths = [folder / f"{stem}.jsonl" for stem in store_stems(name)]
    return next((p for p in paths if p.exists()), paths[0])


def _safe(name: str, keep: str) -> str:
    # a variant's ":" is kept: the file is named as the report and messages name it
    return "".join(c if c.isalnum() or c in keep else "_" for c in name)


def _plugins(doc: dict[str, Any]) -> dict[str, str]:
    """A manifest's plug-ins as ``{"group:name": "distribution version"}`` (compared on a
    resume: another set of plug-ins is recorded as an amendment)."""
    return {
        f"{p.get('group')}:{p.get('name')}": f"{p.get('distribution')} {p.get('version')}"
        for p in doc.get("plugins") or []
        if isinstance(p, dict)
    }


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
