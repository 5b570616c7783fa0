"""What a report is made of: a run's benchmarks with their numbers, counts and context.

Plain data, filled by ``reports.load`` and read by the statistics, the sections and the
renderers (which therefore do not depend on how a run directory is read).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any, Literal

from evalkit.bench.aggregations import AggregateResult, Scored
from evalkit.bench.spec import BenchmarkSpec
from evalkit.manifest import ResultConfig, RunManifest
from evalkit.records import SampleRecord

from .sensitivity import Sensitivity

FailedPolicy = Literal["zero", "exclude"]


@dataclass
class Counts:
    """How many samples a benchmark's store holds, by outcome."""

    total: int = 0
    scored: int = 0
    """Finished and scored (a value in [0, 1])."""
    unscored: int = 0
    """Finished but not scored (e.g. LLM-judged with no judge configured)."""
    failed: int = 0
    """Failed in IO, the engine or the scorer (``status == "failed"``)."""
    failed_by_stage: dict[str, int] = field(default_factory=dict)
    scorer_failed: dict[str, str] = field(default_factory=dict)
    """Failed at stage score (the scorer raised: a bug, not the model's answer), sample id
    -> error; left out of the aggregate whatever the failed policy, never a 0."""
    invalid: int = 0
    """Rows of the data that did not load (recorded in the run's invalid/<benchmark>.jsonl)."""
    malformed: int = 0
    """Lines of the store that are not valid records (left out of every number)."""
    foreign: int = 0
    """Records whose fingerprint no recorded configuration has (left out)."""
    available: int | None = None
    """Samples the benchmark's data held when the run was opened (None: not recorded)."""

    @property
    def partial(self) -> bool:
        """The run holds fewer samples than the benchmark has (``--limit``, unfinished)."""
        return self.available is not None and self.total < self.available


@dataclass
class ReferenceCheck:
    """Our number against one published number."""

    benchmark: str
    model: str
    metric: str
    reference: float
    value: float | None
    delta: float | None
    tolerance: float
    variant: str | None
    settings_text: str
    source: str
    settings_diff: list[str] = field(default_factory=list)

    @property
    def within(self) -> bool | None:
        """|delta| <= tolerance (None when we have no number)."""
        return None if self.delta is None else abs(self.delta) <= self.tolerance + 1e-9

    @property
    def verdict(self) -> str:
        """match / miss / no score."""
        if self.within is None:
            return "no score"
        return "match" if self.within else "miss"

    def to_dict(self) -> dict[str, Any]:
        """Plain JSON-able form."""
        d = asdict(self)
        d.update(within=self.within, verdict=self.verdict)
        return d


@dataclass
class BenchmarkReport:
    """One benchmark of one run: the official number, its breakdowns and its context."""

    name: str
    path: Path
    records: list[SampleRecord]
    scored: list[Scored]
    """What went into the aggregate (failed samples as 0 or left out, per the policy)."""
    result: AggregateResult
    counts: Counts
    aggregation: str
    official: bool
    spec: BenchmarkSpec | None = None
    """The spec with its variant applied; None for ad-hoc data."""
    variant: str | None = None
    settings: dict[str, Any] = field(default_factory=dict)
    group_sizes: dict[str, dict[str, int]] = field(default_factory=dict)
    """Samples per breakdown group (a grouped aggregate's units are fewer)."""
    stderr: float | None = None
    stderr_method: str = ""
    notes: list[str] = field(default_factory=list)
    references: list[ReferenceCheck] = field(default_factory=list)
    sensitivity: Sensitivity | None = None
    """The official number under each extraction rule (None: records predate rules)."""
    live_spec: bool = False
    """Aggregated by the live registry's spec: the run recorded no spec it ran under."""
    headline_plugin: str | None = None
    """The plug-in the headline rule comes from, said (None: a rule evalkit ships)."""

    @property
    def overall(self) -> float | None:
        """The official number (percent), None when nothing could be scored."""
        return self.result.overall


@dataclass
class RunReport:
    """A whole run directory."""

    path: Path
    run_id: str
    manifest: RunManifest
    """config.json with its amendments (``RunDir.manifest``)."""
    benchmarks: dict[str, BenchmarkReport]
    failed_policy: FailedPolicy = "zero"
    live_specs: list[str] = field(default_factory=list)
    """Benchmarks aggregated by the live registry's spec (none recorded), named in the report."""

    @property
    def result_config(self) -> ResultConfig:
        """The settings that change results (the run's fingerprint covers them)."""
        return self.manifest.result_config

    @property
    def model(self) -> str:
        """The model the run evaluated, as given to ``evalkit run``."""
        return self.result_config.model


__all__ = ["BenchmarkReport", "Counts", "FailedPolicy", "ReferenceCheck", "RunReport"]
