"""Checkpoints as transformers 5 saves them: a LLaVA-OneVision whose SigLIP tower (or a
LLaVA-NeXT-Video whose CLIP tower) vLLM 0.32 would not find loads through a renamed view
(the user's folder untouched); a checkpoint that needs no renaming is served as it is; one
that cannot be renamed is refused in one line naming the mismatch."""

from __future__ import annotations

import hashlib
import shutil
from pathlib import Path

import pytest

pytest.importorskip("transformers")

from evalkit.engines.checkpoint import loadable, read_header
from evalkit.engines.family import detect_family
from evalkit.errors import EvalkitError
from evalkit.tiny_checkpoint import build_tiny_model


@pytest.fixture(scope="module")
def llava(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("ckpt") / "llava", "llava_onevision")


@pytest.fixture(autouse=True)
def views(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "evalkit" / "checkpoints"


def _digest(path: Path) -> str:
    return hashlib.sha256(path.read_bytes()).hexdigest()


@pytest.fixture(scope="module")
def next_video(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return build_tiny_model(tmp_path_factory.mktemp("ckpt") / "next", "llava_next_video")


@pytest.mark.parametrize("family", ["llava", "next_video"])
def test_a_tower_saved_under_other_names_is_served_renamed(
    family: str, request: pytest.FixtureRequest, views: Path
) -> None:
    llava: Path = request.getfixturevalue(family)
    before = {p.name: _digest(p) for p in llava.iterdir()}
    names, _ = read_header(llava / "model.safetensors")
    assert "vision_tower.embeddings.patch_embedding.weight" in names  # as 5.19 saves it
    view = Path(loadable(str(llava), detect_family(llava)))
    assert view.parent == views
    renamed, start = read_header(view / "model.safetensors")
    assert "vision_tower.vision_model.embeddings.patch_embedding.weight" in renamed
    assert not [n for n in renamed if n.startswith("vision_tower.embeddings")]
    assert len(renamed) == len(names)
    # the tensor bytes are the checkpoint's own, and every other file is a link to it
    _, old_start = read_header(llava / "model.safetensors")
    assert (view / "model.safetensors").read_bytes()[start:] == (
        llava / "model.safetensors"
    ).read_bytes()[old_start:]
    assert (view / "config.json").resolve() == (llava / "config.json").resolve()
    assert {p.name: _digest(p) for p in llava.iterdir()} == before  # untouched
    assert loadable(str(llava), detect_family(llava)) == str(view)  # made once


def test_a_checkpoint_vllm_loads_as_saved_is_served_as_it_is(tmp_path: Path) -> None:
    internvl = build_tiny_model(tmp_path / "internvl", "internvl")
    assert loadable(str(internvl), detect_family(internvl)) == str(internvl)


def test_no_room_for_the_renamed_copy_is_one_line_naming_the_mismatch(
    llava: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import evalkit.engines.checkpoint as ckpt

    monkeypatch.setattr(ckpt.shutil, "disk_usage", lambda _: shutil._ntuple_diskusage(1, 1, 0))  # type: ignore[attr-defined]
    with pytest.raises(EvalkitError) as info:
        loadable(str(llava), detect_family(llava))
    msg = str(info.value)
    assert "'vision_tower." in msg and "vision_tower.vision_model." in msg and "GiB" in msg
    assert "\n" not in msg


def test_weights_that_are_not_safetensors_are_refused_by_name(llava: Path, tmp_path: Path) -> None:
    folder = tmp_path / "bin"
    folder.mkdir()
    shutil.copy(llava / "config.json", folder)
    (folder / "pytorch_model.bin").write_bytes(b"\0")
    with pytest.raises(EvalkitError, match=r"\.bin .*safe_serialization=True"):
        loadable(str(folder), detect_family(llava))
