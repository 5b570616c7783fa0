"""``evalkit bench pin NAME`` (maintainers): the commit of the release snapshot that was
just fetched and validated, written into the spec's ``data.revision``, its comments and
the rest of the file kept as they are."""

from __future__ import annotations

import re
from pathlib import Path

from evalkit.atomic import write_text_atomic
from evalkit.bench.spec import BenchmarkSpec
from evalkit.errors import ConfigError
from evalkit.hub.fetch import fetch_command
from evalkit.hub.home import COMMIT, ReleaseState, known_commit, release_folder

_KEY = re.compile(r"^(?P<indent>[ \t]+)(?P<key>[A-Za-z_]+):")


def pin(spec: BenchmarkSpec) -> tuple[str, Path]:
    """Write the validated snapshot's commit into ``spec``'s YAML; returns (commit, file)."""
    commit = known_commit(spec)
    state = ReleaseState.read(release_folder(spec, commit)) if commit else None
    if commit is None or state is None:
        raise ConfigError(
            f"{spec.name}: no snapshot fetched yet: {fetch_command(spec)}, then "
            f"`evalkit bench validate {spec.name}`, then pin it"
        )
    if state.validated is None:
        raise ConfigError(
            f"{spec.name}: the snapshot {commit[:12]} was not validated: run `evalkit bench "
            f"validate {spec.name}` and pin it once it finds nothing wrong"
        )
    if spec.source_path is None:
        raise ConfigError(f"{spec.name}: its spec was not read from a YAML file")
    path = Path(spec.source_path)
    text = path.read_text(encoding="utf-8")
    write_text_atomic(path, with_revision(text, commit, state.validated, path))
    return commit, path


def with_revision(text: str, commit: str, validated: str, path: Path) -> str:
    """``text`` (a spec's YAML) with ``data.revision`` set to ``commit``."""
    if not COMMIT.match(commit):
        raise ConfigError(f"{commit!r} is not a commit hash")
    lines = text.splitlines(keepends=True)
    try:
        start = next(i for i, line in enumerate(lines) if line.rstrip() == "data:")
    except StopIteration:
        raise ConfigError(f"{path}: no top-level `data:` section to pin") from None
    end = next(
        (i for i in range(start + 1, len(lines)) if lines[i][:1] not in (" ", "\t", "\n", "#")),
        len(lines),
    )
    note = f"  # pinned by `evalkit bench pin` (validated: {validated})\n"
    anchor = None
    for i in range(start + 1, end):
        m = _KEY.match(lines[i])
        if m and m.group("key") == "revision":
            lines[i] = f"{m.group('indent')}revision: {commit}{note}"
            return "".join(lines)
        if m and m.group("key") == "hf_dataset":
            anchor = (i, m.group("indent"))
    if anchor is None:
        raise ConfigError(f"{path}: its data section names no hf_dataset to pin")
    i, indent = anchor
    lines.insert(i + 1, f"{indent}revision: {commit}{note}")
    return "".join(lines)
