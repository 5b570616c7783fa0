"""Archives fetched while a run goes: the run starts on the samples whose media are in
place while later archives still download, one after another, in the order the samples
need them (the engine's start-up overlaps the first download).

Only zips take part (their listings, read before any download, say where each file will
land, so every sample's media paths are known when the run is planned); a release
shipped as a tar is fetched before the run. A sample whose archive has not landed yet
waits for it in the pipeline's IO stage (:meth:`Prefetch.wait`); one whose archive
failed fails with the fetch's reason.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from evalkit.errors import DataError

if TYPE_CHECKING:
    from evalkit.bench.spec import BenchmarkSpec
    from evalkit.hub.archives import Archive
    from evalkit.hub.home import ReleaseState
    from evalkit.hub.progress import FetchProgress
    from evalkit.sample import Sample


class Fetcher(Protocol):
    """What a prefetch asks of the fetch that made it (``evalkit.hub.fetch.Fetch``)."""

    spec: BenchmarkSpec

    def fetch_archive(
        self, folder: Path, state: ReleaseState, archive: Archive, progress: FetchProgress
    ) -> None:
        """Download, verify and extract one archive into the release ``folder``."""

    def finish(self, folder: Path, state: ReleaseState) -> None:
        """Record the release as complete."""


class Prefetch:
    """A release's remaining archives, fetched by a thread of their own."""

    def __init__(
        self, fetch: Fetcher, folder: Path, archives: list[Archive], pending: dict[str, str]
    ) -> None:
        self.fetch, self.folder, self.archives = fetch, folder, archives
        self.pending = {str(folder / rel): name for rel, name in pending.items()}
        """Absolute path of each file still to come -> the archive it comes in."""
        self._order = {a.name: i for i, a in enumerate(archives)}
        self.error: BaseException | None = None
        self.done = False
        self._changed = threading.Condition()
        self._thread = threading.Thread(target=self._run, name="evalkit-prefetch", daemon=True)

    def start(self) -> Prefetch:
        """Start fetching (returns self)."""
        self._thread.start()
        return self

    def _run(self) -> None:
        from filelock import FileLock

        from evalkit.hub.home import ReleaseState, bench_folder
        from evalkit.hub.progress import FetchProgress

        lock = bench_folder(self.fetch.spec) / f".{self.folder.name}.lock"
        try:
            with FileLock(str(lock)):
                state = ReleaseState.read(self.folder)
                assert state is not None  # written before this thread started
                with FetchProgress(self.fetch.spec.name, 0, shown=False) as progress:
                    for archive in self.archives:
                        if archive.name not in state.extracted:
                            self.fetch.fetch_archive(self.folder, state, archive, progress)
                        with self._changed:
                            self._changed.notify_all()
                self.fetch.finish(self.folder, state)
        except BaseException as exc:  # said to every sample that waits for what it lacks
            self.error = exc
        finally:
            with self._changed:
                self.done = True
                self._changed.notify_all()

    def expects(self, path: str) -> bool:
        """Whether ``path`` is a file one of the archives being fetched will bring."""
        return path in self.pending and not (self.done and self.error is not None)

    def rank(self, sample: Sample) -> int:
        """Where ``sample`` goes in the run: after the samples whose media are here, with
        those of the archive that comes first (-1: nothing to wait for)."""
        from evalkit.bench.media import media_paths

        archives = [self.pending[p] for p in media_paths(sample) if p in self.pending]
        return max((self._order.get(a, 0) for a in archives), default=-1)

    def wait(self, paths: Iterable[str]) -> None:
        """Return once every file of ``paths`` this fetch brings is in place; DataError
        naming the file (and why) when its archive did not come."""
        for path in paths:
            if path not in self.pending:
                continue
            with self._changed:
                while not Path(path).exists() and not self.done:
                    self._changed.wait(0.5)
            if not Path(path).exists():
                why = " ".join(str(self.error).split()) if self.error else "not in its archive"
                raise DataError(f"{path}: its archive did not come ({why})")

    def join(self, timeout: float | None = None) -> None:
        """Wait for the fetch to end."""
        self._thread.join(timeout)
