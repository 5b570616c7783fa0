"""The answer's working folder is capped in total (a tmpfs of the jail's own), not only
per file, and nothing of it is left on the host."""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

from evalkit.scoring.sandbox import Limits, close_spares, isolation, run_job

pytestmark = pytest.mark.skipif(
    "filesystem_jail" not in isolation(), reason="needs the filesystem jail (root, util-linux)"
)

# Writes 4 MB files until the disk says no (at most 20: 80 MB, so the test itself stays
# small on a host without the cap) and records how much it got down.
_FILL = """
WRITTEN = 0
for i in range(20):
    try:
        with open(f"fill{i}.bin", "wb") as f:
            for _ in range(4):
                f.write(b"x" * (1 << 20))
                f.flush()
                WRITTEN += 1 << 20
    except OSError:
        break
def add(a, b):
    return a + b
"""


def test_an_answer_cannot_write_more_than_the_disk_cap_in_total() -> None:
    limits = Limits(disk_mb=8, file_mb=4, cpu_s=20, wall_s=60)
    tests = ["assert WRITTEN <= 8 * 2**20", "assert WRITTEN >= 4 * 2**20", "assert add(2, 3) == 5"]
    out = run_job({"kind": "python", "code": _FILL, "tests": tests}, limits)
    assert out.result == {"passed": [True, True, True]}, out


def _folders() -> set[Path]:
    # this process's sandbox folders (other processes, xdist's other worker, have theirs)
    return set(Path(tempfile.gettempdir()).glob(f"evalkit-*-{os.getpid()}-*"))


def test_the_working_folder_leaves_nothing_on_the_host() -> None:
    close_spares()
    before = _folders()
    out = run_job({"kind": "python", "code": _FILL, "tests": ["assert add(1, 1) == 2"]})
    assert out.result == {"passed": [True]}
    close_spares()  # and the sandboxes started ahead for the next jobs
    assert _folders() - before == set()
