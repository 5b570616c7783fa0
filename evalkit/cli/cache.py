"""``evalkit cache build|verify|ls|prune``: fill and look after the frame cache."""

from __future__ import annotations

import argparse
import itertools
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import ValidationError

from evalkit.cli.checks import non_negative_int, output_dir
from evalkit.config import add_model_args, model_from_args
from evalkit.errors import ConfigError
from evalkit.video.types import FrameSpec

if TYPE_CHECKING:
    from evalkit.cache import FrameCache


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Sub-actions and their flags (FrameSpec flags come from its field docstrings)."""
    sub = parser.add_subparsers(dest="action", required=True, metavar="ACTION")

    build = sub.add_parser("build", help="decode videos into the cache with N processes")
    _video_args(build)
    build.add_argument(
        "--workers",
        type=non_negative_int,
        default=min(2, os.cpu_count() or 1),
        help="decoding processes (0 = in this process; default: %(default)s)",
    )
    build.add_argument(
        "--grid",
        action="append",
        default=[],
        metavar="FIELD=V1,V2,...",
        help="build every combination of these FrameSpec values (over the other frame "
        "settings), decoding each video once for all of them; repeatable, e.g. "
        "--grid nframes=16,32 --grid max_pixels=200704,602112 (frames.nframes works too; "
        "none clears a field such as total_pixels)",
    )
    build.add_argument("--no-progress", action="store_true", help="no progress bar")
    _ray_args(build)

    verify = sub.add_parser("verify", help="read every entry in full; report damaged ones")
    _store_args(verify)
    verify.add_argument("--remove", action="store_true", help="also remove damaged entries")
    verify.add_argument(
        "--ignore-tmp",
        action="store_true",
        help="exit 0 even when unfinished writes (temporary files) lie in the cache",
    )

    ls = sub.add_parser(
        "ls", help="entries, bytes and count per spec; with videos, which are cached"
    )
    _video_args(ls, required=False)

    prune = sub.add_parser(
        "prune", help="remove unfinished writes and entries whose source changed or vanished"
    )
    _store_args(prune)
    prune.add_argument("--all", action="store_true", help="remove every entry")
    prune.add_argument("--dry-run", action="store_true", help="only say what would go")


def _ray_args(p: argparse.ArgumentParser) -> None:
    g = p.add_argument_group("distributed build (needs pip install 'evalkit[ray]')")
    g.add_argument(
        "--ray",
        action="store_true",
        help="decode with Ray tasks (one per long video, a few short ones per task), "
        "writing into --root, which every node must see at the same path; without "
        "--ray-address a local Ray instance with --workers CPUs is started and stopped",
    )
    g.add_argument(
        "--ray-address",
        metavar="ADDR",
        help="join this Ray cluster (e.g. auto, or HEAD_IP:6379 after `ray start --head`); "
        "implies --ray",
    )
    g.add_argument(
        "--node-map",
        metavar="FILE",
        help="where node-local videos live: lines `PATH_PREFIX NODE` (NODE: a Ray node id "
        "or the node's IP; # comments); tasks for videos under a prefix run on that node "
        "(waiting while it is busy) and elsewhere only if it is gone. Implies --ray",
    )


def _store_args(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--root", help="cache directory (default: $EVALKIT_CACHE or ~/.cache/evalkit/frames)"
    )
    p.add_argument("--json", action="store_true", help="print the result as one JSON object")


def _video_args(p: argparse.ArgumentParser, required: bool = True) -> None:
    p.add_argument("videos", nargs="*", metavar="VIDEO", help="video files")
    p.add_argument(
        "--list",
        dest="list_file",
        metavar="FILE",
        help="file with one video path per line (# comments; relative to the file's folder)",
    )
    _store_args(p)
    p.add_argument("--codec", choices=["raw", "jpeg"], default="raw", help="entry encoding")
    p.add_argument("--jpeg-quality", type=int, default=90, help="JPEG quality (codec jpeg)")
    p.add_argument(
        "--identity",
        choices=["stat", "content"],
        default="stat",
        help="source identity in the key: path+size+mtime (stat) or a content hash",
    )
    p.add_argument(
        "--bench",
        metavar="NAME",
        help="use this benchmark's pinned FrameSpec (as `evalkit run --bench NAME` does; "
        "FrameSpec flags override it) and, without VIDEO paths, its videos",
    )
    p.add_argument(
        "--data-root",
        help="folder with one sub-folder per benchmark (with --bench; default: the release "
        "from the Hub, fetched into EVALKIT_DATA on first use)",
    )
    p.add_argument(
        "--no-fetch",
        action="store_true",
        help="never fetch from the Hub: a release not here already is an error",
    )
    p.add_argument(
        "--model",
        help="checkpoint whose family's frame contract the run will use (as `evalkit run "
        "--model`: its grid, and its reference frames where the benchmark leaves them)",
    )
    add_model_args(p, FrameSpec)
    p.set_defaults(videos_required=required)


def _plan(args: argparse.Namespace) -> tuple[FrameSpec, list[Any]]:
    """The FrameSpec and the videos (paths or windowed VideoRefs) a build or ls is about."""
    videos: list[Any] = _videos(args, required=args.videos_required and not args.bench)
    if not args.bench:
        return model_from_args(args, FrameSpec), videos
    from evalkit.bench.registry import get_benchmark
    from evalkit.run.config import RunConfig
    from evalkit.run.plan import (
        frame_settings,
        model_family,
        model_source,
        refs_of,
        resolve_benchmarks,
    )

    base, _, variant = args.bench.partition(":")
    cfg = RunConfig(
        model=args.model or "",
        bench=[args.bench],
        data_root=args.data_root,
        fetch=not args.no_fetch,
    )
    family = model_family(cfg, model_source(cfg).path) if args.model else None
    spec = get_benchmark(base).with_variant(variant or None)
    if not videos and (args.data_root or spec.data.local_path or args.videos_required):
        (bench,) = resolve_benchmarks(cfg, family)  # names the folders it tried if none
        pinned, videos = bench.frame_spec, list(dict.fromkeys(refs_of(bench.samples)))
    else:
        pinned = frame_settings(cfg, spec.frames, family)[0]
    return model_from_args(args, FrameSpec, base=pinned), videos


def _videos(args: argparse.Namespace, required: bool) -> list[str]:
    videos = list(args.videos)
    if args.list_file:
        path = Path(args.list_file)
        try:
            lines = path.read_text().splitlines()
        except OSError as exc:
            raise ConfigError(f"{path}: cannot read the video list: {exc.strerror}") from None
        for line in lines:
            line = line.strip()
            if line and not line.startswith("#"):
                videos.append(str(path.parent / line) if not os.path.isabs(line) else line)
    if not videos and required:
        raise ConfigError("no videos given: pass VIDEO paths, --list FILE or --bench NAME")
    return videos


def _cache(args: argparse.Namespace, with_codec: bool = False) -> FrameCache:
    from evalkit.cache import FrameCache

    if args.root:  # a mistyped --root must not read as "an empty, healthy cache"
        output_dir(args.root, "--root")
        if args.action != "build" and not os.path.isdir(args.root):
            raise ConfigError(f"--root {args.root}: no such folder, so no cache there")
    if not with_codec:
        return FrameCache(args.root)
    return FrameCache(
        args.root, codec=args.codec, jpeg_quality=args.jpeg_quality, identity=args.identity
    )


def run(args: argparse.Namespace) -> int:
    """Dispatch to the sub-action; non-zero when something failed or was found damaged."""
    action = {"build": _build, "verify": _verify, "ls": _ls, "prune": _prune}[args.action]
    return action(args)


def _build(args: argparse.Namespace) -> int:
    from evalkit.cache import build_cache

    spec, videos = _plan(args)
    specs = grid_specs(spec, args.grid)
    cache = _cache(args, with_codec=True)
    if args.ray or args.ray_address or args.node_map:
        report = _build_on_ray(args, cache, specs, videos)
    else:
        report = build_cache(
            cache, videos, specs, workers=args.workers, progress=not args.no_progress
        )
    if args.json:
        print(json.dumps({"root": str(cache.root), **report.to_dict()}))
    else:
        print(f"frame cache {cache.root}")
        print(report.summary())
    return 0 if report.ok else 1


def grid_specs(base: FrameSpec, grid: list[str]) -> list[FrameSpec]:
    """The FrameSpecs of ``--grid FIELD=V1,V2,...`` items over ``base`` (their cross
    product; ``base`` alone without any). FIELD may carry the ``frames.`` prefix."""
    from evalkit.registry import did_you_mean

    axes = []
    for item in grid:
        name, eq, values = item.partition("=")
        field = name.strip().removeprefix("frames.")
        if not eq or not values.strip():
            raise ConfigError(f"--grid {item!r}: expected FIELD=V1,V2,... (e.g. nframes=16,32)")
        if field not in FrameSpec.model_fields:
            hint = did_you_mean(field, list(FrameSpec.model_fields))
            raise ConfigError(f"--grid {item!r}: {field!r} is not a FrameSpec field{hint}")
        axes.append([(field, v.strip()) for v in values.split(",")])
    specs = []
    for combo in itertools.product(*axes):
        chosen = {k: None if v.lower() == "none" else v for k, v in combo}  # none: unset
        try:
            specs.append(FrameSpec.model_validate({**base.model_dump(), **chosen}))
        except ValidationError as exc:
            where = " ".join(f"{k}={v}" for k, v in combo)
            raise ConfigError(f"--grid {where}: {_reasons(exc)}") from None
    return list(dict.fromkeys(specs))


def _reasons(exc: ValidationError) -> str:
    """pydantic's errors as one line: ``field: message``, a check across fields as is."""
    parts = []
    for err in exc.errors():
        msg = str(err["msg"]).removeprefix("Value error, ")
        loc = ".".join(str(x) for x in err["loc"])
        parts.append(f"{loc}: {msg}, got {err.get('input')!r}" if loc else msg)
    return "; ".join(parts)


def _build_on_ray(
    args: argparse.Namespace, cache: FrameCache, specs: list[FrameSpec], videos: list[Any]
) -> Any:
    from evalkit.cache.key import as_ref
    from evalkit.scale.cache_build import build_on_ray, read_node_map

    return build_on_ray(
        cache,
        [as_ref(v) for v in videos],
        specs,
        address=args.ray_address,
        node_map=read_node_map(args.node_map) if args.node_map else (),
        num_cpus=args.workers or None,
        progress=not args.no_progress,
    )


def _verify(args: argparse.Namespace) -> int:
    from evalkit.cache import verify

    cache = _cache(args)
    report = verify(cache, remove=args.remove)
    if args.json:
        print(json.dumps(vars(report)))
    else:
        print(
            f"{report.good} entries intact ({report.bytes / 1e6:.1f} MB), "
            f"{len(report.damaged)} damaged, {len(report.removed)} removed"
        )
        for path, why in report.damaged.items():
            print(f"  DAMAGED {path}: {why}")
        if report.unfinished:
            print(f"{len(report.unfinished)} unfinished writes (temporary files):")
        for path, what in report.unfinished.items():
            print(f"  UNFINISHED {path}: {what}")
    return 1 if report.damaged or (report.unfinished and not args.ignore_tmp) else 0


def _ls(args: argparse.Namespace) -> int:
    from evalkit.cache import listing

    cache = _cache(args, with_codec=True)
    result = listing(cache)
    spec, videos = _plan(args)
    if args.bench:
        result["bench"], result["spec"] = args.bench, spec.model_dump(mode="json")
    if videos:
        missing = [_label(v) for v in videos if not _cached(cache, v, spec)]
        result["videos"] = {"hit": len(videos) - len(missing), "miss": len(missing)}
        result["missing"] = missing
    if args.json:
        print(json.dumps(result))
        return 0
    print(
        f"{result['root']}: {result['entries']} entries, {result['bytes'] / 1e6:.1f} MB, "
        f"{result['damaged']} damaged, {result['temp_files']} unfinished writes"
    )
    for g in result["per_spec"]:
        print(
            f"  {g['entries']:>6} entries {g['bytes'] / 1e6:>10.1f} MB  codec={g['codec']} "
            + _describe(g["spec"])
        )
    if args.bench:
        print(f"{args.bench}'s spec: {_describe(result['spec'])}")
    if videos:
        print(f"videos under this spec: {result['videos']['hit']} hit, {len(missing)} miss")
        for v in missing:
            print(f"  MISS {v}")
    return 0


def _describe(s: dict[str, Any]) -> str:
    rate = f"nframes={s['nframes']}" if s["nframes"] else f"fps={s['fps']}"
    return (
        f"{rate} max_frames={s['max_frames']} max_pixels={s['max_pixels']} "
        f"factor={s['factor']} resize={s['resize']}"
    )


def _label(video: Any) -> str:
    from evalkit.cache.build import label
    from evalkit.sample import VideoRef

    return label(video) if isinstance(video, VideoRef) else str(video)


def _cached(cache: FrameCache, video: Any, spec: FrameSpec) -> bool:
    from evalkit.errors import VideoError

    try:
        return cache.lookup(video, spec) is not None
    except VideoError:
        return False


def _prune(args: argparse.Namespace) -> int:
    from evalkit.cache import prune

    report = prune(_cache(args), everything=args.all, dry_run=args.dry_run)
    if args.json:
        print(json.dumps(vars(report)))
        return 0
    verb = "would remove" if args.dry_run else "removed"
    print(
        f"{verb} {len(report.removed)} files ({report.bytes / 1e6:.1f} MB)"
        + (f"; {len(report.busy)} skipped, in use by a writer" if report.busy else "")
    )
    for path, why in sorted(report.removed.items()):
        print(f"  {path}: {why}")
    return 0
