"""The calls evalkit makes to the Hugging Face Hub, through ``huggingface_hub`` (its API
client, URLs, HTTP session and auth headers: ``HF_ENDPOINT``, ``HF_TOKEN`` and a login
by ``hf auth login`` are honoured), and the Hub's refusals said in one line for people.

Large files are fetched by :meth:`HubClient.download` into a ``.part`` file that a later
call continues with a ranged request (a killed fetch loses nothing it received), and a
transfer cut midway is taken up again where it stopped.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import AbstractContextManager
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Literal

from evalkit.errors import ConfigError, EvalkitError, TransientError
from evalkit.hub.home import RepoEntry

if TYPE_CHECKING:
    import httpx2

_STALLS = 5
"""Transfers in a row that bring no new byte before a download gives up."""


class GatedError(ConfigError):
    """The repo is gated and this user has not accepted its terms (or is not logged in)."""


class HubUnreachable(TransientError):
    """The Hub (``HF_ENDPOINT``) did not answer, or a transfer kept stopping."""


def login_command() -> str:
    """How the installed ``huggingface_hub`` logs a user in."""
    return "`hf auth login`"


def endpoint() -> str:
    """The Hub being talked to (``HF_ENDPOINT``, read by huggingface_hub at import)."""
    from huggingface_hub import constants

    return str(constants.ENDPOINT)


class HubClient:
    """One repo of the Hub (a dataset or a model), for the benchmark or model ``name``."""

    def __init__(self, repo_id: str, name: str, kind: Literal["dataset", "model"] = "dataset"):
        self.repo_id, self.name, self.kind = repo_id, name, kind

    @property
    def page(self) -> str:
        """The repo's page on the Hub (where a gated repo's terms are accepted)."""
        prefix = "datasets/" if self.kind == "dataset" else ""
        return f"{endpoint()}/{prefix}{self.repo_id}"

    def commit(self, revision: str) -> str:
        """The commit hash ``revision`` names now."""
        from huggingface_hub import HfApi

        with self.said():
            info = HfApi().repo_info(self.repo_id, repo_type=self.kind, revision=revision)
        if not info.sha:
            raise HubUnreachable(f"{self.name}: the Hub gave no commit for {self.repo_id}")
        return str(info.sha)

    def tree(self, commit: str) -> dict[str, RepoEntry]:
        """Every file of the repo at ``commit``, with its size and hashes."""
        from huggingface_hub import HfApi
        from huggingface_hub.hf_api import RepoFile

        with self.said():
            listing = list(
                HfApi().list_repo_tree(
                    self.repo_id, repo_type=self.kind, revision=commit, recursive=True
                )
            )
        return {
            f.path: RepoEntry(
                size=int(f.lfs.size if f.lfs else f.size),
                oid=f.blob_id,
                sha256=f.lfs.sha256 if f.lfs else None,
            )
            for f in listing
            if isinstance(f, RepoFile)
        }

    def url(self, commit: str, path: str) -> str:
        """The URL of file ``path`` at ``commit`` (the Hub redirects LFS files to its CDN)."""
        from huggingface_hub import hf_hub_url

        return str(hf_hub_url(self.repo_id, path, repo_type=self.kind, revision=commit))

    def read_range(self, url: str, start: int, end: int) -> bytes:
        """Bytes ``start``..``end`` (inclusive) of the file at ``url``."""
        with self.said(), self._stream(url, {"Range": f"bytes={start}-{end}"}) as r:
            data = r.read()
        if r.status_code == 200:  # a server that ignores ranges sends the whole file
            data = data[start : end + 1]
        return bytes(data)

    def download(
        self, url: str, part: Path, size: int, progress: Callable[[int], None], label: str
    ) -> None:
        """The file at ``url`` (``size`` bytes) into ``part``, continuing what ``part``
        already holds; a transfer that stops is taken up where it stopped, until
        :data:`_STALLS` transfers in a row bring nothing new."""
        import httpx2

        part.parent.mkdir(parents=True, exist_ok=True)
        have = part.stat().st_size if part.exists() else 0
        if have > size:  # not this file's bytes: start over
            part.unlink()
            have = 0
        stalls = 0
        while have < size:
            before = have
            try:
                have = self._transfer(url, part, have, progress)
            except (httpx2.TransportError, httpx2.StreamError) as exc:
                have = part.stat().st_size
                stalls = 0 if have > before else stalls + 1
                if stalls >= _STALLS:
                    raise HubUnreachable(
                        f"{self.name}: the transfer of {label} stopped {stalls} times at "
                        f"{have} of {size} bytes ({type(exc).__name__}: {exc}); run the same "
                        "command again to continue from there"
                    ) from None
                time.sleep(min(0.2 * stalls, 2.0))
                continue
            if have <= before:
                break
        if have != size:
            raise HubUnreachable(
                f"{self.name}: {label} came with {have} bytes where the Hub lists {size}"
            )

    def _transfer(self, url: str, part: Path, have: int, progress: Callable[[int], None]) -> int:
        headers = {"Range": f"bytes={have}-"} if have else {}
        with self.said(transport=False), self._stream(url, headers) as r:
            mode = "ab"
            if have and r.status_code == 200:  # the range was ignored: the whole file again
                progress(-have)
                have, mode = 0, "wb"
            # unbuffered, each piece as it arrives: a kill loses no byte already received
            with open(part, mode, buffering=0) as out:
                for chunk in r.iter_bytes():
                    out.write(chunk)
                    have += len(chunk)
                    progress(len(chunk))
        return have

    def _stream(self, url: str, extra: dict[str, str]) -> _Checked:
        from huggingface_hub.utils import build_hf_headers, get_session

        headers = {**build_hf_headers(), **extra}
        return _Checked(get_session().stream("GET", url, headers=headers, follow_redirects=True))

    def said(self, transport: bool = True) -> _Said:
        """A block whose huggingface_hub errors are said in one line for people."""
        return _Said(self, transport)


class _Checked:
    """A streamed response raised for its status (huggingface_hub's error types)."""

    def __init__(self, cm: AbstractContextManager[httpx2.Response]) -> None:
        self._cm = cm

    def __enter__(self) -> httpx2.Response:
        from huggingface_hub.utils import hf_raise_for_status

        response = self._cm.__enter__()
        if response.status_code >= 400:
            response.read()
            hf_raise_for_status(response)
        return response

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self._cm.__exit__(kind, exc, tb)


class _Said:
    """The Hub's refusals, said for people (one line each)."""

    def __init__(self, client: HubClient, transport: bool) -> None:
        self.client = client
        self.transport = transport
        """Whether a dropped connection is said too (else left to the caller's retries)."""

    def __enter__(self) -> None:
        return None

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        import httpx2

        if exc is None or isinstance(exc, EvalkitError):
            return
        if not self.transport and isinstance(exc, httpx2.TransportError):
            return
        said = refusal(self.client, exc)
        if said is not None:
            raise said from None


def refusal(client: HubClient, exc: BaseException) -> EvalkitError | None:
    """``exc`` (from huggingface_hub or its HTTP client) as one line for people; None for
    anything else (a bug, raised as it is)."""
    import httpx2
    from huggingface_hub import errors

    name, repo = client.name, client.repo_id
    if isinstance(exc, errors.GatedRepoError):
        return GatedError(
            f"{name}: {repo} is gated on the Hub: accept its terms at {client.page} (signed "
            f"in), then log in here with {login_command()} (or set HF_TOKEN) and run again"
        )
    if isinstance(exc, errors.RevisionNotFoundError):
        return ConfigError(f"{name}: {repo} has no revision asked for ({exc.server_message})")
    if isinstance(exc, errors.RepositoryNotFoundError):
        return ConfigError(
            f"{name}: {repo} is not on the Hub at {endpoint()} (or it is private: log in "
            f"with {login_command()} or set HF_TOKEN)"
        )
    if isinstance(exc, errors.HfHubHTTPError):
        status = exc.response.status_code if exc.response is not None else "?"
        return HubUnreachable(f"{name}: the Hub answered {status} for {repo}; try again later")
    if isinstance(exc, httpx2.TransportError | ConnectionError):
        return HubUnreachable(
            f"{name}: cannot reach the Hub at {endpoint()} ({type(exc).__name__}: {exc}); "
            "check the network (HF_ENDPOINT), or give a local copy with --data-root"
        )
    return None
