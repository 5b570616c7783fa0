"""Fetching a benchmark's release from the Hub into ``EVALKIT_DATA``: only what a command
needs, at the spec's pinned commit (else the one recorded at the first fetch), verified,
resumable, atomic, the disk checked first.

What a command needs (:class:`Need`): the annotation files the spec reads and, unless it
reads annotations only, the media of the samples it runs (the first ``limit`` of them, or
all): loose files are fetched one by one; archives are fetched whole, only those that
hold a sample being run where the release says which (a zip's listing, read from its end
over ranged requests before it is downloaded; a tar cannot be listed, so all of it is
fetched, and that is said). Each file is checked against the Hub's sha256 (git's blob id
for small files): a damaged one is named, removed and fetched once more, then refused.
An archive is extracted into a temporary folder renamed into place when it is complete,
then deleted. Free space is checked against the sizes the Hub lists before anything is
written. A second command finds everything in place and makes no request at all.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import sys
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath
from typing import TYPE_CHECKING

from evalkit.atomic import TEMP_MARK, temp_path, write_text_atomic
from evalkit.bench.layout import MediaPath
from evalkit.bench.media import media_paths
from evalkit.bench.media_index import MediaIndex, shared_tail
from evalkit.bench.spec import BenchmarkSpec
from evalkit.errors import ConfigError, DataError, DiskError
from evalkit.hub.archives import (
    Archive,
    ArchiveRefused,
    RangeReader,
    archives_of,
    extract,
    glob_match,
    zip_members,
)
from evalkit.hub.client import HubClient, endpoint
from evalkit.hub.home import (
    DOWNLOADS,
    MISSING_FILE,
    ReleaseState,
    RepoEntry,
    asked_revision,
    bench_folder,
    hub_offline,
    known_commit,
    media_key,
    record_commit,
    release_folder,
)
from evalkit.hub.progress import FetchProgress
from evalkit.sample import ImageRef, Sample, VideoRef

if TYPE_CHECKING:
    from evalkit.hub.background import Prefetch

Say = Callable[[str], None]


def say_on_stderr(line: str) -> None:
    """The default announcer: one line on stderr (stdout stays the command's own)."""
    print(line, file=sys.stderr, flush=True)


@dataclass(frozen=True)
class Need:
    """What a command needs of a release."""

    media: bool = True
    """The media of the samples run (False: annotations only, as ``evalkit score`` reads)."""
    limit: int | None = None
    """Only the first ``limit`` samples are run (None: all)."""


class FetchDisabled(ConfigError):
    """The release is not in place and fetching is off (``--no-fetch``, HF_HUB_OFFLINE)."""


def fetch_command(spec: BenchmarkSpec) -> str:
    """The command that fetches ``spec``'s release."""
    name = spec.name if not spec.variant else f"{spec.name}:{spec.variant}"
    return f"`evalkit bench fetch {name}`"


def release_root(
    spec: BenchmarkSpec, need: Need = Need(), *, fetch: bool = True, say: Say = say_on_stderr
) -> Path:
    """The folder of ``spec``'s release at its commit, holding what ``need`` asks for;
    fetched from the Hub first where it does not (``fetch``: allowed to; never when
    ``HF_HUB_OFFLINE`` is set, and then FetchDisabled names the fetch command)."""
    if not spec.data.hf_dataset or spec.data.by_hand:
        why = spec.data.by_hand or "its release is not on the Hugging Face Hub"
        raise ConfigError(
            f"{spec.name}: {why}; lay it out by hand (`evalkit bench show {spec.name}` prints "
            "the layout) and pass --data-root DIR"
        )
    commit = known_commit(spec)
    if commit is not None:
        folder = release_folder(spec, commit)
        state = ReleaseState.read(folder)
        if state is not None and _satisfied(spec, folder, state, need):
            return folder
    if not fetch or hub_offline():
        why = "--no-fetch was given" if not fetch else "HF_HUB_OFFLINE is set"
        where = f"at {commit[:12]} " if commit else ""
        raise FetchDisabled(
            f"{spec.name}: the release {spec.data.hf_dataset} {where}is not in "
            f"{bench_folder(spec).parent} and {why}: fetch it with {fetch_command(spec)} "
            "(on a machine with the Hub in reach), or give a local copy with --data-root DIR"
        )
    return Fetch(spec, need, say).run()


def open_release(
    spec: BenchmarkSpec, need: Need, *, fetch: bool = True, say: Say = say_on_stderr
) -> tuple[Path, Prefetch | None]:
    """:func:`release_root`, its archives fetched while the caller goes on where they are
    zips (:class:`~evalkit.hub.background.Prefetch`: the run waits on it per sample)."""
    commit = known_commit(spec)
    if commit is not None and spec.data.hf_dataset and not spec.data.by_hand:
        folder = release_folder(spec, commit)
        state = ReleaseState.read(folder)
        if state is not None and _satisfied(spec, folder, state, need):
            return folder, None
    if not fetch or hub_offline() or not spec.data.hf_dataset or spec.data.by_hand:
        return release_root(spec, need, fetch=fetch, say=say), None  # says why it cannot
    return Fetch(spec, need, say).open(background=True)


def _satisfied(spec: BenchmarkSpec, folder: Path, state: ReleaseState, need: Need) -> bool:
    """Whether ``folder`` holds what ``need`` asks for, looked at on disk (no request)."""
    from evalkit.bench.files import annotation_paths

    if not all(annotation_paths(fs, folder) for fs in spec.files):
        return False
    if not need.media or media_key(spec) in state.complete:
        return True
    return not _wanted(spec, folder, need, state)


def _wanted(spec: BenchmarkSpec, folder: Path, need: Need, state: ReleaseState) -> list[Wanted]:
    """The media files of the samples run that are not in ``folder`` (nor known missing
    from the release), each with the relative paths it may have."""
    from evalkit.bench.loader import load

    samples = load(spec, folder, check_media=False, wanted=True)
    run = samples[: need.limit] if need.limit else samples
    known = set(state.missing)
    out: dict[str, Wanted] = {}
    for order, sample in enumerate(run):
        for path, layout in _media_of(spec, sample):
            if Path(path).exists():
                continue
            rel = Path(os.path.relpath(path, folder)).as_posix()
            if rel in known or rel in out:
                continue
            out[rel] = Wanted(rel, _candidates(rel, layout), order, sample.id, layout)
    return list(out.values())


@dataclass
class Wanted:
    """One media file a sample run needs and the folder lacks."""

    rel: str
    """Its path as the layout names it (relative to the release folder)."""
    candidates: list[str]
    """The paths it may have, in order (the layout's other extensions)."""
    order: int
    """The first sample that needs it (archives are fetched in the order samples run)."""
    sample: str
    layout: MediaPath | None


def _media_of(spec: BenchmarkSpec, sample: Sample) -> list[tuple[str, MediaPath | None]]:
    layouts = []
    for m in sample.media:
        layouts.append((m.path, spec.video if isinstance(m, VideoRef) else spec.image))
        assert isinstance(m, VideoRef | ImageRef)
    if sample.fields.get("subtitle_path"):
        layouts.append((str(sample.fields["subtitle_path"]), spec.subtitles))
    assert len(layouts) == len(media_paths(sample))
    return layouts


def _candidates(rel: str, layout: MediaPath | None) -> list[str]:
    p = PurePosixPath(rel)
    out = [rel]
    for ext in layout.extensions if layout else []:
        if ext:
            out += [str(p.with_name(p.name + ext)), str(p.with_suffix(ext)) if p.suffix else rel]
    return list(dict.fromkeys(out))


@dataclass
class Plan:
    """What a fetch downloads, and the space it takes."""

    files: list[str] = field(default_factory=list)
    """Loose repo files (annotations, media) to fetch."""
    archives: list[Archive] = field(default_factory=list)
    """Archives to fetch and extract, in the order the samples need them."""
    unlisted: list[Archive] = field(default_factory=list)
    """Tars fetched whole because a tar cannot be listed before it is downloaded."""

    def download_bytes(self, tree: dict[str, RepoEntry]) -> int:
        """Bytes to download (less what partial downloads hold already)."""
        names = [*self.files, *(p for a in self.archives for p in a.parts)]
        return sum(tree[n].size for n in names)

    def extracted_bytes(
        self, tree: dict[str, RepoEntry], listings: dict[str, list[tuple[str, int]]]
    ) -> int:
        """Bytes the archives take once extracted (a zip's listing, else the tar's size)."""
        total = 0
        for a in self.archives:
            listing = listings.get(a.name)
            total += sum(s for _, s in listing) if listing else sum(tree[p].size for p in a.parts)
        return total

    def peak_bytes(
        self, tree: dict[str, RepoEntry], listings: dict[str, list[tuple[str, int]]]
    ) -> int:
        """Disk needed at the worst moment: every loose file and extracted archive, plus the
        largest archive while it is extracted (archives are deleted once extracted)."""
        loose = sum(tree[n].size for n in self.files)
        largest = max((sum(tree[p].size for p in a.parts) for a in self.archives), default=0)
        return loose + self.extracted_bytes(tree, listings) + largest


class Fetch:
    """One fetch of a release (:func:`release_root` runs it; ``evalkit bench fetch`` too)."""

    def __init__(self, spec: BenchmarkSpec, need: Need, say: Say = say_on_stderr) -> None:
        assert spec.data.hf_dataset is not None
        self.spec, self.need, self.say = spec, need, say
        self.client = HubClient(spec.data.hf_dataset, spec.name)
        self.folder = Path()

    def run(self) -> Path:
        """Fetch what is needed; returns the release folder."""
        folder, later = self.open(background=False)
        assert later is None
        return folder

    def open(self, *, background: bool) -> tuple[Path, Prefetch | None]:
        """Fetch what is needed (``background``: the zips of the media while the caller
        goes on, :class:`~evalkit.hub.background.Prefetch`); returns the release folder."""
        from filelock import FileLock

        spec = self.spec
        commit = known_commit(spec) or self.client.commit(asked_revision(spec))
        folder = self.folder = release_folder(spec, commit)
        state = ReleaseState.read(folder) or ReleaseState(
            dataset=self.client.repo_id, commit=commit
        )
        if not state.tree:
            state.tree = self.client.tree(commit)
        self._check_disk(self._first_plan(folder, state), state, folder)  # nothing written yet
        bench_folder(spec).mkdir(parents=True, exist_ok=True)
        with FileLock(str(bench_folder(spec) / f".{commit}.lock")):
            record_commit(spec, commit)
            state = ReleaseState.read(folder) or state  # another process may have fetched
            _clear_temps(folder)
            self._annotations(folder, state)
            later = None
            if self.need.media and not _satisfied(spec, folder, state, self.need):
                later = self._media(folder, state, background)
        return folder, later.start() if later is not None else None

    # --- annotations ---------------------------------------------------------------
    def _annotation_files(self, tree: dict[str, RepoEntry]) -> list[str]:
        """The repo files the spec's annotation file specs read (a glob may match several;
        where a spec matches none, its ``or_else``'s)."""
        out: list[str] = []
        for fs in self.spec.files:
            spec: object = fs
            while spec is not None:
                hits = sorted(p for p in tree if glob_match(spec.path, p))  # type: ignore[attr-defined]
                if hits:
                    out += hits
                    break
                spec = spec.or_else  # type: ignore[attr-defined]
            else:
                raise DataError(
                    f"{self.spec.name}: {self.client.repo_id} at {self._short(tree)} holds no "
                    f"{fs.path} (the spec's annotation file); its layout:\n{self.spec.layout}"
                )
        return list(dict.fromkeys(out))

    def _short(self, tree: dict[str, RepoEntry]) -> str:
        return known_commit(self.spec) or "its current commit"

    def _first_plan(self, folder: Path, state: ReleaseState) -> Plan:
        """What can be sized before the annotations are read: the annotation files, and,
        when every sample runs, every archive of the release."""
        plan = Plan(files=[f for f in self._annotation_files(state.tree) if f not in state.files])
        if self.need.media and self.need.limit is None:
            plan.archives = [a for a in self._archives(state) if a.name not in state.extracted]
        return plan

    def _annotations(self, folder: Path, state: ReleaseState) -> None:
        files = [f for f in self._annotation_files(state.tree) if f not in state.files]
        if not files:
            return
        # small files: no bar of their own (the media's bar is the benchmark's one)
        with FetchProgress(self.spec.name, 0, shown=False) as progress:
            for f in files:
                self._fetch_file(folder, state, f, folder / f, progress)
                state.files[f] = f
        state.write(folder)

    # --- media ---------------------------------------------------------------------
    def _archives(self, state: ReleaseState) -> list[Archive]:
        try:
            return archives_of(self.spec.data.archives, state.tree)
        except ValueError as exc:
            raise ConfigError(f"{self.spec.name}: data.archives: {exc}") from None

    def _media(self, folder: Path, state: ReleaseState, background: bool) -> Prefetch | None:
        wanted = _wanted(self.spec, folder, self.need, state)
        plan = self._plan(state, wanted, list_all=background)
        self._check_disk(plan, state, folder)
        later = background and bool(plan.archives) and all(a.listable for a in plan.archives)
        self._announce(plan, state, folder, wanted, later)
        now = plan.files if later else [*plan.files, *(p for a in plan.archives for p in a.parts)]
        total = sum(state.tree[n].size for n in now) - _partial_bytes(folder, plan)
        with FetchProgress(self.spec.name, total) as progress:
            for f in plan.files:
                self._fetch_file(folder, state, f, folder / f, progress)
                state.files[f] = f
                state.write(folder)
            for archive in [] if later else plan.archives:
                self.fetch_archive(folder, state, archive, progress)
        if not later:
            self.finish(folder, state)
            return None
        from evalkit.hub.background import Prefetch

        # the files to come are indexed where their archive will put them: the run is
        # planned on their final paths, and waits for each as its archive lands
        pending = {
            f"{a.folder}/{m}": a.name for a in plan.archives for m, _ in state.listings[a.name]
        }
        MediaIndex.of(MediaIndex.scan(folder).all(), pending).write(folder)
        state.write(folder)
        return Prefetch(self, folder, plan.archives, pending)

    def finish(self, folder: Path, state: ReleaseState) -> None:
        """Index what is in place, record what the samples still lack (the release does
        not hold it) and, when every sample was fetched for, that the spec is complete."""
        MediaIndex.scan(folder).write(folder)
        # what the samples still lack once everything planned is in place: not in the release
        missing = _wanted(self.spec, folder, self.need, state)
        state.missing = sorted({*state.missing, *(w.rel for w in missing)})
        if self.need.limit is None:
            state.complete = sorted({*state.complete, media_key(self.spec)})
        state.write(folder)
        if missing:
            self._say_missing(folder, missing)

    def _plan(self, state: ReleaseState, wanted: list[Wanted], list_all: bool = False) -> Plan:
        plan = Plan()
        archives = [a for a in self._archives(state) if a.name not in state.extracted]
        in_archive = {p for a in self._archives(state) for p in a.parts}
        loose = MediaIndex.of(p for p in state.tree if p not in in_archive)
        left: list[Wanted] = []
        for w in wanted:
            hit = loose.find(w.candidates)
            if hit is not None and _same_name(hit, w.candidates):
                plan.files.append(hit)
            else:
                left.append(w)
        plan.files = list(dict.fromkeys(plan.files))
        if self.need.limit is None and not list_all:
            plan.archives = archives  # every sample runs: every archive
            return plan
        listed = [a for a in archives if a.listable]
        # each file wanted -> (trailing path parts shared, archive): listed one archive
        # after another until every file is placed by its name and folder
        best: dict[str, tuple[int, str]] = {}
        for a in listed:  # (every sample runs: every archive is listed, all come)
            placed = all(best.get(w.rel, (0, ""))[0] >= _strong(w) for w in left)
            if placed and self.need.limit is not None:
                break
            if a.name not in state.listings:
                state.listings[a.name] = self._listing(a, state)
                state.write(self.folder)
            members = MediaIndex.of(m for m, _ in state.listings[a.name])
            for w in left:
                hit = members.find(w.candidates)
                if hit is not None and _same_name(hit, w.candidates):
                    shared = max(shared_tail(c, hit) for c in w.candidates)
                    if shared > best.get(w.rel, (0, ""))[0]:
                        best[w.rel] = (shared, a.name)
        first: dict[str, int] = {}
        for w in left:
            if w.rel in best:
                name = best[w.rel][1]
                first[name] = min(first.get(name, w.order), w.order)
        unfound = [w for w in left if w.rel not in best]
        if self.need.limit is None:  # every sample runs: every archive, in the order needed
            first = {a.name: first.get(a.name, len(wanted)) for a in listed}
        plan.archives = sorted((a for a in listed if a.name in first), key=lambda a: first[a.name])
        unlisted = [a for a in archives if not a.listable]
        if unfound and unlisted:
            plan.archives += unlisted
            plan.unlisted = unlisted
        return plan

    def _listing(self, archive: Archive, state: ReleaseState) -> list[tuple[str, int]]:
        """A zip's members, read from its end over ranged requests (nothing downloaded)."""
        (part,) = archive.parts
        url = self.client.url(state.commit, part)
        reader = RangeReader(lambda a, b: self.client.read_range(url, a, b), state.tree[part].size)
        try:
            import io

            return zip_members(io.BufferedReader(reader))
        except Exception as exc:  # a listing that cannot be read: the zip is fetched whole
            if isinstance(exc, DataError | ConfigError):
                raise
            self.say(f"{self.spec.name}: cannot list {archive.name} ({exc}); fetching it whole")
            return []

    def _announce(
        self, plan: Plan, state: ReleaseState, folder: Path, wanted: list[Wanted], later: bool
    ) -> None:
        if not plan.files and not plan.archives:
            return
        spec, tree = self.spec, state.tree
        runs = f"the first {self.need.limit} samples" if self.need.limit else "every sample"
        parts = []
        if plan.files:
            parts.append(f"{len(plan.files)} file(s)")
        if plan.archives:
            all_archives = len(self._archives(state))
            parts.append(f"{len(plan.archives)} of {all_archives} archive(s)")
        size = human(plan.download_bytes(tree))
        extracted = plan.extracted_bytes(tree, state.listings)
        more = f", {human(extracted)} once extracted" if plan.archives else ""
        going = " (the archives while the run goes, in the order its samples need them)"
        self.say(
            f"{spec.name}: fetching {' and '.join(parts)} for {runs} from {self.client.repo_id}"
            f"@{state.commit[:7]} ({endpoint()}) into {folder}: {size} to download{more}"
            + (going if later else "")
        )
        for a in plan.unlisted:
            self.say(
                f"{spec.name}: {a.name} is a tar ({len(a.parts)} part(s)), which cannot be "
                f"listed without downloading it: all of it is fetched for {runs}"
            )

    def _say_missing(self, folder: Path, missing: list[Wanted]) -> None:
        listing = folder / MISSING_FILE
        listing.parent.mkdir(parents=True, exist_ok=True)
        lines = [f"{w.sample}\t{w.rel}" for w in missing]
        write_text_atomic(listing, "\n".join(lines) + "\n")
        where = self.spec.data.media_elsewhere
        source = (
            f"they come from {where}"
            if where
            else f"the release {self.client.repo_id} does not hold them"
        )
        self.say(
            f"{self.spec.name}: {len(missing)} media file(s) of the samples run are not on the "
            f"Hub ({source}); listed in {listing}: put them under {folder} as the layout says "
            f"(`evalkit bench show {self.spec.name}`), or give --video-root DIR holding them"
        )

    # --- files and archives ----------------------------------------------------------
    def _fetch_file(
        self, folder: Path, state: ReleaseState, path: str, dest: Path, progress: FetchProgress
    ) -> None:
        """Repo file ``path`` into ``dest``, verified (fetched once more if damaged)."""
        entry = state.tree[path]
        part = folder / DOWNLOADS / f"{path}.part"
        url = self.client.url(state.commit, path)
        for attempt in (1, 2):
            self.client.download(url, part, entry.size, progress.advance, path)
            got = _digest(part, entry)
            if got == (entry.sha256 or entry.oid):
                dest.parent.mkdir(parents=True, exist_ok=True)
                os.replace(part, dest)
                return
            part.unlink()
            progress.advance(-entry.size)
            what = "sha256" if entry.sha256 else "git blob id"
            damage = f"{what} {got[:12]} where the Hub lists {(entry.sha256 or entry.oid)[:12]}"
            if attempt == 1:
                self.say(
                    f"{self.spec.name}: {path} arrived damaged ({damage}): removed, fetching again"
                )
                continue
            raise DataError(
                f"{self.spec.name}: {path} arrived damaged twice ({damage}): removed; the "
                "network or the Hub's copy is at fault: run the same command again later"
            )

    def fetch_archive(
        self, folder: Path, state: ReleaseState, archive: Archive, progress: FetchProgress
    ) -> None:
        """Download ``archive`` (verified), extract it into place, delete its files."""
        files = []
        for part in archive.parts:
            dest = folder / DOWNLOADS / part
            if not dest.is_file():
                self._fetch_file(folder, state, part, dest, progress)
            files.append(dest)
        final = folder / archive.folder
        tmp = temp_path(final)
        try:
            extract(archive, files, tmp)
        except (ArchiveRefused, OSError):
            shutil.rmtree(tmp, ignore_errors=True)
            for f in files:  # a refused archive is not kept either
                f.unlink(missing_ok=True)
            raise
        if final.exists():  # an extraction killed after its rename, before its record
            shutil.rmtree(final)
        os.replace(tmp, final)
        state.extracted[archive.name] = archive.folder
        state.write(folder)
        for f in files:
            f.unlink(missing_ok=True)

    # --- disk ------------------------------------------------------------------------
    def _check_disk(self, plan: Plan, state: ReleaseState, folder: Path) -> None:
        need = plan.peak_bytes(state.tree, state.listings) - _partial_bytes(folder, plan)
        if need <= 0:
            return
        home = folder
        while not home.exists():
            home = home.parent
        free = shutil.disk_usage(home).free
        if free >= need:
            return
        download = plan.download_bytes(state.tree)
        raise DiskError(
            f"{self.spec.name}: not enough disk space in {home} for {self.client.repo_id}: "
            f"needs {human(need)} ({human(download)} to download, archives extracted and "
            f"removed one at a time), {human(free)} free; free space or set EVALKIT_DATA to a "
            "folder on a larger disk"
        )


def _strong(w: Wanted) -> int:
    """Trailing parts an archive member must share with a wanted file to settle where it
    is: its name and its folder (its name alone when the layout gives no folder)."""
    return min(2, len(PurePosixPath(w.rel).parts))


def _same_name(hit: str, candidates: list[str]) -> bool:
    names = {PurePosixPath(c).name for c in candidates}
    return PurePosixPath(hit).name in names


def _partial_bytes(folder: Path, plan: Plan) -> int:
    """Bytes the plan's files already hold in partial or finished downloads."""
    total = 0
    for name in [*plan.files, *(p for a in plan.archives for p in a.parts)]:
        for cand in (folder / DOWNLOADS / f"{name}.part", folder / DOWNLOADS / name):
            if cand.is_file():
                total += cand.stat().st_size
    return total


def _clear_temps(folder: Path) -> None:
    """Extractions a killed fetch left half done (never renamed into place)."""
    media = folder / "media"
    if not media.is_dir():
        return
    for path in media.rglob(f"*{TEMP_MARK}*"):
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)


def _digest(path: Path, entry: RepoEntry) -> str:
    """What the Hub lists for a file like ``path``: sha256 (LFS) or git's blob id."""
    with open(path, "rb") as f:
        if entry.sha256:
            return hashlib.file_digest(f, "sha256").hexdigest()
        h = hashlib.sha1(b"blob %d\0" % path.stat().st_size)
        for block in iter(lambda: f.read(1 << 20), b""):
            h.update(block)
        return h.hexdigest()


def human(n: float) -> str:
    """Bytes for people (``1.2 GB``)."""
    for unit in ("B", "kB", "MB", "GB", "TB"):
        if abs(n) < 1000 or unit == "TB":
            return f"{n:.0f} {unit}" if unit == "B" else f"{n:.1f} {unit}"
        n /= 1000
    return f"{n:.1f} TB"
