"""A local stand-in for the Hugging Face Hub, for tests and perf scripts only.

It serves, on 127.0.0.1, the endpoints ``huggingface_hub`` (2.x) calls for
``snapshot_download``, ``hf_hub_download``, ``dataset_info`` / ``model_info`` and
``list_repo_tree``, with the headers the client reads (``X-Repo-Commit``, ``ETag``,
``X-Linked-Etag`` / ``X-Linked-Size`` for LFS files, ``Content-Length``,
``Content-Range``): point ``HF_ENDPOINT`` at :attr:`HubStandIn.url` and the real client
talks to it as to the Hub. LFS files are answered as the Hub answers them: a 302 from
``/resolve/`` to a "CDN" (a second port: another origin, so the client drops the
authorization header as it does for the real CDN) that serves the bytes, ranged requests
included. A gated repo answers ``/resolve/`` with 401 (403 to a token that did not accept
its terms) and ``X-Error-Code: GatedRepo``.

Switches a test can pull: :meth:`HubStandIn.cut` (a transfer that stops midway: the
headers promise the whole file, the connection closes after some bytes), :meth:`damage`
(wrong bytes of the right length), :meth:`stall` (a transfer that waits midway until
released: a process can be killed mid-download deterministically), :attr:`throttle_bps`
(a slow link), and :attr:`log` (every request, for "made no request" checks).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import re
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Literal
from urllib.parse import parse_qs, quote, unquote, urlsplit

RepoKind = Literal["model", "dataset"]

LFS_SUFFIXES = (
    ".zip",
    ".tar",
    ".parquet",
    ".safetensors",
    ".mp4",
    ".mkv",
    ".webm",
    ".avi",
    ".bin",
)
"""Files stored in LFS unless a repo says otherwise (as a release's .gitattributes would);
split tar parts (``videos.tar.part.aa``) are LFS too."""


def git_blob_oid(data: bytes) -> str:
    """The git object id (sha1) of a file's bytes, as the Hub gives non-LFS files."""
    return hashlib.sha1(b"blob %d\0" % len(data) + data).hexdigest()


def _is_lfs(path: str) -> bool:
    name = path.rsplit("/", 1)[-1]
    return name.endswith(LFS_SUFFIXES) or ".tar.part" in name or ".zip.part" in name


@dataclass(frozen=True)
class HubFile:
    """One file of a repo snapshot."""

    path: str
    data: bytes
    lfs: bool

    @property
    def size(self) -> int:
        """Its size in bytes."""
        return len(self.data)

    @property
    def sha256(self) -> str:
        """Its sha256 (the LFS oid, which the Hub sends as X-Linked-Etag)."""
        return hashlib.sha256(self.data).hexdigest()

    @property
    def oid(self) -> str:
        """The git oid of what git stores: the file, or its LFS pointer."""
        if not self.lfs:
            return git_blob_oid(self.data)
        return git_blob_oid(self.pointer)

    @property
    def pointer(self) -> bytes:
        """The LFS pointer file git stores in place of an LFS file."""
        return (
            f"version https://git-lfs.github.com/spec/v1\noid sha256:{self.sha256}\n"
            f"size {self.size}\n"
        ).encode()

    def tree_entry(self) -> dict[str, object]:
        """The file as ``/api/<kind>s/<repo>/tree/<rev>`` lists it."""
        entry: dict[str, object] = {
            "type": "file",
            "oid": self.oid,
            "size": self.size,
            "path": self.path,
        }
        if self.lfs:
            entry["lfs"] = {"oid": self.sha256, "size": self.size, "pointerSize": len(self.pointer)}
        return entry


@dataclass
class HubRepo:
    """A repo: its commits (each a full snapshot) and its branches."""

    repo_id: str
    kind: RepoKind
    gated: bool = False
    granted_tokens: set[str] = field(default_factory=set)
    """Tokens whose users accepted the gated repo's terms."""
    commits: dict[str, dict[str, HubFile]] = field(default_factory=dict)
    refs: dict[str, str] = field(default_factory=dict)

    @property
    def head(self) -> str:
        """The commit ``main`` points at."""
        return self.refs["main"]

    def push(
        self, files: dict[str, bytes], *, commit: str | None = None, lfs: set[str] | None = None
    ) -> str:
        """Make ``files`` (path -> bytes) the new head of ``main``; returns its commit.
        ``commit``: its hash (default: a hash of the content); ``lfs``: the paths stored
        in LFS (default: by suffix, as a release's .gitattributes would say)."""
        snapshot = {
            p: HubFile(p, data, (p in lfs) if lfs is not None else _is_lfs(p))
            for p, data in sorted(files.items())
        }
        if commit is None:
            h = hashlib.sha1(self.repo_id.encode())
            for p, f in snapshot.items():
                h.update(p.encode() + b"\0" + f.sha256.encode())
            h.update(str(len(self.commits)).encode())
            commit = h.hexdigest()
        self.commits[commit] = snapshot
        self.refs["main"] = commit
        return commit

    def resolve(self, revision: str) -> str | None:
        """The commit a revision (branch or commit hash) names, None if none."""
        if revision in self.commits:
            return revision
        return self.refs.get(revision)


@dataclass(frozen=True)
class Request:
    """One request the stand-in answered."""

    method: str
    path: str
    range: str | None
    status: int
    authorized: bool
    sent: int
    """Body bytes sent."""


@dataclass
class _Switch:
    after: int
    times: int


def _repo_path(path: str) -> tuple[RepoKind, str, str] | None:
    """``/api/datasets/org/name/...`` or ``/datasets/org/name/...`` -> (kind, repo, rest)."""
    m = re.match(r"^/(?:api/)?(datasets/|models/)?([^/]+/[^/]+)(/.*)?$", path)
    if not m:
        return None
    kind: RepoKind = "dataset" if m.group(1) == "datasets/" else "model"
    return kind, m.group(2), m.group(3) or ""


class HubStandIn:
    """The stand-in: a hub on one port, its CDN on another (see the module)."""

    def __init__(self, *, page_size: int = 50) -> None:
        self.repos: dict[tuple[RepoKind, str], HubRepo] = {}
        self.page_size = page_size
        """Tree entries per page (the client follows ``Link: rel="next"``)."""
        self.throttle_bps: float | None = None
        """Bytes per second of every body sent (None: as fast as the socket goes)."""
        self._log: list[Request] = []
        self._cleared_at = 0.0  # time.monotonic() of the last clear_log
        self._lock = threading.Lock()
        self._answering = 0  # requests arrived and not yet recorded
        self._recorded = threading.Condition(self._lock)
        self._cuts: dict[str, _Switch] = {}
        self._damage: dict[str, _Switch] = {}
        self._stalls: dict[str, tuple[int, threading.Event]] = {}
        self._stalled = threading.Event()
        self._closing = threading.Event()
        self._hub: ThreadingHTTPServer | None = None
        self._cdn: ThreadingHTTPServer | None = None

    # --- repos -------------------------------------------------------------------
    def add_repo(
        self,
        repo_id: str,
        files: dict[str, bytes],
        *,
        kind: RepoKind = "dataset",
        gated: bool = False,
        commit: str | None = None,
        lfs: set[str] | None = None,
    ) -> HubRepo:
        """A repo whose ``main`` holds ``files`` (see :meth:`HubRepo.push`)."""
        repo = HubRepo(repo_id, kind, gated=gated)
        repo.push(files, commit=commit, lfs=lfs)
        self.repos[(kind, repo_id)] = repo
        return repo

    def repo(self, repo_id: str, kind: RepoKind = "dataset") -> HubRepo:
        """A repo added before."""
        return self.repos[(kind, repo_id)]

    # --- switches ----------------------------------------------------------------
    def cut(self, path: str, after: int, times: int = 1) -> None:
        """The next ``times`` transfers of file ``path`` (a repo path) stop after ``after``
        bytes of the body: the connection closes although Content-Length promised more."""
        with self._lock:
            self._cuts[path] = _Switch(after, times)

    def damage(self, path: str, times: int = 1) -> None:
        """The next ``times`` transfers of file ``path`` send wrong bytes (same length)."""
        with self._lock:
            self._damage[path] = _Switch(0, times)

    def stall(self, path: str, after: int) -> threading.Event:
        """The next whole-file transfer of ``path`` (not a ranged read, such as a zip's
        listing read from its end) sends ``after`` bytes, then waits until the returned
        event is set (or the stand-in stops); :meth:`wait_stalled` waits for it."""
        event = threading.Event()
        with self._lock:
            self._stalls[path] = (after, event)
            self._stalled.clear()
        return event

    def wait_stalled(self, timeout: float = 30.0) -> bool:
        """Whether a stalled transfer reached its stall point within ``timeout`` seconds."""
        return self._stalled.wait(timeout)

    @property
    def log(self) -> list[Request]:
        """The requests answered so far, in order. A request is recorded once its answer is
        sent, so a client may hold the answer a moment before: this waits (up to 2 s: a
        stalled transfer stays unrecorded) for the requests that arrived to be recorded."""
        with self._recorded:
            self._recorded.wait_for(lambda: self._answering == 0, timeout=2.0)
            return list(self._log)

    def requests(self, contains: str = "") -> list[Request]:
        """The requests answered so far whose path contains ``contains`` (as :attr:`log`)."""
        return [r for r in self.log if contains in r.path]

    def clear_log(self) -> None:
        """Forget the requests answered so far, and those that arrived before this call but
        are recorded after it (a request is recorded once its answer is sent: the client may
        have its answer first)."""
        with self._lock:
            self._log.clear()
            self._cleared_at = time.monotonic()

    # --- life --------------------------------------------------------------------
    @property
    def url(self) -> str:
        """``HF_ENDPOINT`` for the clients."""
        assert self._hub is not None, "start() first"
        return f"http://127.0.0.1:{self._hub.server_address[1]}"

    @property
    def cdn_url(self) -> str:
        """Where LFS files are redirected to."""
        assert self._cdn is not None, "start() first"
        return f"http://127.0.0.1:{self._cdn.server_address[1]}"

    def start(self) -> HubStandIn:
        """Listen on two free ports of 127.0.0.1 (hub and CDN), each in a daemon thread."""
        self._hub = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, cdn=False))
        self._cdn = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self, cdn=True))
        for server in (self._hub, self._cdn):
            server.daemon_threads = True
            threading.Thread(target=server.serve_forever, daemon=True).start()
        return self

    def stop(self) -> None:
        """Stop listening; stalled transfers are let go."""
        self._closing.set()
        for server in (self._hub, self._cdn):
            if server is not None:
                server.shutdown()
                server.server_close()

    def __enter__(self) -> HubStandIn:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    # --- used by the handler -----------------------------------------------------
    def _arrive(self) -> float:
        with self._lock:
            self._answering += 1
            return time.monotonic()

    def _record(self, request: Request, arrived: float) -> None:
        with self._recorded:
            self._answering -= 1
            if arrived >= self._cleared_at:
                self._log.append(request)
            self._recorded.notify_all()

    def _take(self, table: dict[str, _Switch], path: str) -> _Switch | None:
        with self._lock:
            switch = table.get(path)
            if switch is None:
                return None
            switch.times -= 1
            if switch.times <= 0:
                del table[path]
            return switch

    def _take_stall(self, path: str) -> tuple[int, threading.Event] | None:
        with self._lock:
            return self._stalls.pop(path, None)

    def _blob(self, sha256: str) -> HubFile | None:
        for repo in self.repos.values():
            for snapshot in repo.commits.values():
                for f in snapshot.values():
                    if f.lfs and f.sha256 == sha256:
                        return f
        return None


def _handler(hub: HubStandIn, *, cdn: bool) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *args: object) -> None:
            pass

        def do_HEAD(self) -> None:
            self._answer(head=True)

        def do_GET(self) -> None:
            self._answer(head=False)

        def _answer(self, head: bool) -> None:
            arrived = hub._arrive()
            self._sent = 0
            self._status = 500
            try:
                if cdn:
                    self._cdn(head)
                else:
                    self._hub(head)
            except (BrokenPipeError, ConnectionResetError):
                self.close_connection = True
            finally:
                parts = urlsplit(self.path)
                hub._record(
                    Request(
                        self.command,
                        unquote(parts.path),
                        self.headers.get("Range"),
                        self._status,
                        "authorization" in {k.lower() for k in self.headers},
                        self._sent,
                    ),
                    arrived,
                )

        # --- hub -----------------------------------------------------------------
        def _hub(self, head: bool) -> None:
            parts = urlsplit(self.path)
            path = unquote(parts.path)
            query = parse_qs(parts.query)
            if path == "/api/agent-harnesses":  # the client's daily registry look-up
                return self._json({"standardEnvVars": [], "harnesses": {}})
            found = _repo_path(path)
            if found is None:
                return self._error(404, "RepoNotFound", "not a repo path")
            kind, repo_id, rest = found
            repo = hub.repos.get((kind, repo_id))
            if repo is None:
                return self._error(404, "RepoNotFound", f"{repo_id} not found")
            if path.startswith("/api/"):
                return self._api(repo, rest, query, parts.query)
            m = re.match(r"^/resolve/([^/]+)/(.+)$", rest)
            if not m:
                return self._error(404, "EntryNotFound", "unknown route")
            return self._resolve(repo, m.group(1), m.group(2), head)

        def _api(self, repo: HubRepo, rest: str, query: dict[str, list[str]], raw: str) -> None:
            if rest in ("", "/") or rest.startswith("/revision/"):
                revision = rest.removeprefix("/revision/") if rest.startswith("/rev") else "main"
                commit = repo.resolve(revision)
                if commit is None:
                    return self._error(404, "RevisionNotFound", f"no revision {revision}")
                return self._json(_info(repo, commit))
            m = re.match(r"^/tree/([^/]+)(/.*)?$", rest)
            if not m:
                return self._error(404, "EntryNotFound", "unknown api route")
            commit = repo.resolve(m.group(1))
            if commit is None:
                return self._error(404, "RevisionNotFound", f"no revision {m.group(1)}")
            under = (m.group(2) or "").strip("/")
            recursive = query.get("recursive", ["false"])[0].lower() == "true"
            entries = _tree(repo.commits[commit], under, recursive)
            start = int(query.get("cursor", ["0"])[0])
            page = entries[start : start + hub.page_size]
            headers = {}
            if start + hub.page_size < len(entries):
                keep = "&".join(p for p in raw.split("&") if p and not p.startswith("cursor="))
                nxt = f"{hub.url}{urlsplit(self.path).path}?{keep}&cursor={start + hub.page_size}"
                headers["Link"] = f'<{nxt}>; rel="next"'
            return self._json(page, headers)

        def _resolve(self, repo: HubRepo, revision: str, filename: str, head: bool) -> None:
            commit = repo.resolve(revision)
            if commit is None:
                return self._error(404, "RevisionNotFound", f"no revision {revision}")
            if repo.gated and not self._granted(repo):
                token = self._token()
                status = 403 if token else 401
                return self._error(
                    status,
                    "GatedRepo",
                    f"Access to {repo.kind} {repo.repo_id} is restricted: accept its terms",
                    commit,
                )
            f = repo.commits[commit].get(filename)
            if f is None:
                return self._error(404, "EntryNotFound", f"{filename} not found", commit)
            common = {"X-Repo-Commit": commit, "Accept-Ranges": "bytes"}
            if f.lfs:
                self._status = 302
                self.send_response(302)
                headers = {
                    **common,
                    "ETag": f'"{f.oid}"',
                    "X-Linked-Etag": f'"{f.sha256}"',
                    "X-Linked-Size": str(f.size),
                    "Location": f"{hub.cdn_url}/blobs/{f.sha256}?file={quote(f.path)}",
                    "Content-Length": "0",
                }
                for k, v in headers.items():
                    self.send_header(k, v)
                self.end_headers()
                return None
            return self._body(f, head, {**common, "ETag": f'"{f.oid}"'})

        def _granted(self, repo: HubRepo) -> bool:
            token = self._token()
            return token is not None and token in repo.granted_tokens

        def _token(self) -> str | None:
            auth = self.headers.get("Authorization") or ""
            return auth.removeprefix("Bearer ").strip() or None

        # --- cdn -----------------------------------------------------------------
        def _cdn(self, head: bool) -> None:
            parts = urlsplit(self.path)
            m = re.match(r"^/blobs/([0-9a-f]{64})$", parts.path)
            f = hub._blob(m.group(1)) if m else None
            if f is None:
                self._status = 404
                self.send_response(404)
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            self._body(f, head, {"ETag": f'"{f.sha256}"'})

        # --- bodies --------------------------------------------------------------
        def _body(self, f: HubFile, head: bool, headers: dict[str, str]) -> None:
            data = f.data
            start, end = 0, len(data) - 1
            rng = self.headers.get("Range")
            status = 200
            if rng:
                m = re.match(r"bytes=(\d*)-(\d*)$", rng.strip())
                if m and m.group(1):
                    start = int(m.group(1))
                    end = min(int(m.group(2)), end) if m.group(2) else end
                elif m and m.group(2):  # a suffix: the last N bytes
                    start = max(len(data) - int(m.group(2)), 0)
                if start >= len(data):
                    self._status = 416
                    self.send_response(416)
                    self.send_header("Content-Range", f"bytes */{len(data)}")
                    self.send_header("Content-Length", "0")
                    self.end_headers()
                    return
                status = 206
            body = data[start : end + 1]
            if not head and hub._take(hub._damage, f.path) is not None:
                body = bytes(b ^ 0xFF for b in body)
            self._status = status
            self.send_response(status)
            for k, v in headers.items():
                self.send_header(k, v)
            self.send_header("Content-Type", "application/octet-stream")
            self.send_header("Content-Length", str(len(body)))
            if status == 206:
                self.send_header("Content-Range", f"bytes {start}-{end}/{len(data)}")
            self.end_headers()
            if head:
                return
            cut = hub._take(hub._cuts, f.path)
            stall = hub._take_stall(f.path) if not rng else None
            limit = cut.after if cut is not None else len(body)
            self._send_body(body[:limit], stall)
            if cut is not None and limit < len(body):
                self.close_connection = True
                with contextlib.suppress(OSError):
                    self.connection.shutdown(2)

        def _send_body(self, body: bytes, stall: tuple[int, threading.Event] | None) -> None:
            chunk = 16384
            for i in range(0, len(body), chunk):
                if stall is not None and i + chunk > stall[0] >= i:
                    part = body[i : stall[0]]
                    self.wfile.write(part)
                    self.wfile.flush()
                    self._sent += len(part)
                    hub._stalled.set()
                    while not stall[1].wait(0.1) and not hub._closing.is_set():
                        pass
                    rest = body[stall[0] : i + chunk]
                    self.wfile.write(rest)
                    self._sent += len(rest)
                    continue
                piece = body[i : i + chunk]
                if hub.throttle_bps:
                    time.sleep(len(piece) / hub.throttle_bps)
                self.wfile.write(piece)
                self._sent += len(piece)

        def _json(self, doc: object, headers: dict[str, str] | None = None) -> None:
            blob = json.dumps(doc).encode()
            self._status = 200
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(blob)))
            for k, v in (headers or {}).items():
                self.send_header(k, v)
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(blob)
                self._sent += len(blob)

        def _error(self, status: int, code: str, message: str, commit: str | None = None) -> None:
            blob = json.dumps({"error": message}).encode()
            self._status = status
            self.send_response(status)
            self.send_header("X-Error-Code", code)
            self.send_header("X-Error-Message", message)
            if commit:
                self.send_header("X-Repo-Commit", commit)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(blob)))
            self.end_headers()
            if self.command != "HEAD":
                self.wfile.write(blob)

    return Handler


def _info(repo: HubRepo, commit: str) -> dict[str, object]:
    """``/api/<kind>s/<repo>[/revision/<rev>]``: what ``repo_info`` parses."""
    files = repo.commits[commit]
    return {
        "_id": hashlib.sha1(repo.repo_id.encode()).hexdigest()[:24],
        "id": repo.repo_id,
        "author": repo.repo_id.split("/")[0],
        "sha": commit,
        "private": False,
        "gated": "manual" if repo.gated else False,
        "disabled": False,
        "downloads": 0,
        "likes": 0,
        "tags": [],
        "lastModified": "2026-01-01T00:00:00.000Z",
        "siblings": [{"rfilename": p} for p in files],
        "usedStorage": sum(f.size for f in files.values()),
    }


def _tree(files: dict[str, HubFile], under: str, recursive: bool) -> list[dict[str, object]]:
    """The entries of folder ``under`` (all below it when ``recursive``), folders first."""
    prefix = f"{under}/" if under else ""
    entries: list[dict[str, object]] = []
    folders: dict[str, None] = {}
    for path, f in files.items():
        if not path.startswith(prefix):
            continue
        rest = path[len(prefix) :]
        parts = rest.split("/")
        for depth in range(1, len(parts)):
            if depth > 1 and not recursive:
                break
            folders[prefix + "/".join(parts[:depth])] = None
        if recursive or len(parts) == 1:
            entries.append(f.tree_entry())
    tree_oid = hashlib.sha1
    dirs: list[dict[str, object]] = [
        {"type": "directory", "oid": tree_oid(p.encode()).hexdigest(), "size": 0, "path": p}
        for p in folders
    ]
    return [*dirs, *entries]


@contextlib.contextmanager
def serving(hub: HubStandIn) -> Iterator[HubStandIn]:
    """``hub`` started for the block, stopped after it."""
    hub.start()
    try:
        yield hub
    finally:
        hub.stop()


def client_env(hub: HubStandIn, home: str | os.PathLike[str], **more: str) -> dict[str, str]:
    """The environment of a process that talks to ``hub`` as the Hub: ``HF_ENDPOINT`` at it,
    ``HF_HOME`` and ``EVALKIT_DATA`` under ``home``, and the offline switches the tests
    set for every other process (tox: ``HF_HUB_OFFLINE=1``) taken off for this one only."""
    env = {k: v for k, v in os.environ.items() if k not in _OFFLINE}
    env.update(
        HF_ENDPOINT=hub.url,
        HF_HOME=str(Path(home) / "hf"),
        EVALKIT_DATA=str(Path(home) / "data"),
        HF_HUB_DISABLE_PROGRESS_BARS="1",
        **more,
    )
    return env


_OFFLINE = ("HF_HUB_OFFLINE", "TRANSFORMERS_OFFLINE", "HF_TOKEN", "HF_ENDPOINT")
