"""``evalkit sweep`` as a process of its own, on a scripted engine (for the tests that
count its processes, signal it, or start a second sweep beside it).

    python tests/_sweep_main.py SLOW_ID SLOW_S sweep ARGS...

Every request answers at once, except those of sample ``SLOW_ID``, which take ``SLOW_S``
seconds: each setting then scores its other samples and keeps one request in flight.
"""

from __future__ import annotations

import asyncio
import sys
from dataclasses import dataclass
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from evalkit.engines.base import Completion, Request
from tests.scripted_engine import ScriptedEngine


@dataclass
class SlowOnOne(ScriptedEngine):
    """The scripted engine, ``slow_s`` longer on the requests of sample ``slow_id``."""

    slow_id: str = ""
    slow_s: float = 0.0

    async def generate(self, request: Request) -> Completion:
        if request.id == self.slow_id:
            await asyncio.sleep(self.slow_s)
        return await super().generate(request)


def main() -> int:
    import evalkit.run.execute as runner
    from evalkit.cli.main import main as evalkit_main

    slow_id, slow_s = sys.argv[1], float(sys.argv[2])

    def make_engine(plan: object) -> SlowOnOne:
        return SlowOnOne(prefill_s=0, decode_s=0, slow_id=slow_id, slow_s=slow_s)

    runner.make_engine = make_engine  # type: ignore[assignment]
    return evalkit_main(sys.argv[3:])


if __name__ == "__main__":  # spawned decoding workers import this file: run nothing there
    raise SystemExit(main())
