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
"""

from __future__ import annotations

import contextlib
import errno
import os
import threading
from collections.abc import Iterator
from pathlib import Path

from evalkit.errors import DataError, DiskError, Problem, disk_error
from evalkit.records import SampleRecord, check_line


class Store:
    """Results of one benchmark in one run (``runs/<run-id>/<benchmark>.jsonl``)."""

    def __init__(self, path: str | Path) -> None:
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        self._records: dict[str, SampleRecord] = {}
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
        data = self.path.read_bytes()
        good_end = data.rfind(b"\n") + 1  # everything after the last newline is a torn write
        if good_end < len(data):
            with open(self.path, "r+b") as f:
                f.truncate(good_end)
                f.flush()
                os.fsync(f.fileno())
        for lineno, line in enumerate(data[:good_end].splitlines(), 1):
            if not line.strip():
                continue
            rec = check_line(line, str(self.path), lineno)
            if isinstance(rec, Problem):
                field = f"field {rec.field!r}: " if rec.field else ""
                raise DataError(
                    f"{self.path}:{lineno}: not a valid result record ({field}{rec.message}); "
                    "the file was edited by hand or written by another tool; fix or delete "
                    "that line (its sample is then rerun) and resume"
                )
            self._records[rec.id] = rec  # a later record (a retry) supersedes an earlier one

    def append(self, record: SampleRecord) -> None:
        """Write one record durably (one line, fsync'd) before returning."""
        line = record.line().encode()
        with self._lock:
            prev = self._records.get(record.id)
            if prev is not None and prev.status == "ok":
                raise DataError(f"{self.path}: sample {record.id!r} already has a finished record")
            self._write(line)
            self._records[record.id] = record

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
                prev = self._records.get(sid)
                if sid in batch or (prev is not None and prev.status == "ok"):
                    raise DataError(f"{self.path}: sample {sid!r} already has a finished record")
                batch.add(sid)
                lines.append(record.line())
            self._write("".join(lines).encode())
            for record in records:
                self._records[record.id] = record

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
        safe = f"{len(self._records)} records are safe"
        return disk_error(exc, self.path, safe) or DiskError(
            f"could not write {self.path} ({exc.strerror or exc}): {safe}; resume once fixed"
        )

    def done_ids(self, *, include_failed: bool = True) -> set[str]:
        """Ids that need no rerun: finished ones, and failed ones unless retrying failures."""
        with self._lock:
            return {
                sid for sid, rec in self._records.items() if include_failed or rec.status == "ok"
            }

    def records(self) -> list[SampleRecord]:
        """The latest record of every sample, in the order they were first written."""
        with self._lock:
            return list(self._records.values())

    def __iter__(self) -> Iterator[SampleRecord]:
        return iter(self.records())

    def __len__(self) -> int:
        return len(self._records)

    def close(self) -> None:
        """Close the file (records are already durable)."""
        if self._fd >= 0:
            os.close(self._fd)
            self._fd = -1

    def __enter__(self) -> Store:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
