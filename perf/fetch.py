"""A run whose release comes from the Hub on first use: fetched while the run goes
(overlapped) against downloaded whole first, then run (before), on the same release.

The Hub is the local stand-in (``evalkit.testing.hub_server``) with a throttled transfer
rate; the release is Video-MME's layout with ``--archives`` chunked zips of 2 tiny videos
each (4 questions per archive), each padded to ``--archive-kb`` so that its listing (read
from its end) is a small part of it, as in a real release. The engine is scripted: one
request at a time, each taking ``--request-s`` (a saturated engine; the time per archive's
samples is set close to the time its archive takes to download, the case where
overlapping matters most). Each arm runs in a child process from an empty EVALKIT_DATA
and frame cache.

(overlapped)  ``evalkit run`` as it is: annotations and zip listings first, then every
              archive fetched in the order the samples need them while the run goes
(before)      every archive fetched (``evalkit bench fetch``), then the run

Figures: time to the first scored sample and total wall of each arm, their ratios
(``first_sample_ratio``, ``total_wall_ratio``: overlapped / before), and the overlapped
total against max(download alone, evaluation alone) (``total_over_bound``; the goal is at
most 1.10). Prints progress on stderr and ONE JSON object last on stdout.
"""

from __future__ import annotations

import argparse
import io
import json
import os
import subprocess
import sys
import tempfile
import time
import zipfile

CHILD = """
import asyncio, json, sys, time
from evalkit.bench.registry import get_benchmark
from evalkit.engines.base import Completion, Timings
from evalkit.hub import Need, release_root
from evalkit.run.config import RunConfig
from evalkit.run.execute import execute

mode, home, delay = sys.argv[1], sys.argv[2], float(sys.argv[3])
start = time.perf_counter()
first = []

class Saturated:
    model = "scripted"
    def __init__(self):
        self.lock = None
    async def generate(self, request):
        self.lock = self.lock or asyncio.Lock()
        async with self.lock:  # one request at a time, as a busy engine serves them
            await asyncio.sleep(delay)
        first.append(time.perf_counter())
        return Completion(request.id, ["A"], 10, 1, timings=Timings())
    async def close(self):
        return None

fetched = None
if mode == "before":
    release_root(get_benchmark("Video-MME"), Need())
    fetched = time.perf_counter() - start
cfg = RunConfig(model="m", engine="openai", bench=["Video-MME"], cache_root=home + "/cache",
                cache_workers=1, runs_dir=home + "/runs", run_id=mode)
result = execute(cfg, engine=Saturated())
done = sum(s.completed for s in result.stats.values())
print(json.dumps({"first": min(first) - start, "total": time.perf_counter() - start,
                  "fetched": fetched, "samples": done}))
"""


def log(msg: str) -> None:
    print(f"[perf/fetch] {msg}", file=sys.stderr, flush=True)


def arm(hub: object, mode: str, delay: float) -> dict[str, float]:
    """One arm in a child process with the Hub at the stand-in; its figures."""
    from evalkit.testing.hub_server import client_env

    with tempfile.TemporaryDirectory(prefix=f"perf-fetch-{mode}-") as home:
        out = subprocess.run(
            [sys.executable, "-c", CHILD, mode, home, str(delay)],
            env=client_env(hub, home),  # type: ignore[arg-type]
            capture_output=True,
            text=True,
            timeout=1200,
        )
    if out.returncode != 0:
        raise SystemExit(f"perf/fetch: the {mode} arm failed:\n{out.stderr[-3000:]}")
    figures: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    log(f"{mode}: {figures}")
    return figures


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--archives", type=int, default=16, help="chunked zips (2 videos each)")
    p.add_argument("--archive-s", type=float, default=1.0, help="seconds one archive takes")
    p.add_argument("--archive-kb", type=int, default=1000, help="kB each archive is padded to")
    p.add_argument("--request-s", type=float, default=0.25, help="seconds one request takes")
    args = p.parse_args()

    from evalkit.bench.registry import get_benchmark
    from evalkit.testing import hub_fixtures as fx
    from evalkit.testing.hub_server import HubStandIn

    release = fx.videomme(
        n_videos=2 * args.archives, per_archive=2, commit=get_benchmark("Video-MME").data.revision
    )
    for name in [k for k in release.files if k.startswith("videos_chunked_")]:
        # an archive much larger than its listing, as real ones are (the listing is read
        # from the end of each zip before the run starts)
        with zipfile.ZipFile(io.BytesIO(release.files[name])) as z:
            members = {m: z.read(m) for m in z.namelist()}
        members["data/padding.bin"] = os.urandom(args.archive_kb * 1000)
        release.files[name] = fx.zip_of(members)
    sizes = [len(v) for k, v in release.files.items() if k.startswith("videos_chunked_")]
    with HubStandIn() as hub:
        fx.serve(hub, release)
        hub.throttle_bps = sum(sizes) / len(sizes) / args.archive_s
        log(
            f"{args.archives} archives of ~{sum(sizes) / len(sizes) / 1e3:.0f} kB at "
            f"{hub.throttle_bps / 1e3:.1f} kB/s; {4 * args.archives} samples at "
            f"{args.request_s} s each"
        )
        t0 = time.perf_counter()
        before = arm(hub, "before", args.request_s)
        overlapped = arm(hub, "overlapped", args.request_s)
        wall = time.perf_counter() - t0
    download = before["fetched"]
    evaluation = before["total"] - before["fetched"]
    bound = max(download, evaluation)
    print(
        json.dumps(
            {
                "archives": args.archives,
                "samples": overlapped["samples"],
                "download_s": round(download, 2),
                "evaluation_s": round(evaluation, 2),
                "one_archive_s": round(download / args.archives, 2),
                "before_first_sample_s": round(before["first"], 2),
                "overlapped_first_sample_s": round(overlapped["first"], 2),
                "before_total_s": round(before["total"], 2),
                "overlapped_total_s": round(overlapped["total"], 2),
                "first_sample_ratio": round(overlapped["first"] / before["first"], 3),
                "total_wall_ratio": round(overlapped["total"] / before["total"], 3),
                "total_over_bound": round(overlapped["total"] / bound, 3),
                "script_wall_s": round(wall, 1),
            }
        )
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
