"""In-memory weight sync from the trainer into a vLLM rollout engine, in buckets.

The trainer packs its named tensors into buckets of at most ``bucket_mb`` and hands each
bucket to every vLLM worker through ``collective_rpc``; only a small, msgpack-able
handle travels by RPC (vLLM refuses to pickle RPC arguments unless
``VLLM_ALLOW_INSECURE_SERIALIZATION`` is set):

- ``shm`` (CPU): the bucket is one POSIX shared-memory segment; the handle holds its
  name and a manifest (name, dtype, shape, byte offset) of the tensors in it. The worker
  maps it, copies the tensors out, unmaps; the trainer unlinks it once the RPC returns.
  Nothing is written to a file system (the segment lives in ``/dev/shm``, i.e. RAM).
- ``cuda_ipc`` (GPU): the bucket is one CUDA buffer; the handle holds its CUDA IPC handle
  (torch's ``reduce_tensor``, pickled to bytes) and the manifest. The worker opens it on
  its own current device (colocated: the same GPU), copies out, drops it.
- ``file``: one safetensors file per bucket in a temporary directory (``TMPDIR``), for
  workers that share a file system but not memory; never chosen by ``auto``.

Worker side (:class:`WeightSyncExtension`, vLLM's ``worker_extension_cls``): one sync is
one ``trainer_load_bucket`` RPC per bucket, the first one beginning and the last one
finishing the reload: the steps of vLLM's in-place ``reload_weights``
(``vllm/model_executor/model_loader/reload/inplace.py``: ``initialize_layerwise_reload``,
``model.load_weights``, ``finalize_layerwise_reload``) spread over several calls, so that
kernel-format processing (e.g. packed CPU linears) is redone once all of a layer's
weights have arrived, whichever bucket they came in. Tied weights are sent once (vLLM's
loaders skip ``lm_head`` of tied models and take the embedding).
"""

from __future__ import annotations

import contextlib
import logging
import mmap
import os
import pickle
import secrets
import time
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

import torch

from evalkit.errors import EvalkitError

log = logging.getLogger(__name__)
ALIGN = 64  # byte alignment of every tensor inside a bucket
TRANSPORTS = ("auto", "shm", "cuda_ipc", "file")

NamedTensors = Iterable[tuple[str, torch.Tensor]]
Rpc = Callable[..., list[Any]]
"""``rpc(method, *args)``: run a worker-extension method on every worker, return results."""


class WeightSync(Protocol):
    """Something that makes a rollout engine hold the given weights."""

    def send(self, named_tensors: NamedTensors) -> SyncStats:
        """Load ``named_tensors`` (HF names) into the engine; returns what was moved."""
        ...


@dataclass
class SyncStats:
    """What one sync moved and how long it took."""

    tensors: int = 0
    bytes: int = 0
    buckets: int = 0
    seconds: float = 0.0


def unique_tensors(named: NamedTensors) -> Iterator[tuple[str, torch.Tensor]]:
    """``named`` with tied tensors (same storage, offset and shape) given once, first name."""
    seen: set[tuple[int, int, tuple[int, ...]]] = set()
    for name, t in named:
        local = getattr(t, "_local_tensor", t)  # a DTensor (FSDP2): its shard's storage
        key = (local.untyped_storage().data_ptr(), int(local.storage_offset()), tuple(t.shape))
        if key in seen:
            continue
        seen.add(key)
        yield name, t


def buckets(named: NamedTensors, max_bytes: int) -> Iterator[list[tuple[str, torch.Tensor]]]:
    """Consecutive groups of at most ``max_bytes`` (a larger tensor travels alone)."""
    group: list[tuple[str, torch.Tensor]] = []
    size = 0
    for name, t in named:
        nbytes = _aligned(t.numel() * t.element_size())
        if group and size + nbytes > max_bytes:
            yield group
            group, size = [], 0
        group.append((name, t))
        size += nbytes
    if group:
        yield group


def _aligned(n: int) -> int:
    return (n + ALIGN - 1) // ALIGN * ALIGN


def _manifest(group: list[tuple[str, torch.Tensor]]) -> tuple[list[list[Any]], int]:
    """[[name, dtype, shape, offset, nbytes], ...] and the bucket's total size."""
    rows, offset = [], 0
    for name, t in group:
        nbytes = t.numel() * t.element_size()
        rows.append([name, str(t.dtype).removeprefix("torch."), list(t.shape), offset, nbytes])
        offset += _aligned(nbytes)
    return rows, max(offset, ALIGN)


def _fill(buffer: torch.Tensor, group: list[tuple[str, torch.Tensor]], rows: list[Any]) -> None:
    """Copy each tensor's bytes into the uint8 ``buffer`` at its manifest offset. On CPU a
    plain memcpy (numpy): torch's multi-threaded copy stalled for ~0.3 s at a time here
    when the cores were busy (the engine's worker shares them)."""
    cpu: Any = buffer.numpy() if buffer.device.type == "cpu" else None
    for (_, t), (_, _, _, offset, nbytes) in zip(group, rows, strict=True):
        src = t.detach().contiguous().reshape(-1).view(torch.uint8)
        if cpu is not None:
            cpu[offset : offset + nbytes] = src.cpu().numpy()
        else:
            buffer[offset : offset + nbytes].copy_(src, non_blocking=False)


def _views(buffer: torch.Tensor, rows: list[Any]) -> list[tuple[str, torch.Tensor]]:
    """The tensors of a bucket, as views of its uint8 ``buffer``."""
    out = []
    for name, dtype, shape, offset, nbytes in rows:
        raw = buffer[offset : offset + nbytes]
        out.append((name, raw.view(getattr(torch, dtype)).reshape(shape)))
    return out


@dataclass
class EngineWeightSync:
    """:class:`WeightSync` through a vLLM engine's ``collective_rpc``, bucket by bucket."""

    rpc: Rpc
    transport: str = "shm"
    bucket_mb: float = 512.0
    dtype: torch.dtype | None = None
    """Cast floating tensors to this dtype before sending (the engine's dtype)."""
    scratch: str = field(default_factory=lambda: os.environ.get("TMPDIR", "/tmp"))
    """Directory of the ``file`` transport's temporary files."""
    pool: ShmPool = field(default_factory=lambda: ShmPool())

    def __post_init__(self) -> None:
        # the segments outlive single syncs; unlinked when this object goes (or at exit)
        weakref.finalize(self, self.pool.close)  # (the pool has its own finaliser too)

    def close(self) -> None:
        """Unlink the shared-memory segments (the next send makes new ones)."""
        self.pool.close()

    def send(self, named_tensors: NamedTensors, unique: bool = True) -> SyncStats:
        """One RPC per bucket, the first also beginning the reload and the last finishing
        it (each RPC costs a round trip through the engine core: tens of ms on CPU).
        ``unique=False``: the tensors are distinct already and may be transient (gathered
        one by one): a freed tensor's storage address can come back for the next one, so
        :func:`unique_tensors`' storage key would drop it."""
        if self.transport not in ("shm", "cuda_ipc", "file"):
            raise EvalkitError(f"weight sync transport {self.transport!r}: use shm, cuda_ipc, file")
        stats, t0 = SyncStats(), time.perf_counter()
        limit = max(int(self.bucket_mb * 2**20), ALIGN)
        named = unique_tensors(named_tensors) if unique else named_tensors
        groups = buckets(self._cast(named), limit)
        group = next(groups, None)
        if group is None:  # nothing to send: still a complete (empty) reload
            self.rpc("trainer_begin_sync")
            self.rpc("trainer_finish_sync")
        while group is not None:
            following = next(groups, None)  # one ahead: is this bucket the last?
            handle, release = self._pack(group, stats.buckets)
            try:
                self.rpc("trainer_load_bucket", handle, stats.buckets == 0, following is None)
            finally:
                release()
            stats.tensors += len(group)
            stats.bytes += sum(t.numel() * t.element_size() for _, t in group)
            stats.buckets += 1
            group = following
        stats.seconds = time.perf_counter() - t0
        return stats

    def _cast(self, named: NamedTensors) -> Iterator[tuple[str, torch.Tensor]]:
        for name, t in named:
            if hasattr(t, "full_tensor"):  # FSDP2 shard: gathered (a collective on all ranks)
                t = t.full_tensor()
            t = t.detach()
            if self.dtype is not None and t.is_floating_point() and t.dtype != self.dtype:
                t = t.to(self.dtype)
            yield name, t

    def _pack(self, group: list[tuple[str, torch.Tensor]], index: int) -> tuple[dict, Any]:
        rows, size = _manifest(group)
        if self.transport == "shm":
            seg = self.pool.segment(index, size)
            _fill(torch.frombuffer(seg.buf, dtype=torch.uint8, count=size), group, rows)
            return {"kind": "shm", "name": seg.name, "size": seg.size, "rows": rows}, _noop
        if self.transport == "cuda_ipc":
            return _pack_cuda_ipc(group, rows, size)
        return _pack_file(group, self.scratch)


def _noop() -> None:
    pass


SEGMENT_PREFIX = "ek-sync-"
"""Segment names: ``ek-sync-<creator pid>-<random>``, so a left-over one names its owner."""


class ShmPool:
    """Shared-memory segments kept from sync to sync, one per bucket index: refilled in
    place, their pages are faulted in once (a fresh 400 MB segment costs ~10x a refill
    here). Host memory: about the model's size in the engine's dtype, for the run.

    /dev/shm is RAM and outlives processes, so every exit path unlinks them: ``close``
    (a normal end), the finaliser at interpreter exit (an exception, SIGTERM through the
    trainer's handler), and for a process killed outright (SIGKILL, the OOM killer) the
    next pool made on the machine sweeps segments whose creator is gone.
    """

    def __init__(self) -> None:
        self.segments: list[Any] = []
        weakref.finalize(self, _unlink_all, self.segments)

    def segment(self, index: int, size: int) -> Any:
        """Segment ``index``, at least ``size`` bytes (replaced when too small)."""
        from multiprocessing import shared_memory

        while len(self.segments) <= index:
            self.segments.append(None)
        seg = self.segments[index]
        if seg is None or seg.size < size:
            if seg is not None:
                _unlink(seg)
            if not any(self.segments):
                sweep_stale_segments()
            name = f"{SEGMENT_PREFIX}{os.getpid()}-{secrets.token_hex(6)}"
            seg = self.segments[index] = shared_memory.SharedMemory(name, create=True, size=size)
        return seg

    def close(self) -> None:
        """Unlink every segment (workers that still map one keep it until they unmap)."""
        _unlink_all(self.segments)


def _unlink_all(segments: list[Any]) -> None:
    for seg in segments:
        if seg is not None:
            with contextlib.suppress(FileNotFoundError):  # unlinked already
                _unlink(seg)
    segments.clear()


def sweep_stale_segments(shm_dir: str = "/dev/shm") -> list[str]:
    """Unlink ``ek-sync-<pid>-*`` segments whose creator process is gone (killed before
    it could unlink them); the names unlinked."""
    gone = []
    with contextlib.suppress(OSError):
        for name in os.listdir(shm_dir):
            pid = name[len(SEGMENT_PREFIX) :].split("-", 1)[0]
            if not name.startswith(SEGMENT_PREFIX) or not pid.isdigit():
                continue
            if not _pid_alive(int(pid)):
                with contextlib.suppress(OSError):
                    os.unlink(os.path.join(shm_dir, name))
                    gone.append(name)
    if gone:
        log.info("unlinked %d weight-sync segment(s) left by killed processes", len(gone))
    return gone


def _pid_alive(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:  # someone else's process: alive
        return True
    return True


def _unlink(seg: Any) -> None:
    with contextlib.suppress(BufferError):  # a view is alive here: unmapped when it goes
        seg.close()
    seg.unlink()


def _pack_cuda_ipc(group: list[Any], rows: list[Any], size: int) -> tuple[dict[str, Any], Any]:
    from torch.multiprocessing.reductions import reduce_tensor

    device = group[0][1].device
    if device.type != "cuda":
        device = torch.device("cuda", torch.cuda.current_device())
    buffer = torch.empty(size, dtype=torch.uint8, device=device)
    _fill(buffer, group, rows)
    torch.cuda.synchronize(device)  # the worker reads the buffer from another process
    ipc = pickle.dumps(reduce_tensor(buffer))

    def release() -> None:
        nonlocal buffer
        del buffer  # the worker has copied it out (the RPC returned)

    return {"kind": "cuda_ipc", "ipc": ipc, "rows": rows}, release


def _pack_file(group: list[Any], scratch: str) -> tuple[dict[str, Any], Any]:
    import tempfile

    from safetensors.torch import save_file

    tmp = tempfile.TemporaryDirectory(prefix="trainer-sync-", dir=scratch)
    path = os.path.join(tmp.name, "bucket.safetensors")
    save_file({n: t.contiguous().cpu() for n, t in group}, path)
    return {"kind": "file", "path": path}, tmp.cleanup


def open_bucket(handle: dict[str, Any]) -> list[tuple[str, torch.Tensor]]:
    """Worker side: the bucket's tensors (``shm``: views valid until the trainer's next
    sync; others: copies in this process's own memory)."""
    kind = handle.get("kind")
    if kind == "shm":
        return _open_shm(handle)
    if kind == "cuda_ipc":
        fn, args = pickle.loads(handle["ipc"])  # our own trainer's handle, not input
        args = list(args)
        args[6] = torch.cuda.current_device()  # the storage's device, as this process numbers it
        buffer = fn(*args)
        out = [(n, t.clone()) for n, t in _views(buffer, handle["rows"])]
        del buffer
        return out
    if kind == "file":
        from safetensors.torch import load_file

        return list(load_file(handle["path"]).items())
    raise EvalkitError(f"weight sync: unknown bucket kind {kind!r} (trainer and worker differ?)")


_MAPS: dict[str, tuple[Any, torch.Tensor]] = {}
"""Worker side: segment name -> (mapping, its bytes), kept while the trainer reuses it."""


def _open_shm(handle: dict[str, Any]) -> list[tuple[str, torch.Tensor]]:
    """Views of the bucket's tensors in the (cached) mapping, no copy: vLLM's layerwise
    reload keeps what it is given until the layer is complete and then copies it, and the
    trainer refills the segment only for the next sync. Mapped without multiprocessing's
    resource tracker (the trainer owns and unlinks it; a tracked attach would unlink it
    again, or warn, when this worker exits)."""
    import _posixshmem

    name, size = handle["name"], handle["size"]
    if name not in _MAPS:
        fd = _posixshmem.shm_open("/" + name, os.O_RDWR, mode=0o600)
        try:
            mapped = mmap.mmap(fd, size)
        finally:
            os.close(fd)
        _MAPS[name] = (mapped, torch.frombuffer(mapped, dtype=torch.uint8, count=size))
    return _views(_MAPS[name][1], handle["rows"])


def forget_maps(keep: set[str]) -> None:
    """Drop the worker's mappings of segments not in ``keep`` (replaced by the trainer)."""
    for name in set(_MAPS) - keep:
        del _MAPS[name]  # unmapped once no tensor views it


def resolve_transport(transport: str, device_type: str) -> str:
    """``auto`` -> ``cuda_ipc`` on a CUDA engine, ``shm`` on CPU; others as given."""
    if transport not in TRANSPORTS:
        raise EvalkitError(f"rollout.sync_transport={transport!r}: choose one of {TRANSPORTS}")
    if transport != "auto":
        return transport
    return "cuda_ipc" if device_type == "cuda" else "shm"


class WeightSyncExtension:
    """vLLM worker extension (``worker_extension_cls``): load weights sent by the trainer."""

    model_runner: Any  # provided by the vLLM worker class this extends
    vllm_config: Any
    reload_weights: Any

    def trainer_begin_sync(self) -> None:
        """Start an in-place reload: layers wait until all their weights have arrived."""
        from vllm.model_executor.model_loader.reload.layerwise import (
            initialize_layerwise_reload,
        )

        self._trainer_segments: set[str] = set()
        with self._config():
            initialize_layerwise_reload(self.model_runner.get_model())

    def trainer_load_bucket(
        self, handle: dict[str, Any], first: bool = False, last: bool = False
    ) -> int:
        """Load one bucket (see :func:`open_bucket`), beginning the reload before the
        ``first`` and finishing it after the ``last``; returns how many tensors it held."""
        if first:
            self.trainer_begin_sync()
        if handle.get("kind") == "shm":
            self._trainer_segments.add(handle["name"])
        weights = open_bucket(handle)
        with self._config(), torch.no_grad():
            self.model_runner.get_model().load_weights(iter(weights))
        if last:
            self.trainer_finish_sync()
        return len(weights)

    def trainer_finish_sync(self) -> None:
        """Finish the reload; drop what was computed with the old weights (as vLLM's
        ``GPUModelRunner.reload_weights`` does)."""
        from vllm.model_executor.model_loader.reload.layerwise import finalize_layerwise_reload

        runner = self.model_runner
        with self._config():
            finalize_layerwise_reload(runner.get_model(), self.vllm_config.model_config)
        runner.reset_lora_state()
        runner.reset_encoder_cache()
        runner.reset_mm_cache()
        forget_maps(getattr(self, "_trainer_segments", set()))

    def trainer_load_weights(self, path: str) -> int:
        """Load a whole safetensors file (the old file round trip, kept for comparison)."""
        from safetensors.torch import load_file

        weights = load_file(path)
        self.reload_weights(weights_iterator=iter(weights.items()), is_checkpoint_format=True)
        return len(weights)

    def _config(self) -> Any:
        from vllm.config import set_current_vllm_config

        return set_current_vllm_config(self.vllm_config)
