"""A model given by hub id (``--model org/name[@revision]``), fetched through
``huggingface_hub`` into its cache (``HF_HOME``) before any engine starts: only the files
an engine loads (config, tokenizer, processor, chat template, safetensors weights). The
commit fetched is part of the run's identity (``ResultConfig.model_revision``).

A model already in the cache is used with no request at all (the commit its revision was
fetched at, as ``huggingface_hub`` records it); ``--no-fetch`` or ``HF_HUB_OFFLINE=1`` then
never fetch, and a model not in the cache is an error naming ``evalkit model fetch``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from fnmatch import fnmatchcase
from pathlib import Path

from evalkit.errors import ConfigError
from evalkit.hub.fetch import FetchDisabled, Say, human, say_on_stderr
from evalkit.hub.home import COMMIT, hub_offline

MODEL_FILES = ("*.json", "*.safetensors", "*.txt", "*.model", "*.jinja", "*.tiktoken")
"""What an engine loads from a model repo: configs (model, generation, tokenizer,
processor, the safetensors index), weights, vocabularies and chat templates; never
``*.bin``/``*.pt`` pickles, ONNX or other frameworks' copies of the weights."""

_HUB_ID = re.compile(r"^(?P<repo>[\w][\w.-]*/[\w][\w.-]*)(?:@(?P<revision>[\w./-]+))?$")


@dataclass(frozen=True)
class HubModel:
    """A model from the Hub, in the local cache."""

    repo_id: str
    revision: str | None
    """As asked after ``@`` (None: ``main``)."""
    commit: str
    path: Path
    """Its snapshot folder (what the engine loads)."""


def hub_id(model: str) -> tuple[str, str | None] | None:
    """``org/name[@revision]`` -> (repo id, revision); None for anything else (a path)."""
    if model.startswith((".", "/", "~")) or Path(model).expanduser().exists():
        return None
    m = _HUB_ID.match(model)
    return (m.group("repo"), m.group("revision")) if m else None


def fetch_model_command(model: str) -> str:
    """The command that fetches ``model``."""
    return f"`evalkit model fetch {model}`"


def model_from_hub(model: str, *, fetch: bool = True, say: Say = say_on_stderr) -> HubModel:
    """``model`` (``org/name[@revision]``) in the local cache, fetched first if it is not
    (``fetch``: allowed to; never under HF_HUB_OFFLINE: FetchDisabled names the command)."""
    parsed = hub_id(model)
    if parsed is None:
        raise ConfigError(f"--model {model}: not a hub id (org/name[@revision]) nor a folder")
    repo, revision = parsed
    cached = _cached(repo, revision)
    if cached is not None:
        return cached
    if not fetch or hub_offline():
        why = "--no-fetch was given" if not fetch else "HF_HUB_OFFLINE is set"
        raise FetchDisabled(
            f"--model {model}: not in the local Hugging Face cache and {why}: fetch it with "
            f"{fetch_model_command(model)} (on a machine with the Hub in reach), or give "
            "the checkpoint folder"
        )
    return _fetch(repo, revision, model, say)


def _cached(repo: str, revision: str | None) -> HubModel | None:
    from huggingface_hub import snapshot_download
    from huggingface_hub.errors import LocalEntryNotFoundError

    try:
        path = Path(
            snapshot_download(
                repo, revision=revision, allow_patterns=list(MODEL_FILES), local_files_only=True
            )
        )
    except (LocalEntryNotFoundError, OSError, ValueError):
        return None
    if not (path / "config.json").is_file():
        return None
    return HubModel(repo, revision, path.name, path)


def _fetch(repo: str, revision: str | None, model: str, say: Say) -> HubModel:
    from huggingface_hub import snapshot_download

    from evalkit.hub.client import HubClient

    client = HubClient(repo, f"--model {model}", kind="model")
    commit = revision if revision and COMMIT.match(revision) else client.commit(revision or "main")
    tree = client.tree(commit)
    wanted = {p: e for p, e in tree.items() if any(fnmatchcase(p, g) for g in MODEL_FILES)}
    if not any(p.endswith(".safetensors") for p in wanted):
        raise ConfigError(
            f"--model {model}: {repo} at {commit[:12]} holds no safetensors weights (only "
            "those are loaded); convert the checkpoint or give a folder"
        )
    size = human(sum(e.size for e in wanted.values()))
    say(
        f"--model {model}: fetching {repo}@{commit[:7]} from the Hub: {len(wanted)} files "
        f"(config, tokenizer, processor, safetensors), {size}"
    )
    with client.said():  # the Hub's refusals (a gated model) said in one line
        path = Path(snapshot_download(repo, revision=commit, allow_patterns=list(MODEL_FILES)))
    if revision is None or not COMMIT.match(revision):
        _record_ref(path, revision or "main", commit)
    return HubModel(repo, revision, commit, path)


def _record_ref(snapshot: Path, revision: str, commit: str) -> None:
    """``refs/<revision>`` in the cache points at ``commit`` (snapshot_download called with
    the commit hash records no ref; the next run finds the model by its revision)."""
    from evalkit.atomic import write_text_atomic

    ref = snapshot.parent.parent / "refs" / revision
    ref.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(ref, commit)
