"""The math-verify worker process: one JSON job per stdin line, one JSON answer per line.

Started by ``evalkit.scoring.mathverify`` for calls made off the main thread; here,
on this process's main thread, math-verify's signal-based time limits work.
"""

from __future__ import annotations

import json
import sys

from evalkit.scoring.mathverify import verify_strings


def main() -> None:
    """Serve jobs ``[gold, answer, limit_s]`` until stdin closes."""
    for line in sys.stdin:
        gold, answer, limit_s = json.loads(line)
        sys.stdout.write(json.dumps(verify_strings(gold, answer, limit_s)) + "\n")
        sys.stdout.flush()


if __name__ == "__main__":
    main()
