"""The frame cache follows no symbolic link and opens nothing but regular files.

An entry (or its folder, lock or stamp) replaced by a link to a file elsewhere, a link to
itself, or a FIFO is named, never opened, never served, never written through, and
removed by ``cache verify --remove`` / ``cache build`` / ``cache prune``; an error about a
file that is not one of ours never quotes its bytes.
"""

from __future__ import annotations

import os
import struct
from pathlib import Path

import pytest

from evalkit.cache import FrameCache, integrity
from evalkit.cache import frame_cache as frame_cache_module
from evalkit.cache.integrity import stamp_path
from evalkit.cli.main import main
from evalkit.errors import CacheError
from tests.test_cache_unit import SPEC, fake_decode

SPEC_FLAGS = ["--nframes", "4", "--max-pixels", str(56 * 56), "--min-pixels", str(28 * 28)]
SECRET = b"root:*:20000:0:99999:7:::\n" * 25  # 650 bytes; its first 8 make a huge "length"


@pytest.fixture(autouse=True)
def _stand_in_decoder(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(
        frame_cache_module, "_load_videos", lambda ref, specs: [fake_decode(ref, s) for s in specs]
    )


@pytest.fixture
def video(tmp_path: Path) -> Path:
    p = tmp_path / "v.mp4"
    p.write_bytes(b"\x07" + b"x" * 20)
    return p


@pytest.fixture
def secret(tmp_path: Path) -> Path:
    p = tmp_path / "shadow"
    p.write_bytes(SECRET)
    return p


def _cli(*args: str) -> int:
    return main(["cache", *args])


def _build(root: Path, video: Path) -> int:
    return _cli("build", "--root", str(root), "--workers", "0", "--no-progress", *SPEC_FLAGS,
                str(video))  # fmt: skip


def _entry(root: Path, video: Path) -> Path:
    assert _build(root, video) == 0
    return FrameCache(root).path_for(video, SPEC)


def _linked_entry(root: Path, video: Path, target: Path | None) -> Path:
    """Build ``video``'s entry, then put a link in its place: to ``target``, or to itself."""
    entry = _entry(root, video)
    entry.unlink()
    entry.symlink_to(entry.name if target is None else target)
    return entry


def _secret_leaked(text: str) -> bool:
    (length,) = struct.unpack("<Q", SECRET[:8])
    return str(length) in text or "root:" in text or "99999" in text


def test_verify_names_a_link_to_a_foreign_file_and_never_prints_its_bytes(
    tmp_path: Path, video: Path, secret: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = _linked_entry(tmp_path / "c", video, secret)
    capsys.readouterr()
    assert _cli("verify", "--root", str(tmp_path / "c")) == 1
    out = capsys.readouterr().out
    assert f"DAMAGED {entry}: a symbolic link to {secret}: not opened" in out
    assert not _secret_leaked(out)
    assert _cli("verify", "--root", str(tmp_path / "c"), "--remove") == 1
    assert not os.path.lexists(entry) and secret.read_bytes() == SECRET
    assert _cli("verify", "--root", str(tmp_path / "c")) == 0


def test_verify_names_and_removes_a_link_to_itself_without_a_traceback(
    tmp_path: Path, video: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = _linked_entry(tmp_path / "c", video, None)
    capsys.readouterr()
    assert _cli("verify", "--root", str(tmp_path / "c"), "--remove") == 1
    out = capsys.readouterr().out
    assert f"DAMAGED {entry}: a symbolic link to itself (a loop): not opened" in out
    assert "1 removed" in out and not os.path.lexists(entry)


def test_ls_and_prune_count_and_remove_a_link_loop(
    tmp_path: Path, video: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = _linked_entry(tmp_path / "c", video, None)
    capsys.readouterr()
    assert _cli("ls", "--root", str(tmp_path / "c")) == 0
    assert "0 entries, 0.0 MB, 1 damaged" in capsys.readouterr().out
    assert _cli("prune", "--root", str(tmp_path / "c")) == 0
    assert f"{entry}: damaged: a symbolic link to itself" in capsys.readouterr().out
    assert not os.path.lexists(entry)


@pytest.mark.parametrize("link", ["foreign", "loop"])
def test_build_replaces_a_link_entry_and_names_it(
    tmp_path: Path,
    video: Path,
    secret: Path,
    link: str,
    capsys: pytest.CaptureFixture[str],
    caplog: pytest.LogCaptureFixture,
) -> None:
    entry = _linked_entry(tmp_path / "c", video, secret if link == "foreign" else None)
    capsys.readouterr()
    assert _build(tmp_path / "c", video) == 0
    assert "1 built, 0 already cached, 0 failed" in capsys.readouterr().out
    assert f"damaged entry {entry} (a symbolic link to " in caplog.text
    assert not _secret_leaked(caplog.text)
    assert not entry.is_symlink() and secret.read_bytes() == SECRET
    assert _build(tmp_path / "c", video) == 0  # and the next build finds it cached
    assert "0 built, 1 already cached, 0 failed" in capsys.readouterr().out


def test_a_link_to_a_good_entry_is_never_served(tmp_path: Path, video: Path) -> None:
    entry = _entry(tmp_path / "c", video)
    elsewhere = tmp_path / "elsewhere.safetensors"
    entry.rename(elsewhere)  # a complete, valid entry for this very key
    entry.symlink_to(elsewhere)
    with pytest.raises(CacheError, match=r"a symbolic link to .*elsewhere\.safetensors"):
        FrameCache(tmp_path / "c").get(video, SPEC, require=True)


def test_a_fifo_entry_is_named_and_never_opened(
    tmp_path: Path, video: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = _entry(tmp_path / "c", video)
    entry.unlink()
    os.mkfifo(entry)
    # Held open here so that a reader that does open it gets through instead of hanging.
    held = os.open(entry, os.O_RDWR | os.O_NONBLOCK)
    try:
        capsys.readouterr()
        assert _cli("verify", "--root", str(tmp_path / "c"), "--remove") == 1
    finally:
        os.close(held)
    assert f"DAMAGED {entry}: a FIFO: not opened" in capsys.readouterr().out
    assert not os.path.lexists(entry)


def test_a_linked_folder_is_named_and_nothing_is_written_where_it_points(
    tmp_path: Path, video: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = _entry(tmp_path / "c", video)
    folder, outside = entry.parent, tmp_path / "outside"
    folder.rename(outside)
    folder.symlink_to(outside)
    capsys.readouterr()
    assert _cli("verify", "--root", str(tmp_path / "c")) == 1
    out = capsys.readouterr().out
    assert f"DAMAGED {folder}: a symbolic link to {outside} in place of a folder" in out
    (outside / entry.name).unlink()
    outside_before = sorted(p.name for p in outside.iterdir())
    assert _build(tmp_path / "c", video) == 0
    assert not folder.is_symlink() and entry.is_file()
    assert sorted(p.name for p in outside.iterdir()) == outside_before


def test_a_linked_lock_file_does_not_fail_every_build(
    tmp_path: Path, video: Path, secret: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = _entry(tmp_path / "c", video)
    entry.unlink()
    lock = frame_cache_module.lock_path(entry)
    lock.unlink(missing_ok=True)
    lock.symlink_to(secret)
    assert _build(tmp_path / "c", video) == 0
    assert "1 built" in capsys.readouterr().out
    assert not lock.is_symlink() and secret.read_bytes() == SECRET


def test_a_stamp_is_never_written_through_a_link(
    tmp_path: Path, video: Path, secret: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(integrity, "_SETTLED_NS", 0)
    entry = _entry(tmp_path / "c", video)
    stamp = stamp_path(entry)
    stamp.unlink(missing_ok=True)
    stamp.symlink_to(secret)
    FrameCache(tmp_path / "c").get(video, SPEC)  # first touch: checks and stamps the entry
    assert secret.read_bytes() == SECRET
    assert stamp.is_file() and not stamp.is_symlink()


def test_a_damaged_regular_entry_is_named_without_quoting_its_bytes(
    tmp_path: Path, video: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    entry = _entry(tmp_path / "c", video)
    entry.write_bytes(SECRET)
    capsys.readouterr()
    assert _cli("verify", "--root", str(tmp_path / "c")) == 1
    out = capsys.readouterr().out
    assert "header length (its first 8 bytes) does not fit a 650-byte file" in out
    assert not _secret_leaked(out)
