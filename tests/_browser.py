"""The headless browser the HTML report tests drive (Chromium)."""

from __future__ import annotations

import os
import shutil

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
