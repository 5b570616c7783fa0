"""The frame cache built by Ray tasks across a cluster (``evalkit cache build --ray``).

Each task runs the local build's per-video function
(:func:`evalkit.cache.build.build_specs_one`: one decode per video for every FrameSpec
asked for) on its share of the videos, writing straight into the shared cache directory
with the same lock-protected, atomic writes; only small status tuples come back, and the
report is tallied by the same code as the local build's, so both builds leave the same
files with the same bytes. Long videos get a task each, largest first; short ones share a
task (a few per task) so that thousands of clips do not cost a scheduling round each.

Locality: a node map (``--node-map FILE``) says which node holds which videos, one
``PATH_PREFIX NODE`` per line, NODE being a Ray node id or the node's IP address; tasks
for those videos run on that node (Ray's ``NodeAffinitySchedulingStrategy`` with
``soft=True``: they wait while it is busy, since the data is there, and run elsewhere only
if the node is gone or cannot run them at all).
"""

from __future__ import annotations

import os
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from evalkit.cache.build import (
    BuildReport,
    Outcome,
    build_specs_one,
    cache_args,
    init_worker,
    label,
    largest_first,
    progress_bar,
    record_outcome,
)
from evalkit.cache.frame_cache import FrameCache
from evalkit.errors import ConfigError
from evalkit.sample import VideoRef
from evalkit.scale.cluster import ray_session
from evalkit.video.types import FrameSpec

SHORT_BYTES = 16 * 2**20
"""Videos smaller than this share a task with other short ones."""
BATCH_BYTES = 64 * 2**20
"""At most this many bytes of short videos in one task."""
BATCH_VIDEOS = 8
"""At most this many short videos in one task."""


@dataclass(frozen=True)
class Batch:
    """Videos decoded by one Ray task, on ``node`` (a Ray node id) when given."""

    refs: tuple[VideoRef, ...]
    node: str | None = None


def read_node_map(path: str | os.PathLike[str]) -> list[tuple[str, str]]:
    """(path prefix, node) pairs from a file of ``PREFIX NODE`` lines (# comments)."""
    try:
        lines = Path(path).read_text().splitlines()
    except OSError as exc:
        raise ConfigError(f"--node-map {path}: cannot read it: {exc.strerror}") from None
    pairs = []
    for n, line in enumerate(lines, 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        parts = line.rsplit(None, 1)
        if len(parts) != 2:
            raise ConfigError(
                f"--node-map {path}, line {n}: expected `PATH_PREFIX NODE` (a Ray node id "
                f"or the node's IP address), got {line!r}"
            )
        pairs.append((os.path.abspath(parts[0]), parts[1]))
    return pairs


def resolve_nodes(
    pairs: Sequence[tuple[str, str]], nodes: list[dict[str, Any]], source: str = "--node-map"
) -> list[tuple[str, str]]:
    """The pairs with each node (id, IP or host name) replaced by its Ray node id, longest
    prefix first; ``nodes`` is ``ray.nodes()``. An unknown node is an error naming the
    nodes that are there."""
    alive = [n for n in nodes if n.get("Alive", True)]
    names: dict[str, str] = {}
    for n in alive:
        for field in ("NodeID", "NodeManagerAddress", "NodeManagerHostname"):
            if n.get(field):
                names[str(n[field])] = str(n["NodeID"])
    resolved = []
    for prefix, node in pairs:
        if node not in names:
            known = ", ".join(f"{n['NodeID']} ({n.get('NodeManagerAddress')})" for n in alive)
            raise ConfigError(
                f"{source}: node {node!r} (for {prefix}) is not an alive node of this Ray "
                f"cluster; use a node id or IP address from: {known}"
            )
        resolved.append((prefix, names[node]))
    return sorted(resolved, key=lambda p: len(p[0]), reverse=True)


def node_of(path: str, pairs: Sequence[tuple[str, str]]) -> str | None:
    """The node of the longest prefix ``path`` starts with (pairs longest first)."""
    full = os.path.abspath(path)
    for prefix, node in pairs:
        if full == prefix or full.startswith(prefix.rstrip(os.sep) + os.sep):
            return node
    return None


def _size(ref: VideoRef) -> int:
    try:
        return Path(ref.path).stat().st_size
    except OSError:
        return 0


def plan(jobs: list[VideoRef], place: Callable[[VideoRef], str | None]) -> list[Batch]:
    """Tasks for ``jobs`` (largest first): one per long video, short ones packed together
    per node, in order, so the long videos still start first."""
    batches: list[Batch] = []
    open_: dict[str | None, tuple[list[VideoRef], int]] = {}
    for ref in jobs:
        node, size = place(ref), _size(ref)
        if size >= SHORT_BYTES:
            batches.append(Batch((ref,), node))
            continue
        refs, total = open_.get(node, ([], 0))
        refs.append(ref)
        total += size
        if len(refs) >= BATCH_VIDEOS or total >= BATCH_BYTES:
            batches.append(Batch(tuple(refs), node))
            refs, total = [], 0
        open_[node] = (refs, total)
    batches += [Batch(tuple(refs), node) for node, (refs, _) in open_.items() if refs]
    return batches


def build_batch(
    args: dict[str, Any], ref_jsons: list[str], spec_jsons: list[str], threads: int
) -> list[list[Outcome]]:
    """The body of one Ray task: the local build's :func:`build_specs_one` for each video."""
    init_worker(threads)
    return [build_specs_one(args, ref_json, spec_jsons) for ref_json in ref_jsons]


def _absolute(ref: VideoRef) -> VideoRef:
    # Ray workers need not share the driver's working directory.
    if os.path.isabs(ref.path):
        return ref
    return ref.model_copy(update={"path": os.path.abspath(ref.path)})


def build_on_ray(
    cache: FrameCache,
    refs: list[VideoRef],
    spec: FrameSpec | Sequence[FrameSpec],
    *,
    address: str | None = None,
    node_map: Sequence[tuple[str, str]] = (),
    num_cpus: int | None = None,
    cpus_per_task: int = 1,
    progress: bool = True,
) -> BuildReport:
    """Build the entries of ``refs`` with Ray tasks (see the module docstring); a local Ray
    instance with ``num_cpus`` is started when no ``address`` is given. Several specs:
    each video is decoded once for all of them, as in the local build."""
    t0 = time.perf_counter()
    jobs = largest_first(refs)
    with ray_session(address, num_cpus) as session:
        ray = session.ray
        pairs = resolve_nodes(node_map, ray.nodes()) if node_map else []
        batches = plan(jobs, lambda r: node_of(r.path, pairs) if pairs else None)
        workers = int(ray.cluster_resources().get("CPU", 0)) // max(1, cpus_per_task)
        report = BuildReport(workers=workers)
        with progress_bar(len(jobs), progress) as advance:

            def record(ref: VideoRef, outcomes: list[Outcome]) -> None:
                for outcome in outcomes:
                    record_outcome(report, ref, outcome)
                advance(label(ref))

            specs = [spec] if isinstance(spec, FrameSpec) else list(spec)
            spec_jsons = [s.model_dump_json() for s in specs]
            _run(ray, batches, cache_args(cache), spec_jsons, cpus_per_task, record)
    report.seconds = time.perf_counter() - t0
    return report


def _run(
    ray: Any,
    batches: list[Batch],
    args: dict[str, Any],
    spec_jsons: list[str],
    cpus: int,
    record: Callable[[VideoRef, list[Outcome]], None],
) -> None:
    """Submit every batch, record outcomes as tasks finish; a batch whose task died is
    split into one task per video, so only the video that kills its worker fails."""
    from ray.util.scheduling_strategies import NodeAffinitySchedulingStrategy

    task = ray.remote(build_batch)

    def submit(batch: Batch) -> Any:
        options: dict[str, Any] = {"num_cpus": cpus, "max_retries": 1}
        if batch.node is not None:
            options["scheduling_strategy"] = NodeAffinitySchedulingStrategy(batch.node, soft=True)
        ref_jsons = [_absolute(r).model_dump_json() for r in batch.refs]
        return task.options(**options).remote(args, ref_jsons, spec_jsons, cpus)

    pending = {submit(b): b for b in batches}
    while pending:
        (done,), _ = ray.wait(list(pending), num_returns=1)
        batch = pending.pop(done)
        try:
            outcomes = ray.get(done)
        except ray.exceptions.RayError as exc:
            if len(batch.refs) > 1:
                for ref in batch.refs:
                    single = Batch((ref,), batch.node)
                    pending[submit(single)] = single
                continue
            first = str(exc).strip().splitlines()[:1]
            why = f"the Ray task for this file failed: {type(exc).__name__}"
            failed: Outcome = ("failed", 0, why + (f": {first[0]}" if first else ""))
            outcomes = [[failed] * len(spec_jsons)]
        for ref, outcome in zip(batch.refs, outcomes, strict=True):
            record(ref, outcome)
