"""The headless browser the HTML report tests drive (Chromium)."""

from __future__ import annotations

import os
import re
import shutil
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
    flags = [chromium(), "--headless", "--no-sandbox", "--disable-gpu", "--hide-scrollbars"]
    flags.append(f"--window-size={width},{height}")
    dom = subprocess.run(
        [*flags, "--dump-dom", probe.as_uri()], capture_output=True, text=True, timeout=180
    ).stdout
    found = re.search(r'data-w="(\d+),(\d+),(\d+),(\d+)"', dom)
    assert found, "the page did not finish loading"
    cmd = [*flags, f"--screenshot={shot}", page.as_uri()]
    subprocess.run(cmd, capture_output=True, timeout=180, check=True)
    keys = ("page", "table_right", "scroll", "tables")
    return dict(zip(keys, map(int, found.groups()), strict=True))
