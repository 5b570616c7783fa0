"""The replicas' work queue: longest first, video affinity, leases, exactly-once (pure)."""

from __future__ import annotations

import random
from pathlib import Path

import pytest

from evalkit.sample import Sample, VideoRef
from evalkit.scale.cost import CHEAP, CostModel, frames_for, video_cost
from evalkit.scale.queue import WorkItem, WorkQueue
from evalkit.video.types import FrameSpec


def item(sid: str, cost: float = 1.0, group: str = "", bench: str = "b") -> WorkItem:
    return WorkItem((bench, sid), cost, group)


def test_hand_out_is_longest_first_in_small_batches() -> None:
    q = WorkQueue([item(f"s{c}", c) for c in (3, 9, 1, 7, 5)], batch_size=2)
    first = q.lease("r0")
    second = q.lease("r1")
    assert first is not None and second is not None
    assert first.keys == [("b", "s9"), ("b", "s7")]
    assert second.keys == [("b", "s5"), ("b", "s3")]


def test_samples_of_one_video_go_to_the_replica_that_holds_it() -> None:
    items = [item(f"long{i}", 100, "long.mp4") for i in range(4)]
    items += [item(f"short{i}", 10, "short.mp4") for i in range(4)]
    q = WorkQueue(items, batch_size=2)
    a0, b0, a1, b1 = q.lease("a"), q.lease("b"), q.lease("a"), q.lease("b")
    assert a0 and b0 and a1 and b1
    assert {k[1] for k in a0.keys + a1.keys} == {f"long{i}" for i in range(4)}
    assert {k[1] for k in b0.keys + b1.keys} == {f"short{i}" for i in range(4)}


def test_a_replica_without_affine_work_takes_the_next_longest_group() -> None:
    items = [item("v1a", 50, "v1"), item("v1b", 50, "v1"), item("v2a", 20, "v2")]
    q = WorkQueue(items, batch_size=1)
    assert q.lease("a").keys == [("b", "v1a")]  # type: ignore[union-attr]
    assert q.lease("b").keys == [("b", "v2a")]  # type: ignore[union-attr]
    assert q.lease("a").keys == [("b", "v1b")]  # type: ignore[union-attr]


def test_an_idle_replica_takes_from_a_held_group_rather_than_wait() -> None:
    q = WorkQueue([item(f"s{i}", 10, "only.mp4") for i in range(4)], batch_size=1)
    assert q.lease("a") is not None
    stolen = q.lease("b")
    assert stolen is not None and stolen.keys == [("b", "s1")]


def test_a_batch_fills_across_groups() -> None:
    q = WorkQueue([item("x", 9, "v1"), item("y", 5, "v2"), item("z", 1, "v3")], batch_size=3)
    lease = q.lease("a")
    assert lease is not None and lease.keys == [("b", "x"), ("b", "y"), ("b", "z")]
    assert q.lease("b") is None


def test_a_sample_is_accepted_once_and_only_under_its_lease() -> None:
    q = WorkQueue([item("s1"), item("s2")], batch_size=1)
    l1, l2 = q.lease("a"), q.lease("b")
    assert l1 and l2
    assert not q.complete(l2.id, ("b", "s1"))  # not that lease's sample
    assert q.complete(l1.id, ("b", "s1"))
    assert not q.complete(l1.id, ("b", "s1"))  # a second record of it
    assert q.complete(l2.id, ("b", "s2"))
    assert q.finished() and q.accepted == 2


def test_a_failed_replica_s_samples_are_leased_again_and_its_late_records_refused() -> None:
    q = WorkQueue([item(f"s{i}", 10 - i) for i in range(4)], batch_size=2)
    dead, live = q.lease("dead"), q.lease("live")
    assert dead and live
    assert q.complete(dead.id, dead.keys[0])  # one record made it before the crash
    back = q.fail_replica("dead")
    assert [it.key for it in back] == dead.keys[1:]
    assert not q.complete(dead.id, dead.keys[1])  # late record from the stale lease
    again = q.lease("live")
    assert again is not None and again.keys == dead.keys[1:] and again.id != dead.id
    assert q.complete(again.id, dead.keys[1])
    for key in live.keys:
        assert q.complete(live.id, key)
    assert q.finished()


def test_a_failed_replica_s_video_groups_go_to_others() -> None:
    q = WorkQueue([item(f"s{i}", 10, "v.mp4") for i in range(3)], batch_size=1)
    first = q.lease("a")
    assert first is not None
    q.fail_replica("a")
    got = [q.lease("b") for _ in range(3)]
    assert sorted(k for lease in got if lease for k in lease.keys) == [
        ("b", "s0"),
        ("b", "s1"),
        ("b", "s2"),
    ]


def test_released_samples_without_a_record_are_queued_again() -> None:
    q = WorkQueue([item("s1"), item("s2")], batch_size=2)
    lease = q.lease("a")
    assert lease is not None and q.complete(lease.id, ("b", "s1"))
    assert [it.key for it in q.release(lease.id)] == [("b", "s2")]
    assert q.pending == 1 and not q.complete(lease.id, ("b", "s2"))


def test_a_sample_queued_twice_is_an_error() -> None:
    with pytest.raises(ValueError, match="queued twice"):
        WorkQueue([item("s1"), item("s1")])


def test_same_id_in_two_benchmarks_is_two_samples() -> None:
    q = WorkQueue([item("s1", bench="x"), item("s1", bench="y")], batch_size=2)
    lease = q.lease("a")
    assert lease is not None and sorted(lease.keys) == [("x", "s1"), ("y", "s1")]


def test_random_failures_never_lose_or_duplicate_a_sample() -> None:
    rng = random.Random(0)
    items = [item(f"s{i}", rng.random(), f"v{i % 7}") for i in range(200)]
    q = WorkQueue(items, batch_size=3)
    accepted: list[tuple[str, str]] = []
    replicas = [f"r{i}" for i in range(4)]
    while not q.finished():
        name = rng.choice(replicas)
        lease = q.lease(name)
        if lease is None:
            for r in replicas:  # nothing pending: what is leased finishes
                for open_lease in q.leased(r):
                    accepted += [k for k in open_lease.keys if q.complete(open_lease.id, k)]
            continue
        if rng.random() < 0.1:
            q.fail_replica(name)  # its leases are lost; late records are refused
            accepted += [k for k in lease.keys if q.complete(lease.id, k)]
            continue
        accepted += [k for k in lease.keys[: rng.randint(0, 3)] if q.complete(lease.id, k)]
    assert sorted(accepted) == sorted(it.key for it in items)


def test_video_cost_grows_with_duration_and_caps_at_max_frames() -> None:
    spec = FrameSpec(fps=2.0, max_frames=64)
    assert frames_for(10, spec) == 20 and frames_for(3600, spec) == 64
    assert frames_for(0.5, spec) == spec.min_frames
    assert video_cost(3600, spec) > video_cost(600, spec) > video_cost(10, spec)


def test_cost_reads_the_file_header_and_text_is_cheap(index_video: Path) -> None:
    spec = FrameSpec(fps=2.0, max_frames=64)
    model = CostModel()
    video = Sample(id="v", task_type="mc", question="?", media=[VideoRef(path=str(index_video))])
    text = Sample(id="t", task_type="mc", question="?")
    assert model.cost(text, spec) == CHEAP
    seconds = model.duration(VideoRef(path=str(index_video)), spec)
    assert 0 < seconds < 60  # the header's duration, not the default
    window = VideoRef(path=str(index_video), start=0.0, end=seconds / 2)
    assert model.duration(window, spec) == pytest.approx(seconds / 2)
    assert model.cost(video, spec) == video_cost(seconds, spec)


def test_an_unreadable_video_gets_the_default_duration(tmp_path: Path) -> None:
    bad = tmp_path / "bad.mp4"
    bad.write_bytes(b"not a video")
    assert CostModel().duration(VideoRef(path=str(bad)), FrameSpec()) == 60.0


def test_cost_takes_the_duration_from_a_cached_entry(
    tmp_path: Path, index_video: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from evalkit.cache import FrameCache
    from evalkit.scale import cost

    spec = FrameSpec(fps=2.0, max_frames=8, max_pixels=112 * 84, min_pixels=28 * 28 * 4)
    cache = FrameCache(tmp_path / "cache")
    ref = VideoRef(path=str(index_video))
    monkeypatch.setattr(cost, "_from_header", lambda path: 999.0)  # not to be asked
    assert CostModel(cache).duration(ref, spec) == 999.0  # not cached yet: the header
    cache.get(ref, spec)  # decoded once: the entry's metadata holds the duration
    assert CostModel(cache).duration(ref, spec) == pytest.approx(3.0, abs=0.1)
