"""The hub stand-in (evalkit.testing.hub_server) answers huggingface_hub as the Hub does.

The real client runs in a child process (it reads HF_ENDPOINT and HF_HUB_OFFLINE when it
is imported; tox sets HF_HUB_OFFLINE=1 for every test, and only these children lift it).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from evalkit.testing.hub_server import HubStandIn, client_env, git_blob_oid

BIG = bytes(range(256)) * 1200  # 300 kB, stored in LFS (.zip)


@pytest.fixture
def hub() -> Iterator[HubStandIn]:
    with HubStandIn(page_size=2) as stand_in:
        stand_in.add_repo(
            "org/data",
            {"notes/a.json": b'{"x": 1}', "videos.zip": BIG, "README.md": b"readme\n"},
        )
        stand_in.add_repo("org/gated", {"x.zip": b"Z" * 100}, gated=True)
        yield stand_in


def client(hub: HubStandIn, tmp_path: Path, code: str, **env: str) -> dict:
    """Run ``code`` (it prints one JSON object last) with huggingface_hub at the stand-in."""
    out = subprocess.run(
        [sys.executable, "-c", code],
        env=client_env(hub, tmp_path, **env),
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr[-3000:]
    return json.loads(out.stdout.strip().splitlines()[-1])


def test_snapshot_download_dataset_info_and_a_paginated_tree_come_from_it(
    hub: HubStandIn, tmp_path: Path
) -> None:
    got = client(
        hub,
        tmp_path,
        """
import json, os
from huggingface_hub import HfApi, snapshot_download
path = snapshot_download("org/data", repo_type="dataset")
files = {os.path.relpath(os.path.join(d, f), path): open(os.path.join(d, f), "rb").read().hex()
         for d, _, fs in os.walk(path) for f in fs}
info = HfApi().dataset_info("org/data")
listing = HfApi().list_repo_tree("org/data", repo_type="dataset", recursive=True)
tree = sorted(f.path for f in listing)
print(json.dumps({"files": files, "sha": info.sha, "tree": tree}))
""",
    )
    repo = hub.repo("org/data")
    assert got["sha"] == repo.head
    assert got["files"] == {p: f.data.hex() for p, f in repo.commits[repo.head].items()}
    assert got["tree"] == ["README.md", "notes", "notes/a.json", "videos.zip"]
    # 4 entries at 2 a page: the client followed the Link header to the next pages
    assert len([r for r in hub.requests("/tree/") if r.status == 200]) >= 2


def test_an_lfs_file_is_redirected_to_the_cdn_with_its_sha256_and_no_token_follows(
    hub: HubStandIn, tmp_path: Path
) -> None:
    f = hub.repo("org/data").commits[hub.repo("org/data").head]["videos.zip"]
    head = httpx.head(f"{hub.url}/datasets/org/data/resolve/main/videos.zip")
    assert head.status_code == 302
    assert head.headers["X-Linked-Etag"] == f'"{f.sha256}"'
    assert int(head.headers["X-Linked-Size"]) == len(BIG)
    assert head.headers["X-Repo-Commit"] == hub.repo("org/data").head
    assert head.headers["Location"].startswith(hub.cdn_url)
    small = httpx.head(f"{hub.url}/datasets/org/data/resolve/main/notes/a.json")
    assert small.headers["ETag"] == '"' + git_blob_oid(b'{"x": 1}') + '"'

    hub.clear_log()
    got = client(
        hub,
        tmp_path,
        """
import json
from huggingface_hub import hf_hub_download
path = hf_hub_download("org/data", "videos.zip", repo_type="dataset")
print(json.dumps({"size": len(open(path, "rb").read())}))
""",
        HF_TOKEN="hf_secret",
    )
    assert got["size"] == len(BIG)
    cdn = hub.requests("/blobs/")
    assert cdn and not any(r.authorized for r in cdn)  # the token never reaches the CDN
    assert all(r.authorized for r in hub.requests("/resolve/"))


def test_a_gated_repo_answers_401_then_403_to_a_token_without_access_then_the_file(
    hub: HubStandIn, tmp_path: Path
) -> None:
    code = """
import json
from huggingface_hub import hf_hub_download
from huggingface_hub.errors import GatedRepoError
try:
    hf_hub_download("org/gated", "x.zip", repo_type="dataset")
    print(json.dumps({"got": "file"}))
except GatedRepoError as exc:
    print(json.dumps({"got": "gated", "status": exc.response.status_code}))
"""
    assert client(hub, tmp_path, code) == {"got": "gated", "status": 401}
    assert client(hub, tmp_path, code, HF_TOKEN="hf_other") == {"got": "gated", "status": 403}
    hub.repo("org/gated").granted_tokens.add("hf_accepted")
    assert client(hub, tmp_path, code, HF_TOKEN="hf_accepted") == {"got": "file"}


def test_a_cut_transfer_stops_short_and_a_ranged_request_gets_the_rest(hub: HubStandIn) -> None:
    sha = hub.repo("org/data").commits[hub.repo("org/data").head]["videos.zip"].sha256
    url = f"{hub.cdn_url}/blobs/{sha}"
    hub.cut("videos.zip", 1000)
    with pytest.raises(httpx.RemoteProtocolError):
        httpx.get(url)
    rest = httpx.get(url, headers={"Range": "bytes=1000-"})
    assert rest.status_code == 206
    assert rest.headers["Content-Range"] == f"bytes 1000-{len(BIG) - 1}/{len(BIG)}"
    assert rest.content == BIG[1000:]
    assert httpx.get(url).content == BIG  # the switch was for one transfer


def test_damage_sends_wrong_bytes_of_the_right_length_once(hub: HubStandIn) -> None:
    sha = hub.repo("org/data").commits[hub.repo("org/data").head]["videos.zip"].sha256
    url = f"{hub.cdn_url}/blobs/{sha}"
    hub.damage("videos.zip")
    bad = httpx.get(url).content
    assert len(bad) == len(BIG) and bad != BIG
    assert httpx.get(url).content == BIG


def test_a_stalled_transfer_waits_midway_until_released(hub: HubStandIn) -> None:
    import threading

    sha = hub.repo("org/data").commits[hub.repo("org/data").head]["videos.zip"].sha256
    release = hub.stall("videos.zip", 50_000)
    got: list[bytes] = []
    reader = threading.Thread(
        target=lambda: got.append(httpx.get(f"{hub.cdn_url}/blobs/{sha}").content)
    )
    reader.start()
    assert hub.wait_stalled(timeout=10)
    assert not got  # held midway
    release.set()
    reader.join(timeout=10)
    assert got == [BIG]


def test_the_log_names_every_request_and_unknown_repos_are_404_repo_not_found(
    hub: HubStandIn,
) -> None:
    hub.clear_log()
    missing = httpx.get(f"{hub.url}/api/datasets/org/nope/revision/main")
    assert missing.status_code == 404 and missing.headers["X-Error-Code"] == "RepoNotFound"
    entry = httpx.head(f"{hub.url}/datasets/org/data/resolve/main/none.txt")
    assert entry.headers["X-Error-Code"] == "EntryNotFound"
    assert [(r.method, r.status) for r in hub.log] == [("GET", 404), ("HEAD", 404)]


def test_client_env_lifts_the_offline_switches_for_the_child_only(
    hub: HubStandIn, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    env = client_env(hub, tmp_path)
    assert "HF_HUB_OFFLINE" not in env and env["HF_ENDPOINT"] == hub.url
    assert os.environ["HF_HUB_OFFLINE"] == "1"
