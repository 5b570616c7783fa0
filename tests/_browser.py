"""The headless browser the HTML report tests drive (Chromium)."""

from __future__ import annotations

import contextlib
import os
import re
import shutil
import signal
import subprocess
from pathlib import Path

import pytest


def chromium() -> str:
    """Chromium's path; without one the test skips, except under ``CI=true`` where it fails
    (CI installs it, ``.ci/run``: a browser test that silently skips there proves nothing)."""
    path = shutil.which("chromium") or shutil.which("chromium-browser")
    if path:
        return path
    if os.environ.get("CI", "").lower() == "true":
        pytest.fail(
            "CI=true but no chromium on PATH: .ci/run installs it "
            "(apt-get install -y chromium); install it or unset CI to skip this test"
        )
    pytest.skip("chromium is not installed")


def page_layout(page: Path, shot: Path, width: int = 1280, height: int = 3000) -> dict[str, int]:
    """The page's width, its widest table's right edge, its scroll width and its number of
    tables at ``width`` px in headless Chromium; a screenshot of the page in ``shot``."""
    probe = page.with_name("probe.html")
    script = (
        "<script>window.addEventListener('load',()=>{const d=document.documentElement;"
        "const r=[...document.querySelectorAll('table')].map(t=>t.getBoundingClientRect().right);"
        "document.body.setAttribute('data-w',[d.clientWidth,Math.ceil(Math.max(0,...r)),"
        "d.scrollWidth,document.querySelectorAll('table').length].join(','))})</script>"
    )
    probe.write_text(page.read_text().replace("</body>", script + "</body>"))
    found = re.search(r'data-w="(\d+),(\d+),(\d+),(\d+)"', dump_dom(probe, width, height))
    assert found, "the page did not finish loading"
    screenshot(page, shot, width, height)
    keys = ("page", "table_right", "scroll", "tables")
    return dict(zip(keys, map(int, found.groups()), strict=True))


def dump_dom(page: Path, width: int = 1280, height: int = 3000) -> str:
    """The page's DOM once loaded (its scripts run) in headless Chromium."""
    return _browse([*_flags(width, height), "--dump-dom", page.as_uri()]).decode()


def screenshot(page: Path, shot: Path, width: int = 1280, height: int = 3000) -> None:
    """A PNG of the page at ``width`` x ``height`` px in ``shot``."""
    _browse([*_flags(width, height), f"--screenshot={shot}", page.as_uri()])


def _flags(width: int, height: int) -> list[str]:
    flags = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    # No zygote processes, and its shared memory in /tmp, not /dev/shm (whose entries the
    # suite's leak watch and the engines' watchdogs look at)
    return [*flags, "--no-zygote", "--disable-dev-shm-usage", f"--window-size={width},{height}"]


def _browse(cmd: list[str], timeout_s: float = 180.0) -> bytes:
    # Chromium in a process group of its own, which is killed whole afterwards, whatever
    # happened: a helper process it leaves behind (or one that spins) cannot outlive the
    # test and starve the rest of the suite.
    proc = subprocess.Popen(
        cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, start_new_session=True
    )
    try:
        out, err = proc.communicate(timeout=timeout_s)
    except subprocess.TimeoutExpired:
        pytest.fail(f"chromium took more than {timeout_s:g} s: {' '.join(cmd[-2:])}")
    finally:
        with contextlib.suppress(ProcessLookupError, PermissionError):
            os.killpg(proc.pid, signal.SIGKILL)
        with contextlib.suppress(subprocess.TimeoutExpired):
            proc.wait(10)
    assert proc.returncode == 0, f"chromium failed ({proc.returncode}): {err.decode()[-2000:]}"
    return out
