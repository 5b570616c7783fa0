"""A scripted Engine for testing the pipeline's SCHEDULING only (never the product).

It sleeps for a configurable prefill and decode time, records when each request entered
and left, and can fail chosen requests, so tests can see overlap, bounds and retries.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field

from evalkit.engines.base import Completion, Request, Timings
from evalkit.errors import TransientError


@dataclass
class ScriptedEngine:
    prefill_s: float = 0.01
    decode_s: float = 0.05
    fail_ids: set[str] = field(default_factory=set)
    transient_failures: dict[str, int] = field(default_factory=dict)
    events: list[tuple[str, str, float]] = field(default_factory=list)
    active: int = 0
    max_active: int = 0
    calls: int = 0

    async def generate(self, request: Request) -> Completion:
        self.calls += 1
        submitted = time.time()
        self.events.append(("start", request.id, submitted))
        self.active += 1
        self.max_active = max(self.max_active, self.active)
        try:
            if self.transient_failures.get(request.id, 0) > 0:
                self.transient_failures[request.id] -= 1
                raise TransientError(f"scripted overload on {request.id}")
            if request.id in self.fail_ids:
                raise RuntimeError(f"scripted failure on {request.id}")
            await asyncio.sleep(self.prefill_s)
            first = time.time()
            await asyncio.sleep(self.decode_s)
        finally:
            self.active -= 1
            self.events.append(("end", request.id, time.time()))
        answer = request.metadata.get("answer", "A")
        return Completion(
            request_id=request.id,
            texts=[answer],
            prompt_tokens=len(request.text.split()),
            output_tokens=1,
            timings=Timings(submitted=submitted, first_token=first, finished=time.time()),
        )

    def interval(self, request_id: str) -> tuple[float, float]:
        start = next(t for kind, rid, t in self.events if kind == "start" and rid == request_id)
        end = [t for kind, rid, t in self.events if kind == "end" and rid == request_id][-1]
        return start, end

    async def close(self) -> None:
        return None
