"""Append-only results: one fsync'd JSON line per finished sample, resume by sample id.

A crash can at worst leave a torn last line (killed inside ``write``); opening the store
cuts that line off, so what remains is exactly the set of samples that finished. A write
that fails part-way (disk full, read-only) is cut back to the last whole record at once
and raises :class:`~evalkit.errors.DiskError`: the torn record is never counted, and the
file stays one a resume can open. Records
are keyed by sample id, never by position: resuming skips ids already present, whatever
order they finished in. The store holds typed records (:class:`~evalkit.records.SampleRecord`):
it writes each as :meth:`~evalkit.records.SampleRecord.line` and reads each line back with
:func:`~evalkit.records.check_line`, the one place either way.

Memory does not grow with the replies: the store keeps each sample's status only (what
resume needs) and reads the file a line at a time, on opening and for :meth:`records`, so a
run of 20,000 replies of 64k characters holds one of them at a time, never all.
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from evalkit.errors import DataError, DiskError, Problem, disk_error
from evalkit.records import SampleRecord, check_line


class Store:
    """Results of one benchmark in one run (``runs/<run-id>/<benchmark>.jsonl``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._status: dict[str, str] = {}  # id -> status of its latest record, first-written order
        try:
            self._repair_and_load()
            self._fd = os.open(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
        except OSError as exc:
            self._fd = -1
            raise self._disk_error(exc) from None
        self._size = os.fstat(self._fd).st_size  # bytes of whole records: where a cut goes

    def _repair_and_load(self) -> None:
        if not self.path.exists():
            return
        with open(self.path, "r+b") as f:
            good_end = _whole_lines_end(f)  # everything after the last newline is a torn write
            if good_end < os.fstat(f.fileno()).st_size:
                f.truncate(good_end)
                f.flush()
                os.fsync(f.fileno())
        for rec in self._read():
            self._status[rec.id] = rec.status  # a later record (a retry) supersedes an earlier one

    def _read(self) -> Iterator[SampleRecord]:
        """Each record of the file, read a line at a time."""
        if not self.path.exists():
            return
        with open(self.path, "rb") as f:
            for lineno, line in enumerate(f, 1):
                if not line.endswith(b"\n") or not line.strip():
                    continue  # blank, or a torn last line another writer is still writing
                rec = check_line(line, str(self.path), lineno)
                if isinstance(rec, Problem):
                    field = f"field {rec.field!r}: " if rec.field else ""
                    raise DataError(
                        f"{self.path}:{lineno}: not a valid result record ({field}{rec.message}); "
                        "the file was edited by hand or written by another tool; fix or delete "
                        "that line (its sample is then rerun) and resume"
                    )
                yield rec

    def append(self, record: SampleRecord) -> None:
        """Write one record durably (one line, fsync'd) before returning."""
        line = record.line().encode()
        with self._lock:
            if self._status.get(record.id) == "ok":
                raise DataError(f"{self.path}: sample {record.id!r} already has a finished record")
            self._write(line)
            self._status[record.id] = record.status

    def append_many(self, records: list[SampleRecord]) -> None:
        """Write several records durably with one fsync (a replica's batch: a crash before
        it returns loses them all, and resume reruns them, never a part twice)."""
        if not records:
            return
        lines = []
        with self._lock:
            batch: set[str] = set()
            for record in records:
                sid = record.id
                if sid in batch or self._status.get(sid) == "ok":
                    raise DataError(f"{self.path}: sample {sid!r} already has a finished record")
                batch.add(sid)
                lines.append(record.line())
            self._write("".join(lines).encode())
            for record in records:
                self._status[record.id] = record.status

    def _write(self, data: bytes) -> None:
        """Append ``data`` (whole lines) and fsync, every byte or none: a short or failed
        write is cut back to the last whole record, then raised as a DiskError."""
        view = memoryview(data)
        try:
            while view:
                written = os.write(self._fd, view)
                if written <= 0:  # no progress and no errno: as good as a full disk
                    raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
                view = view[written:]  # a short write: the rest is tried, and fails if full
            os.fsync(self._fd)
        except OSError as exc:
            self._cut_back()
            raise self._disk_error(exc) from None
        self._size += len(data)

    def _cut_back(self) -> None:
        """Truncate the file to its whole records (best effort: the store reopens to the
        last newline anyway)."""
        with contextlib.suppress(OSError):
            os.ftruncate(self._fd, self._size)
            os.fsync(self._fd)

    def _disk_error(self, exc: OSError) -> Exception:
        safe = f"{len(self._status)} records are safe"
        return disk_error(exc, self.path, safe) or DiskError(
            f"could not write {self.path} ({exc.strerror or exc}): {safe}; resume once fixed"
        )

    def done_ids(self, *, include_failed: bool = True) -> set[str]:
        """Ids that need no rerun: finished ones, and failed ones unless retrying failures."""
        with self._lock:
            return {sid for sid, status in self._status.items() if include_failed or status == "ok"}

    def statuses(self) -> dict[str, str]:
        """Each sample's latest status (ok, failed), without reading its record back."""
        with self._lock:
            return dict(self._status)

    def failures(self) -> list[SampleRecord]:
        """The latest record of each sample whose latest status is failed (read back from
        the file; the others are passed over, their replies never held)."""
        with self._lock:
            failed = {sid for sid, status in self._status.items() if status == "failed"}
            latest: dict[str, SampleRecord] = {}
            if failed:
                for rec in self._read():
                    if rec.id in failed:
                        latest[rec.id] = rec
            return list(latest.values())

    def records(self) -> list[SampleRecord]:
        """The latest record of every sample, in the order they were first written (read
        back from the file: the store keeps statuses only)."""
        with self._lock:
            latest: dict[str, SampleRecord] = {}
            for rec in self._read():
                latest[rec.id] = rec
            return list(latest.values())

    def __iter__(self) -> Iterator[SampleRecord]:
        return iter(self.records())

    def __len__(self) -> int:
        return len(self._status)

    def close(self) -> None:
        """Close the file (records are already durable)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def _whole_lines_end(f: BinaryIO) -> int:
    """The offset just past the file's last newline (0 without one), found by reading
    backwards from the end in blocks, not by reading the file."""
    end = os.fstat(f.fileno()).st_size
    pos = end
    while pos > 0:
        start = max(0, pos - 65536)
        f.seek(start)
        block = f.read(pos - start)
        cut = block.rfind(b"\n")
        if cut >= 0:
            return start + cut + 1
        pos = start
    return 0
