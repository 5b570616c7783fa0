"""Where fetched releases live (``EVALKIT_DATA``), which commit of a release a spec reads,
and what a release folder records about itself.

``$EVALKIT_DATA/<benchmark key>/<commit>/`` holds one release at one commit, in the layout
its spec reads: the annotation files and loose media at their repo paths, each archive
extracted into ``media/<archive>/``, and evalkit's own records under ``.evalkit/``
(:class:`ReleaseState`, the media index, partial downloads). A spec that pins no revision
reads the commit recorded at its first fetch (``refs/<revision>``), with no request, until
``evalkit bench fetch NAME --refresh`` asks the Hub again.
"""

from __future__ import annotations

import json
import os
import re
from pathlib import Path

from pydantic import BaseModel, ConfigDict, Field, ValidationError

from evalkit.atomic import write_text_atomic
from evalkit.bench.spec import BenchmarkSpec

COMMIT = re.compile(r"^[0-9a-f]{40}$")
"""A full commit hash (a revision that names one snapshot for good)."""
STATE_FILE = ".evalkit/release.json"
DOWNLOADS = ".evalkit/downloads"
MISSING_FILE = ".evalkit/missing-media.txt"


def data_home() -> Path:
    """``$EVALKIT_DATA``, else ``~/.cache/evalkit/data``."""
    env = os.environ.get("EVALKIT_DATA")
    return Path(env).expanduser() if env else Path("~/.cache/evalkit/data").expanduser()


def hub_offline() -> bool:
    """``HF_HUB_OFFLINE`` (or ``TRANSFORMERS_OFFLINE``) is set, as huggingface_hub reads it."""
    for name in ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE"):
        if os.environ.get(name, "").strip().upper() in ("1", "ON", "YES", "TRUE"):
            return True
    return False


def bench_folder(spec: BenchmarkSpec) -> Path:
    """``$EVALKIT_DATA/<key>``: every fetched commit of the benchmark's release."""
    return data_home() / spec.key


def release_folder(spec: BenchmarkSpec, commit: str) -> Path:
    """``$EVALKIT_DATA/<key>/<commit>``."""
    return bench_folder(spec) / commit


def asked_revision(spec: BenchmarkSpec) -> str:
    """The revision the spec asks for (its pinned one, else ``main``)."""
    return spec.data.revision or "main"


def known_commit(spec: BenchmarkSpec) -> str | None:
    """The commit the spec reads without asking the Hub: its pinned commit hash, or the one
    recorded for its revision at an earlier fetch; None when the Hub must be asked."""
    revision = asked_revision(spec)
    if COMMIT.match(revision):
        return revision
    ref = bench_folder(spec) / "refs" / revision
    try:
        text = ref.read_text(encoding="utf-8").strip()
    except OSError:
        return None
    return text if COMMIT.match(text) else None


def record_commit(spec: BenchmarkSpec, commit: str) -> None:
    """Remember that the spec's revision is ``commit`` (a pinned hash needs no record)."""
    revision = asked_revision(spec)
    if COMMIT.match(revision):
        return
    ref = bench_folder(spec) / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(ref, commit + "\n")


def media_key(spec: BenchmarkSpec) -> str:
    """What decides which media a spec's samples need: its annotation files, archives and
    media layouts (a variant that reads subtitles has another key)."""
    from evalkit.manifest import hash_json

    layouts = (spec.video, spec.image, spec.subtitles)
    return hash_json(
        [
            [f.model_dump(mode="json") for f in spec.files],
            spec.data.archives,
            [m.model_dump(mode="json") if m is not None else None for m in layouts],
        ]
    )


class RepoEntry(BaseModel):
    """One file of the release at its commit, as the Hub lists it."""

    model_config = ConfigDict(extra="forbid", frozen=True)
    size: int
    oid: str
    """Its git blob id (of the LFS pointer, for an LFS file)."""
    sha256: str | None = None
    """The sha256 of an LFS file's bytes (None: a plain git file, checked by ``oid``)."""


class ReleaseState(BaseModel):
    """``.evalkit/release.json``: what a release folder holds, so a later command needs no
    request for what is already there."""

    model_config = ConfigDict(extra="forbid")
    dataset: str
    commit: str
    tree: dict[str, RepoEntry] = Field(default_factory=dict)
    """Every file of the release at ``commit`` (an immutable listing)."""
    listings: dict[str, list[tuple[str, int]]] = Field(default_factory=dict)
    """A zip's members (name, declared size), read from its end before fetching it."""
    files: dict[str, str] = Field(default_factory=dict)
    """Repo files fetched and verified -> their path under the folder."""
    extracted: dict[str, str] = Field(default_factory=dict)
    """Archives extracted -> their folder."""
    complete: list[str] = Field(default_factory=list)
    """The specs (:func:`media_key`) whose every sample has its media in place (or known
    missing from the release): a variant reading other archives is not one of them."""
    missing: list[str] = Field(default_factory=list)
    """Media the samples name that the release does not hold (found nowhere in it)."""
    validated: str | None = None
    """``evalkit bench validate`` found nothing wrong here: ``media`` (annotations and
    every video) or ``annotations`` (``--no-media``); what ``evalkit bench pin`` needs."""

    @classmethod
    def read(cls, folder: Path) -> ReleaseState | None:
        """The state recorded in ``folder``; None when there is none (or it is unreadable:
        the release is then looked at again, never trusted)."""
        try:
            return cls.model_validate(json.loads((folder / STATE_FILE).read_text("utf-8")))
        except (OSError, ValueError, ValidationError):
            return None

    def write(self, folder: Path) -> None:
        """Record the state (atomically)."""
        path = folder / STATE_FILE
        path.parent.mkdir(parents=True, exist_ok=True)
        write_text_atomic(path, self.model_dump_json(indent=1))


def forget_commit(spec: BenchmarkSpec) -> None:
    """Forget the commit recorded for the spec's revision (the next fetch asks the Hub)."""
    (bench_folder(spec) / "refs" / asked_revision(spec)).unlink(missing_ok=True)
