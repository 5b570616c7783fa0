"""Resuming a run from its directory alone.

``evalkit run --resume runs/<id>`` takes every setting from the run's recorded
configuration (config.json's ``extra``, as last amended); flags given with it are
overrides of those settings. An override that changes a result is refused unless
``--force`` (by the fingerprint check of ``RunDir.open``), then recorded as an amendment.
Before any engine starts, the stores are opened (a damaged one is reported then) and a
run with nothing left to do says so.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.errors import ConfigError
from evalkit.run.config import RunConfig
from evalkit.rundir import RunDir, config_diff

if TYPE_CHECKING:
    from evalkit.run.plan import BenchRun

# Keys of the recorded ``extra`` that are not RunConfig settings (the specs as run, which
# schema-1 manifests kept there; RunDir lifts them out, this stays for hand-made copies).
_NOT_SETTINGS = {"specs", "data_benchmarks"}
# Settings that say how to resume, not how the run was made.
_RESUME_ONLY = {"resume", "force", "retry_failed"}


def recorded_settings(path: str | Path) -> dict[str, Any]:
    """The RunConfig fields the run at ``path`` was last opened with."""
    rundir = RunDir(path)
    if not rundir.config_path.is_file():
        raise ConfigError(
            f"--resume {path}: not a run directory (no config.json); give the folder "
            "`evalkit run` printed as 'run directory: ...', or --model etc. to start one there"
        )
    extra = dict(rundir.latest().get("extra") or {})
    unknown = sorted(set(extra) - set(RunConfig.model_fields) - _NOT_SETTINGS)
    if unknown:
        raise ConfigError(
            f"{rundir.config_path}: records settings this evalkit does not know "
            f"({', '.join(unknown)}); resume it with the evalkit version that made it"
        )
    return {k: v for k, v in extra.items() if k in RunConfig.model_fields}


def with_recorded(given: dict[str, Any]) -> dict[str, Any]:
    """``given`` (YAML + flags, with ``resume``) laid over the run's recorded settings.

    Sections (``engine_options``, ``frames``, ``pipeline``, ``judge``) merge key by key; a
    directory without config.json is a new run started there when ``model`` is given.
    """
    path = Path(str(given["resume"]))
    if not RunDir(path).config_path.is_file() and "model" in given:
        return given
    merged = recorded_settings(path)
    for key, value in given.items():
        old = merged.get(key)
        if isinstance(old, dict) and isinstance(value, dict):
            value = {**old, **value}
        merged[key] = value
    return merged


def overrides(cfg: RunConfig) -> list[str]:
    """What ``cfg`` (a resuming RunConfig) changes of the recorded settings."""
    if not cfg.resume or not RunDir(cfg.resume).config_path.is_file():
        return []
    recorded = recorded_settings(cfg.resume)
    now = cfg.model_dump(mode="json", exclude=_RESUME_ONLY)
    before = RunConfig.model_validate(recorded).model_dump(mode="json", exclude=_RESUME_ONLY)
    return config_diff(before, now)


def pending(rundir: RunDir, benches: list[BenchRun], *, include_failed: bool) -> dict[str, int]:
    """Samples per benchmark still to run; opening each store reports a damaged one now.

    ``include_failed``: failed samples count as done (no ``--retry-failed``).
    """
    out: dict[str, int] = {}
    for bench in benches:
        if not rundir.store_path(bench.name).exists():
            out[bench.name] = len(bench.samples)
            continue
        with rundir.store(bench.name) as store:
            done = store.done_ids(include_failed=include_failed)
        out[bench.name] = sum(s.id not in done for s in bench.samples)
    return out
