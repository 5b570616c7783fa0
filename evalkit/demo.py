"""``python -m evalkit.demo``: the CPU demo (for now: the frame cache, end to end).

Generates a few small synthetic videos whose frames carry their own index under
``./.evalkit/demo/``, builds their frame cache with 2 worker processes through the same
code path as ``evalkit cache build``, lists the cache, and reads every entry back,
checking that the frames served are the source frames the FrameSpec asked for.
A later issue turns this into the full evaluation demo.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from evalkit.video.types import FrameSpec

# Small enough to run in seconds on a laptop CPU; the pixel budget keeps frames ~112 px.
SPEC = FrameSpec(fps=2.0, max_frames=16, min_pixels=28 * 28 * 4, max_pixels=28 * 28 * 16)
VIDEOS = [  # (name, frames, fps, width, height)
    ("clip_a.mp4", 150, 30.0, 320, 240),
    ("clip_b.mp4", 96, 24.0, 256, 144),
    ("clip_c.mkv", 60, 25.0, 240, 240),
    ("clip_d.avi", 120, 30.0, 320, 180),
]


def _spec_flags(spec: FrameSpec) -> list[str]:
    flags = []
    for name, value in spec.model_dump().items():
        if value is not None:
            flags += ["--" + name.replace("_", "-"), str(value)]
    return flags


def make_videos(folder: Path) -> list[Path]:
    """Write the demo videos (kept between runs: their cache entries then stay valid)."""
    from evalkit.video.synth import write_index_video

    folder.mkdir(parents=True, exist_ok=True)
    out = []
    for name, n, fps, w, h in VIDEOS:
        path = folder / name
        if not path.exists():
            write_index_video(path.with_suffix(".part" + path.suffix), n, fps, w, h).rename(path)
        out.append(path)
    return out


def check_read_back(root: Path, videos: list[Path]) -> int:
    """Read every entry back; return how many serve other frames than the spec asked for."""
    from evalkit.cache import FrameCache
    from evalkit.video.synth import read_indices

    cache = FrameCache(root)
    wrong = 0
    for video in videos:
        frames = cache.get(video, SPEC, require=True)
        seen = read_indices(frames.array)
        ok = seen == list(frames.meta.indices)
        wrong += not ok
        t, h, w, _ = frames.array.shape
        print(
            f"  {'ok   ' if ok else 'WRONG'} {video.name:<11} {t:>3} frames {w}x{h}  "
            f"source frames {seen[:4]}...{seen[-1:]}"
        )
    return wrong


def main(argv: list[str] | None = None) -> int:
    """Run the demo; non-zero when the build failed or a frame read back wrong."""
    from evalkit.cli.main import main as cli

    p = argparse.ArgumentParser(prog="python -m evalkit.demo", description=__doc__)
    p.add_argument("--dir", type=Path, default=Path(".evalkit/demo"), help="working folder")
    p.add_argument("--fresh", action="store_true", help="empty the demo cache first")
    args = p.parse_args(argv)
    root = args.dir / "cache"
    videos = make_videos(args.dir / "videos")
    print(f"evalkit demo: {len(videos)} synthetic videos in {args.dir / 'videos'}")
    if args.fresh:
        cli(["cache", "prune", "--all", "--root", str(root)])
    build = ["cache", "build", *map(str, videos), "--root", str(root), "--workers", "2"]
    rc = cli(build + _spec_flags(SPEC))
    cli(["cache", "ls", "--root", str(root)])
    print("reading every entry back (frame indices decoded from the pixels):")
    wrong = check_read_back(root, videos)
    print("demo OK" if rc == 0 and wrong == 0 else "demo FAILED")
    return rc or (1 if wrong else 0)


if __name__ == "__main__":
    sys.exit(main())
