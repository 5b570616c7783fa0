"""A release's archives: which repo files form one, what a zip holds (read from its end
over ranged requests, before anything is downloaded), and a safe extraction.

Extraction trusts nothing in the archive: a member whose path escapes the folder (``../``,
an absolute path), a symbolic or hard link pointing outside it, a device, fifo or other
special file, and a member whose data is larger than the size the archive's listing
declares are refused, named, and never written; so is an encrypted or damaged member.
Members are written into a folder of their own that the caller renames into place once
the whole archive is out (``evalkit.hub.fetch``), so a refused or killed extraction
leaves nothing that looks extracted.
"""

from __future__ import annotations

import io
import os
import re
import stat
import tarfile
import zipfile
import zlib
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path, PurePosixPath
from typing import BinaryIO, Literal

from evalkit.errors import DataError

ArchiveKind = Literal["zip", "tar"]

_SPLIT = re.compile(
    r"^(?P<stem>.+?\.(?:zip|tar|tar\.gz|tgz))[._-]?(?:part[._-]?)?(?P<index>[a-z]{2,3}|\d{1,4})$"
)
"""A part of an archive cut by ``split`` (``videos.tar.part.aa``, ``videos.tar.00``)."""
_WHOLE = re.compile(r"^.+\.(?:zip|tar|tar\.gz|tgz)$")
_CHUNK = 1 << 20


class ArchiveRefused(DataError):
    """An archive holds a member that must not be written (see the module)."""


@dataclass(frozen=True)
class Archive:
    """One archive of a release: a file, or the parts of one cut into pieces."""

    name: str
    """The archive as a whole (``videos_chunked_01.zip``, ``videos.tar`` for its parts)."""
    parts: tuple[str, ...]
    """Its files in the repo, in order."""
    kind: ArchiveKind

    @property
    def folder(self) -> str:
        """Where it is extracted, relative to the release folder."""
        return f"media/{self.name}"

    @property
    def listable(self) -> bool:
        """Whether its members can be read before it is downloaded (a zip's listing sits at
        its end; a tar has none but its whole stream)."""
        return self.kind == "zip" and len(self.parts) == 1


def glob_match(pattern: str, path: str) -> bool:
    """``path`` matches ``pattern`` as ``glob`` would match it under the release folder:
    part by part, ``*`` never crossing a ``/``."""
    pat, parts = pattern.strip("/").split("/"), path.split("/")
    return len(pat) == len(parts) and all(
        fnmatchcase(p, q) for p, q in zip(parts, pat, strict=True)
    )


def archives_of(globs: Iterable[str], paths: Iterable[str]) -> list[Archive]:
    """The archives among ``paths`` (repo files) that ``globs`` name, split parts grouped
    under their whole name, in name order. ValueError for a named file that is no zip or
    tar (a spec error)."""
    globs = list(globs)
    groups: dict[str, list[tuple[str, str]]] = {}
    for path in sorted(paths):
        if not any(glob_match(g, path) for g in globs):
            continue
        name = PurePosixPath(path).name
        folder = str(PurePosixPath(path).parent)
        prefix = "" if folder == "." else f"{folder}/"
        if (m := _SPLIT.match(name)) and not _WHOLE.match(name):
            groups.setdefault(prefix + m.group("stem"), []).append((m.group("index"), path))
        elif _WHOLE.match(name):
            groups.setdefault(path, []).append(("", path))
        else:
            raise ValueError(f"{path}: named by data.archives but neither a zip nor a tar")
    out = []
    for whole, parts in sorted(groups.items()):
        kind: ArchiveKind = "zip" if whole.endswith(".zip") else "tar"
        out.append(Archive(whole, tuple(p for _, p in sorted(parts)), kind))
    return out


# --- listing a zip over ranged reads ---------------------------------------------------


class RangeReader(io.RawIOBase):
    """A seekable read-only file over ``fetch(start, end) -> bytes`` (ranged requests), of
    a known ``size``: ``zipfile`` reads a zip's listing through it from the zip's end."""

    def __init__(self, fetch: Callable[[int, int], bytes], size: int, block: int = 32768):
        self._fetch, self._size, self._block = fetch, size, block
        self._pos = 0
        self._cache: tuple[int, bytes] = (0, b"")

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._pos

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._pos, io.SEEK_END: self._size}[whence]
        self._pos = max(0, base + offset)
        return self._pos

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        want = min(len(buffer), self._size - self._pos)
        if want <= 0:
            return 0
        start, data = self._cache
        if not (start <= self._pos and self._pos + want <= start + len(data)):
            # a window reaching the file's end when near it: a zip's listing and the
            # record that points at it come in one request
            start = max(0, min(self._pos, self._size - max(want, self._block)))
            end = min(self._size, max(self._pos + want, start + self._block)) - 1
            data = self._fetch(start, end)
            self._cache = (start, data)
        piece = data[self._pos - start : self._pos - start + want]
        buffer[: len(piece)] = piece
        self._pos += len(piece)
        return len(piece)


def zip_members(reader: BinaryIO) -> list[tuple[str, int]]:
    """(name, declared size) of each file of a zip, from its listing only."""
    with zipfile.ZipFile(reader) as z:
        return [(i.filename, i.file_size) for i in z.infolist() if not i.is_dir()]


# --- safe extraction ---------------------------------------------------------------------


def extract(archive: Archive, files: list[Path], dest: Path) -> int:
    """Extract ``archive`` (its ``files``, in order) into the new folder ``dest``; returns
    the bytes written. ArchiveRefused naming the member for anything unsafe (see the
    module): the caller removes ``dest`` then."""
    dest.mkdir(parents=True)
    if archive.kind == "zip":
        if len(files) != 1:
            raise ArchiveRefused(f"{archive.name}: a zip cut in parts is not supported")
        return _extract_zip(archive.name, files[0], dest)
    with _Concat(files) as stream:
        return _extract_tar(archive.name, stream, dest)


def _member_path(archive: str, name: str, dest: Path) -> Path:
    """Where member ``name`` goes under ``dest``; refused when it would land outside."""
    clean = name.replace("\\", "/")
    parts = [p for p in clean.split("/") if p not in ("", ".")]
    if clean.startswith("/") or re.match(r"^[A-Za-z]:", clean) or not parts:
        raise ArchiveRefused(_refused(archive, name, "has an absolute path"))
    if ".." in parts or "\0" in clean:
        raise ArchiveRefused(_refused(archive, name, "escapes the folder (../)"))
    return dest.joinpath(*parts)


def _refused(archive: str, member: str, why: str) -> str:
    return (
        f"{archive}: member {member!r} {why}: the archive is refused and nothing of it is "
        "kept (a damaged or hostile release; tell the dataset's maintainers)"
    )


def _check_link(archive: str, name: str, target: str, where: Path, dest: Path) -> None:
    """A link at ``where`` pointing to ``target`` must stay inside ``dest``."""
    if target.startswith("/") or not target:
        raise ArchiveRefused(_refused(archive, name, f"links outside the folder ({target})"))
    resolved = os.path.normpath(os.path.join(os.path.dirname(where), target))
    if not Path(resolved).is_relative_to(dest):
        raise ArchiveRefused(_refused(archive, name, f"links outside the folder ({target})"))


def _open_new(archive: str, name: str, path: Path, dest: Path) -> BinaryIO:
    """A new file at ``path``, its folder made, never through a link that leaves ``dest``."""
    path.parent.mkdir(parents=True, exist_ok=True)
    if not Path(os.path.realpath(path.parent)).is_relative_to(os.path.realpath(dest)):
        raise ArchiveRefused(_refused(archive, name, "is written through a link outside"))
    try:
        fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, 0o644)
    except FileExistsError:
        raise ArchiveRefused(_refused(archive, name, "appears twice")) from None
    return os.fdopen(fd, "wb")


def _copy_bounded(
    archive: str, name: str, chunks: Iterable[bytes], out: BinaryIO, declared: int
) -> int:
    written = 0
    for chunk in chunks:
        written += len(chunk)
        if written > declared:
            raise ArchiveRefused(
                _refused(archive, name, f"holds more than the {declared} bytes it declares")
            )
        out.write(chunk)
    return written


def _extract_zip(archive: str, path: Path, dest: Path) -> int:
    try:
        z = zipfile.ZipFile(path)
    except zipfile.BadZipFile as exc:
        raise ArchiveRefused(f"{archive}: not a readable zip ({exc})") from None
    with z:
        infos = z.infolist()
        links = {}
        for info in infos:  # every member checked before one is written
            where = _member_path(archive, info.filename, dest)
            mode = info.external_attr >> 16 if info.create_system == 3 else 0
            if info.flag_bits & 0x1:
                raise ArchiveRefused(_refused(archive, info.filename, "is encrypted"))
            if stat.S_ISLNK(mode):
                target = z.read(info).decode("utf-8", "replace")
                _check_link(archive, info.filename, target, where, dest)
                links[info.filename] = target
            elif stat.S_IFMT(mode) and not (stat.S_ISREG(mode) or stat.S_ISDIR(mode)):
                raise ArchiveRefused(_refused(archive, info.filename, "is a special file"))
        written = 0
        with open(path, "rb") as raw:
            for info in infos:
                where = _member_path(archive, info.filename, dest)
                if info.is_dir():
                    where.mkdir(parents=True, exist_ok=True)
                elif info.filename in links:
                    where.parent.mkdir(parents=True, exist_ok=True)
                    os.symlink(links[info.filename], where)
                else:
                    with _open_new(archive, info.filename, where, dest) as out:
                        chunks = _zip_data(archive, z, info, raw)
                        written += _copy_bounded(
                            archive, info.filename, chunks, out, info.file_size
                        )
        return written


def _zip_data(
    archive: str, z: zipfile.ZipFile, info: zipfile.ZipInfo, raw: BinaryIO
) -> Iterable[bytes]:
    """A member's bytes, inflated here for stored and deflated members so that data beyond
    the declared size is seen (zipfile's reader cuts it off at that size), CRC checked."""
    if info.compress_type not in (zipfile.ZIP_STORED, zipfile.ZIP_DEFLATED):
        with z.open(info) as f:  # bzip2 / lzma: zipfile's reader, bounded by the caller
            yield from iter(lambda: f.read(_CHUNK), b"")
        return
    raw.seek(info.header_offset)
    header = raw.read(30)
    if header[:4] != b"PK\x03\x04":
        raise ArchiveRefused(_refused(archive, info.filename, "has no local header (damaged)"))
    raw.seek(
        info.header_offset
        + 30
        + int.from_bytes(header[26:28], "little")
        + int.from_bytes(header[28:30], "little")
    )
    left = info.compress_size
    inflate = zlib.decompressobj(-zlib.MAX_WBITS) if info.compress_type else None
    crc = 0
    while left > 0:
        block = raw.read(min(_CHUNK, left))
        if not block:
            raise ArchiveRefused(_refused(archive, info.filename, "is cut short (damaged)"))
        left -= len(block)
        # inflated a bounded piece at a time: a bomb is refused by the caller as soon as
        # it passes the declared size, never inflated whole into memory
        out = inflate.decompress(block, _CHUNK) if inflate else block
        crc = zlib.crc32(out, crc)
        yield out
        while inflate is not None and inflate.unconsumed_tail:
            out = inflate.decompress(inflate.unconsumed_tail, _CHUNK)
            crc = zlib.crc32(out, crc)
            yield out
    if inflate is not None:
        tail = inflate.flush()
        crc = zlib.crc32(tail, crc)
        yield tail
    if crc != info.CRC:
        raise ArchiveRefused(_refused(archive, info.filename, "fails its CRC check (damaged)"))


def _extract_tar(archive: str, stream: BinaryIO, dest: Path) -> int:
    written = 0
    try:
        with tarfile.open(fileobj=stream, mode="r|*") as tar:
            for member in tar:
                written += _tar_member(archive, tar, member, dest)
    except tarfile.TarError as exc:
        raise ArchiveRefused(f"{archive}: not a readable tar stream ({exc})") from None
    return written


def _tar_member(archive: str, tar: tarfile.TarFile, member: tarfile.TarInfo, dest: Path) -> int:
    where = _member_path(archive, member.name, dest)
    if member.isdir():
        where.mkdir(parents=True, exist_ok=True)
        return 0
    if member.issym():
        _check_link(archive, member.name, member.linkname, where, dest)
        where.parent.mkdir(parents=True, exist_ok=True)
        os.symlink(member.linkname, where)
        return 0
    if member.islnk():
        # a hard link names another member of the archive, relative to its top
        target = _member_path(archive, member.linkname, dest)
        if not target.is_file() or target.is_symlink():
            raise ArchiveRefused(
                _refused(archive, member.name, f"links to {member.linkname!r}, not a file above it")
            )
        where.parent.mkdir(parents=True, exist_ok=True)
        os.link(target, where)
        return 0
    if not member.isreg():
        raise ArchiveRefused(_refused(archive, member.name, "is a device or other special file"))
    source = tar.extractfile(member)
    assert source is not None  # a regular member always has data
    with _open_new(archive, member.name, where, dest) as out:
        chunks = iter(lambda: source.read(_CHUNK), b"")
        return _copy_bounded(archive, member.name, chunks, out, member.size)


class _Concat(io.RawIOBase):
    """The files of an archive cut in parts, read as one stream."""

    def __init__(self, files: list[Path]) -> None:
        self._files = list(files)
        self._current: BinaryIO | None = None

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: memoryview) -> int:  # type: ignore[override]
        while True:
            if self._current is None:
                if not self._files:
                    return 0
                self._current = open(self._files.pop(0), "rb")  # noqa: SIM115 - closed below
            n = self._current.readinto(buffer)  # type: ignore[attr-defined]
            if n:
                return int(n)
            self._current.close()
            self._current = None

    def close(self) -> None:
        if self._current is not None:
            self._current.close()
            self._current = None
        super().close()

    def __enter__(self) -> BinaryIO:  # type: ignore[override]
        return io.BufferedReader(self, _CHUNK)
