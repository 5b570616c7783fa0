"""Shared fixtures: small synthetic media built by code, once per session."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path

import av  # noqa: F401  (PyAV's FFmpeg first: see below)
import pytest

from evalkit.testing.index_video import write_index_video

# PyAV's own FFmpeg libraries load before decord's in every test process: once decord's
# (bundled) libraries are loaded first, PyAV's libvpx-vp9 encoder refuses to open
# (avcodec_open2 EINVAL), so a test writing a .webm after any test that imported decord in
# the same worker failed. evalkit's decode path reads a video's header with PyAV before
# decord (evalkit.video.decode), so the product always loads them in this order.
from tests._sensitivity_rules import last_letter_registered


@pytest.fixture(scope="session", autouse=True)
def own_ray_temp_dir() -> Iterator[str]:
    """Every Ray instance this session starts (tests, ``evalkit`` subprocesses, their
    workers) keeps its session files in a folder of its own: another cluster on the
    machine (``/tmp/ray``) is never read, attached to or overwritten. Short path: Ray's
    unix sockets live under it."""
    root = tempfile.mkdtemp(prefix="ekray-", dir="/tmp")
    before = os.environ.get("RAY_TMPDIR")
    os.environ["RAY_TMPDIR"] = root
    try:
        yield root
    finally:
        if before is None:
            os.environ.pop("RAY_TMPDIR", None)
        else:
            os.environ["RAY_TMPDIR"] = before
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture(autouse=True)
def piped_width(monkeypatch: pytest.MonkeyPatch) -> None:
    """No COLUMNS: what the CLI prints is laid out as for a pipe (100 columns) in every
    test, however pytest was started (pytest-xdist's workers inherit COLUMNS=80); a test
    of another width sets COLUMNS itself."""
    monkeypatch.delenv("COLUMNS", raising=False)


_SCHEDULING = (
    (os.sched_getscheduler(0), os.sched_getparam(0)) if hasattr(os, "sched_getscheduler") else None
)


@pytest.fixture(autouse=True)
def same_scheduling_after_each_test() -> Iterator[None]:
    """A test that leaves this process under another scheduling policy fails by name (and
    the policy is put back): every process the session starts afterwards would inherit it.
    SVT-AV1 made a worker real-time (SCHED_FIFO 99) this way, and a headless Chromium it
    started later spun at that priority on both cores until the CI run timed out."""
    yield
    if _SCHEDULING is None:
        return
    now = (os.sched_getscheduler(0), os.sched_getparam(0))
    if now != _SCHEDULING:
        os.sched_setscheduler(0, *_SCHEDULING)
        pytest.fail(
            f"this test left the process under scheduling policy {now[0]} priority "
            f"{now[1].sched_priority} (it was {_SCHEDULING[0]}, {_SCHEDULING[1].sched_priority})"
        )


@pytest.fixture(scope="session")
def media_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A session-wide scratch folder for generated media."""
    return tmp_path_factory.mktemp("media")


@pytest.fixture(scope="session")
def index_video(media_dir: Path) -> Path:
    """3 s, 30 fps, 160x120 H.264 mp4 whose frames encode their index (testing.index_video)."""
    return write_index_video(media_dir / "index_90f_30fps.mp4", 90, fps=30.0, width=160, height=120)


@pytest.fixture
def one_torch_thread() -> Iterator[None]:
    """torch on one thread for the test (tiny tensors: thread start-up costs more than it
    saves on a shared 2-core box); restored afterwards."""
    import torch

    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


@pytest.fixture
def last_letter_rule() -> Iterator[str]:
    """The test-only rule ``sensitivity_test_last_letter``, registered for one test."""
    with last_letter_registered() as name:
        yield name


@pytest.fixture
def tiny_disk(tmp_path: Path) -> Iterator[Path]:
    """A 64 KiB tmpfs mounted for the test (a disk that fills up); skipped where this
    process may not mount (not root)."""
    from tests._tmpfs import tmpfs

    with tmpfs(tmp_path / "tiny_disk", "64k") as mnt:
        yield mnt


class _ShmWatch:
    """The /dev/shm entries this test session's own processes (pytest and every process
    under it: engines, Ray workers, trainers) map or hold open, sampled every second.
    Other processes on the machine (other sessions) never count: an entry is ours only if
    one of our processes held it."""

    def __init__(self) -> None:
        import threading

        from evalkit.engines._watchdog import SHM

        self.shm = SHM
        self.before = set(os.listdir(SHM)) if os.path.isdir(SHM) else set()
        self.held: set[str] = set()
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="shm-watch", daemon=True)

    def start(self) -> _ShmWatch:
        if os.path.isdir(self.shm):
            self._thread.start()
        return self

    def _run(self) -> None:
        while not self._stop.wait(1.0):
            self.sample()

    def sample(self) -> None:
        import psutil

        try:
            procs = [psutil.Process(), *psutil.Process().children(recursive=True)]
        except psutil.Error:
            return
        from evalkit.engines._watchdog import shm_held  # the watchdog's reading of /proc

        self.held |= shm_held(procs) - self.before

    def left(self) -> list[str]:
        """Entries our processes held that still exist now."""
        self._stop.set()
        self._thread.join(timeout=5)
        return sorted(n for n in self.held if os.path.exists(os.path.join(self.shm, n)))


_SHM_WATCH: list[_ShmWatch] = []


def pytest_sessionstart(session: pytest.Session) -> None:
    if hasattr(session.config, "workerinput"):
        return  # an xdist worker: the controller's watch covers it (its processes are ours)
    _SHM_WATCH.append(_ShmWatch().start())


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Name every /dev/shm entry this session's processes made and left behind (RAM that
    only grows on a shared node); with EVALKIT_SHM_STRICT=1 that fails the session."""
    if not _SHM_WATCH:
        return
    import time

    time.sleep(1.0)  # the last test's processes finish unlinking
    left = _SHM_WATCH.pop().left()
    if not left:
        return
    sizes = sum(
        os.path.getsize(os.path.join("/dev/shm", n))
        for n in left
        if os.path.exists(os.path.join("/dev/shm", n))
    )
    line = f"/dev/shm entries left by this test session ({sizes / 1e6:.1f} MB): {', '.join(left)}"
    session.config.stash[_SHM_LEFT] = line
    if os.environ.get("EVALKIT_SHM_STRICT") == "1":
        session.exitstatus = 1


_SHM_LEFT = pytest.StashKey[str]()


def pytest_terminal_summary(terminalreporter, exitstatus: int, config: pytest.Config) -> None:
    line = config.stash.get(_SHM_LEFT, None)
    if line:
        terminalreporter.write_line(line, red=True)
