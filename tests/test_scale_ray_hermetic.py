"""Ray tests are hermetic: beside a separate ``ray start --head`` cluster (announced as
``RAY_ADDRESS``, as on a user's workstation), the tests' instances and evalkit's own are new
local instances of their own, never that cluster."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests._distributed import local_ray, outside_cluster

pytest.importorskip("ray")
pytestmark = [pytest.mark.heavy, pytest.mark.timeout(300)]


@pytest.fixture(scope="module")
def other_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    with outside_cluster(tmp_path_factory.mktemp("other")) as address:
        yield address


def _gcs(ray) -> str:
    return ray.get_runtime_context().gcs_address


def test_control_a_plain_ray_init_attaches_to_the_running_cluster(other_cluster: str) -> None:
    """The trap the tests used to fall into: without ``address="local"`` Ray attaches."""
    import ray

    with pytest.raises(ValueError, match="existing cluster"):
        ray.init(num_cpus=2, include_dashboard=False)
    assert not ray.is_initialized()


def test_the_tests_local_instance_is_not_the_running_cluster(other_cluster: str) -> None:
    with local_ray(num_cpus=1) as ray:
        assert _gcs(ray) != other_cluster
        assert ray.get(ray.remote(lambda: 41 + 1).remote()) == 42


def test_evalkit_s_ray_session_starts_its_own_beside_the_running_cluster(
    other_cluster: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    import signal

    from evalkit.scale.cluster import ray_session

    def ours(signum: int, frame: object) -> None:
        """The command's SIGTERM handler (evalkit's Termination)."""

    monkeypatch.setenv("RAY_AUTH_MODE", "disabled")
    previous = signal.signal(signal.SIGTERM, ours)
    try:
        with ray_session(num_cpus=1) as session:
            assert session.started_s is not None and _gcs(session.ray) != other_cluster
            # ray.init installs its own (exit status 15, no line, engines not closed)
            assert signal.getsignal(signal.SIGTERM) is ours
    finally:
        signal.signal(signal.SIGTERM, previous)
    assert not session.ray.is_initialized()


def test_the_running_cluster_is_left_up(other_cluster: str, tmp_path: Path) -> None:
    import ray

    ray.init(address=other_cluster, include_dashboard=False)
    try:
        assert _gcs(ray).endswith(other_cluster.split(":")[1])
    finally:
        ray.shutdown()
