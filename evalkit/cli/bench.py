"""``evalkit bench list | show NAME | validate NAME [--root DIR] | ids NAME | fetch NAME |
pin NAME``: the pinned benchmark specs, a copy's problems and sample ids, and releases
fetched from the Hugging Face Hub (``evalkit.hub``)."""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from typing import TYPE_CHECKING, Any

from evalkit.bench.registry import registry
from evalkit.bench.spec import BenchmarkSpec
from evalkit.cli.checks import existing_dir, non_negative_int
from evalkit.config import positive_int
from evalkit.errors import ConfigError
from evalkit.run.preflight import data_file

if TYPE_CHECKING:
    from evalkit.bench.files import Problems


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """Subcommands list, show and validate."""
    sub = parser.add_subparsers(dest="action", required=True)
    ls = sub.add_parser("list", help="every shipped benchmark with its pinned settings")
    ls.add_argument(
        "--data-root",
        "--root",
        dest="data_root",
        help="folder holding one sub-folder per benchmark: adds a column of sample counts",
    )
    ls.add_argument(
        "--wide", action="store_true", help="every column (pixels, aliases): wider than 100"
    )
    show = sub.add_parser("show", help="one benchmark's spec, for people (--json: the dump)")
    show.add_argument("name", help="benchmark name or alias, optionally NAME:VARIANT")
    show.add_argument("--json", action="store_true", help="the whole spec as JSON")
    val = sub.add_parser(
        "validate", help="check a local copy (NAME --root DIR) or a unified file (--data FILE)"
    )
    val.add_argument("name", nargs="?", help="benchmark name or alias, optionally NAME:VARIANT")
    val.add_argument(
        "--root",
        "--data-root",
        dest="root",
        help="the downloaded official release (with NAME): its folder or the folder above "
        "it, as evalkit run / score --data-root take it (default: the release from the "
        "Hub, fetched into EVALKIT_DATA on first use)",
    )
    _no_fetch_flag(val)
    val.add_argument("--data", help="a unified JSON/JSONL file, as `evalkit run --data` reads it")
    val.add_argument("--video-root", help="where --data's media paths live (default: its folder)")
    val.add_argument("--decode", action="store_true", help="also decode every video")
    val.add_argument("--json", action="store_true", help="print the counts and reasons as JSON")
    val.add_argument(
        "--max-problems",
        type=non_negative_int,
        default=50,
        help="problems printed, and listed by --json (all counted)",
    )
    _media_flag(val)
    _ids_parser(sub)
    _fetch_parser(sub)
    pin = sub.add_parser(
        "pin",
        help="maintainers: write the commit of the snapshot fetched and validated into the spec",
    )
    pin.add_argument("name", help="benchmark name or alias")


def _fetch_parser(sub: Any) -> None:
    fetch = sub.add_parser(
        "fetch",
        help="fetch releases from the Hugging Face Hub into EVALKIT_DATA (--list: how each is)",
    )
    fetch.add_argument("names", nargs="?", help="NAME[,NAME...], each optionally NAME:VARIANT")
    fetch.add_argument(
        "--list",
        action="store_true",
        help="every benchmark: fetched whole, annotations only, or by hand, with source and size",
    )
    fetch.add_argument(
        "--limit", type=positive_int, help="the media of the first N samples only (as run --limit)"
    )
    fetch.add_argument(
        "--annotations-only",
        action="store_true",
        help="the annotation files only (what evalkit score and bench ids read)",
    )
    fetch.add_argument(
        "--refresh",
        action="store_true",
        help="a spec that pins no revision: ask the Hub for its current commit again",
    )


def _no_fetch_flag(p: argparse.ArgumentParser) -> None:
    p.add_argument(
        "--no-fetch",
        action="store_true",
        help="never fetch from the Hub: a release not here already is an error",
    )


def _media_flag(val: argparse.ArgumentParser) -> None:
    val.add_argument(
        "--no-media",
        action="store_true",
        help="check the annotations only (a predictions-only set-up: evalkit score needs "
        "no videos)",
    )


def _ids_parser(sub: Any) -> None:
    ids = sub.add_parser(
        "ids", help="every sample id of a local copy, with the row fields it is made of"
    )
    ids.add_argument("name", help="benchmark name or alias, optionally NAME:VARIANT")
    ids.add_argument(
        "--data-root",
        "--root",
        dest="root",
        help="the folder holding the release (or the folder above it, as evalkit run "
        "takes; default: its annotations from the Hub, fetched on first use)",
    )
    _no_fetch_flag(ids)
    ids.add_argument("--json", action="store_true", help="one JSON document instead of lines")


def _count(spec: BenchmarkSpec, root: str) -> str:
    from evalkit.bench.loader import validate

    for cand in (Path(root) / spec.name, Path(root) / spec.key):
        if cand.is_dir():
            return str(validate(spec, cand, keep=0, hold=False).valid)  # a count only
    return "-"


# the columns shown by default; --wide shows every one of _columns
_NARROW = ("name", "task types", "frames", "aggregation", "variants")
_WHOLE = ("name", "frames", "samples")  # kept on one line where the width allows
_NARROW_WIDTH = 124  # the default columns fit boxed in this many, samples and frames whole


def _frames(spec: BenchmarkSpec) -> str:
    f = spec.frames
    return f"{f.nframes} frames" if f.nframes else f"{f.fps:g} fps ≤{f.max_frames}"


def _columns(spec: BenchmarkSpec) -> dict[str, str]:
    f = spec.frames
    return {
        "name": spec.name,
        "task types": ", ".join(spec.task_types),
        "frames": _frames(spec),
        "max_pixels": str(f.max_pixels),
        "total_pixels": str(f.total_pixels or "-"),
        "aggregation": spec.aggregation.name,
        "variants": ", ".join(sorted(spec.variants)) or "-",
        "aliases": ", ".join(spec.aliases),
    }


def _list(args: argparse.Namespace) -> int:
    from evalkit.textwidth import as_lines, table, terminal_width

    reg = registry()
    if not len(reg):
        # an empty table would read as "evalkit ships no benchmarks"; it is a broken install
        raise ConfigError(
            f"no benchmark specs (*.yaml) in {reg.folder}; reinstall evalkit, or point "
            "EVALKIT_BENCHMARKS at a folder of specs"
        )
    if args.data_root:
        existing_dir(args.data_root, "--data-root")
    rows = [_columns(spec) for spec in reg.specs()]
    headers = list(rows[0]) if args.wide else list(_NARROW)
    if args.data_root:
        for spec, row in zip(reg.specs(), rows, strict=True):
            row["samples"] = _count(spec, args.data_root)
        headers.insert(1, "samples")
    # the default columns: a table, not a spread (_NARROW_WIDTH); --wide takes what it needs
    width = terminal_width() if args.wide else min(terminal_width(), _NARROW_WIDTH)
    cells = [[row[h] for h in headers] for row in rows]
    title = f"benchmarks ({len(rows)})"
    out = as_lines(table(headers, cells, width, title=title, whole=_WHOLE), width)
    if args.data_root:
        out.append(f"samples: valid samples in {args.data_root}/<name>; - = no such folder")
    out.append("`evalkit bench show NAME` for one spec; --wide for pixels and aliases")
    _print_lines(out)
    return 0


def _show(args: argparse.Namespace) -> int:
    spec = registry().get(args.name)
    if args.json:
        print(json.dumps(spec.model_dump(mode="json"), indent=2))
        return 0
    from evalkit.textwidth import terminal_width, wrap

    width = terminal_width()
    _print_lines([x for label, v in _described(spec) for x in wrap(v, width, f"{label:<13} ")])
    return 0


def _described(spec: BenchmarkSpec) -> list[tuple[str, str]]:
    """(label, text) pairs: a spec as a person reads it, one setting per line."""
    d, g = spec.data, spec.generation
    title = spec.label
    source = d.hf_dataset or d.local_path or "-"
    pinned = f" @ {d.revision}" if d.revision else " (revision not pinned)"
    out = [
        ("benchmark", f"{title} - {spec.description}" if spec.description else title),
        ("aliases", ", ".join(_alias_text(a) for a in spec.aliases) or "-"),
        ("citation", spec.citation),
        (
            "data",
            source + (pinned if d.hf_dataset else "") + (f"; {d.homepage}" if d.homepage else ""),
        ),
        ("files", ", ".join(fs.path for fs in spec.files)),
        ("layout", spec.layout.rstrip()),
        ("task types", ", ".join(spec.task_types)),
        ("frames", _frame_text(spec)),
        ("prompt", _prompt_text(spec)),
    ]
    out += [
        ("" if i else "headline rule", f"{kind}: {rule.name} - {rule.source}")
        for i, (kind, rule) in enumerate(headline_rules(spec).items())
    ]
    agg = spec.aggregation
    params = ", ".join(f"{k}={v}" for k, v in agg.params.items())
    breakdowns = f"; by {', '.join(agg.breakdowns)}" if agg.breakdowns else ""
    out.append(("aggregation", f"{agg.name}{f' ({params})' if params else ''}{breakdowns}"))
    out.append(("", f"source: {agg.source}"))
    decoding = "greedy" if g.greedy else f"temperature {g.temperature}, top_p {g.top_p}"
    out.append(
        ("generation", f"{decoding}; max_tokens {g.max_tokens} (thinking {g.max_tokens_thinking})")
    )
    if spec.judge:
        out.append(("judge", f"{spec.judge.model} ({spec.judge.source})"))
    out.append(("variants", ", ".join(sorted(spec.variants)) or "-"))
    refs = [
        f"{r.model} {r.value:g} ({r.metric}{f', {r.variant}' if r.variant else ''}) - {r.source}"
        for r in spec.references
    ]
    out.append(("references", "\n".join(refs) or "-"))
    out.append(("", "`evalkit bench show NAME --json` prints the whole spec"))
    return out


def _alias_text(alias: str) -> str:
    name, _, variant = alias.partition(":")
    return f"{name} (= :{variant})" if variant else name


def _frame_text(spec: BenchmarkSpec) -> str:
    f = spec.frames
    count = (
        f"{f.nframes} frames"
        if f.nframes
        else f"{f.fps:g} fps, {f.min_frames}-{f.max_frames} frames"
    )
    budget = f", total {f.total_pixels} px per video" if f.total_pixels else ""
    return (
        f"{count}; {f.min_pixels}-{f.max_pixels} px per frame{budget}; factor {f.factor}, "
        f"resize {f.resize}"
    )


def _prompt_text(spec: BenchmarkSpec) -> str:
    p = spec.prompt
    text = f"template {p.template}, variant {p.variant}"
    sources = sorted({o.source for o in p.official.values()})
    if sources:
        text += "\nofficial prompt from: " + "; ".join(sources)
    return text


def headline_rules(spec: BenchmarkSpec) -> dict[str, Any]:
    """Task type -> the registered rule whose verdicts make the headline number."""
    from evalkit import tasks
    from evalkit.scoring.rules import get_rule

    kinds = [tasks.canonical(t) for t in spec.task_types]
    return {k: get_rule(spec.headline_rule(k), k) for k in kinds}


def _validate(args: argparse.Namespace) -> int:
    if args.data:
        if args.name or args.root:
            raise ConfigError("give NAME --root DIR or --data FILE, not both")
        data_file(args.data, as_bench="NAME: `evalkit bench validate {} --root DIR`")
        return _validate_data(args)
    if not args.name:
        raise ConfigError("give NAME [--root DIR], or --data FILE")
    from evalkit.bench.loader import validate

    spec = registry().get(args.name)
    args.root = str(
        bench_root(spec, args.root, "--root", media=not args.no_media, fetch=not args.no_fetch)
    )
    keep = args.max_problems  # every problem counted; only those shown are kept
    report = (
        _no_media(spec, args)
        if args.no_media
        else validate(spec, args.root, decode=args.decode, keep=keep, hold=False)
    )
    counts = {
        "rows": report.rows,
        "valid": report.valid,
        "invalid": report.problems.counts["error"],
        "warnings": report.problems.counts["warning"],
        "skipped": report.skipped,
    }
    if args.json:
        reasons = {
            "reasons": [p.to_dict() for p in report.problems],
            "reasons_left_out": report.problems.left_out,
        }
        print(json.dumps({"benchmark": spec.label, **counts, **reasons}, indent=2))
        if report.ok:
            _mark_validated(Path(args.root), "annotations" if args.no_media else "media")
        return 0 if report.ok else 1
    print(f"{spec.label}: {report.valid} samples loaded from {args.root}")
    print(_counts_line(counts))
    _print_problems(report.problems, args.max_problems)
    if report.ok:
        _mark_validated(Path(args.root), "annotations" if args.no_media else "media")
        print("no problems found" if not report.problems else "no invalid rows")
        return 0
    print(f"expected layout:\n{spec.layout}")
    return 1


def _mark_validated(root: Path, what: str) -> None:
    """A release fetched from the Hub records that it validated (``evalkit bench pin``)."""
    from evalkit.hub.home import ReleaseState

    state = ReleaseState.read(root)
    if state is not None and state.validated != "media":
        state.validated = what
        state.write(root)


def _pin(args: argparse.Namespace) -> int:
    from evalkit.hub.pin import pin

    spec = registry().get(args.name)
    commit, path = pin(spec)
    print(f"{spec.name}: data.revision pinned to {commit} in {path}")
    return 0


def _no_media(spec: BenchmarkSpec, args: argparse.Namespace) -> Any:
    """The annotations' report without looking for a single video (``--no-media``)."""
    from evalkit.bench.loader import validate_annotations

    if args.decode:
        raise ConfigError("--no-media checks no video: it cannot --decode them")
    return validate_annotations(spec, args.root, keep=args.max_problems, hold=False)


def _counts_line(c: dict[str, int]) -> str:
    return (
        f"{c['rows']} rows: {c['valid']} valid, {c['invalid']} invalid, "
        f"{c['warnings']} loaded with a warning, {c['skipped']} skipped by the adapter"
    )


def _print_problems(problems: Problems, limit: int) -> None:
    """The first ``limit`` problems and the count of the rest (counted, maybe not kept)."""
    if not problems.total:
        return
    print(f"{problems.total} problem(s):")
    for p in problems[:limit]:
        print(f"  {p}")
    if problems.total > limit:
        print(f"  ... and {problems.total - limit} more")


def _validate_data(args: argparse.Namespace) -> int:
    from evalkit.bench.unified_known import load_data

    # rows counted and media checked as they are read; only --max-problems of each kept
    data = load_data(args.data, args.video_root, keep=args.max_problems, samples=False)
    summary = data.loaded.summary()
    benches = [{"name": b.name, **b.info(Path(args.data))} for b in data.benches]
    missing = [b.media for b in data.benches if b.media is not None and b.media.missing]
    if args.json:
        media = {"missing_media": [_missing_json(m) for m in missing]}
        print(json.dumps({"file": args.data, **summary, "benchmarks": benches, **media}, indent=2))
    else:
        print(f"{args.data}: {_counts_line(summary)}")
        for b in benches:
            print(f"  {b['name']}: {b['valid']} samples; {b['note']}")
        _print_problems(data.loaded.problems, args.max_problems)
        if missing:
            from evalkit.bench.media import describe_missing

            print(f"missing media, as `evalkit run` would refuse them: {describe_missing(missing)}")
    return 1 if summary["invalid"] or missing else 0


def _missing_json(m: Any) -> dict[str, Any]:
    return {
        "benchmark": m.benchmark,
        "samples": m.missing,
        "of": m.total,
        "searched": os.path.abspath(m.searched),
        "paths": [os.path.abspath(p) for p in m.paths],
        "paths_left_out": m.files - len(m.paths),
    }


def bench_root(
    spec: BenchmarkSpec,
    root: str | None,
    flag: str = "--data-root",
    *,
    media: bool = True,
    fetch: bool = True,
) -> Path:
    """The release folder ``root`` names (the benchmark's folder itself, or the folder
    above it: ``<root>/<name>``), else its release from the Hub, found as ``evalkit run``
    finds it (``media=False``: the annotations are all it needs)."""
    from evalkit.run.config import RunConfig
    from evalkit.run.plan import bench_root

    if root is not None:
        existing_dir(root, flag)
    cfg = RunConfig(model="-", bench=[spec.name], data_root=root, fetch=fetch)
    return bench_root(cfg, spec, media=media)


def _ids(args: argparse.Namespace) -> int:
    from evalkit.bench.loader import id_rule, load

    spec = registry().get(args.name)
    loaded = load(
        spec, bench_root(spec, args.root, media=False, fetch=not args.no_fetch), check_media=False
    )
    if args.json:
        rows = [{"id": s.id, "fields": loaded.sources.get(s.id, {})} for s in loaded]
        doc = {"benchmark": spec.label, "rule": id_rule(spec), "samples": rows}
        print(json.dumps(doc, indent=2, default=str))
        return 0
    lines = [f"{spec.label}: {len(loaded)} sample ids; id = {id_rule(spec)}"]
    for s in loaded:
        fields = "  ".join(f"{k}={v!r}" for k, v in loaded.sources.get(s.id, {}).items())
        lines.append(f"{s.id}\t{fields}")
    if loaded.invalid:
        lines.append(f"({len(loaded.invalid)} invalid row(s) left out: bench validate lists them)")
    _print_lines(lines)
    return 0


def _print_lines(lines: list[str]) -> None:
    """Print ``lines`` (a reader that stops early, ``| head``: see ``cli.main._command``)."""
    print("\n".join(lines))


def _fetch(args: argparse.Namespace) -> int:
    if args.list:
        if args.names:
            raise ConfigError("--list shows every benchmark: give no NAME with it")
        from evalkit.hub.catalog import catalog_lines

        _print_lines(catalog_lines(registry().specs()))
        return 0
    if not args.names:
        raise ConfigError("give NAME[,NAME...] to fetch (or --list)")
    from evalkit.hub import Need, forget_commit, release_root

    specs = [registry().get(name.strip()) for name in args.names.split(",") if name.strip()]
    for spec in specs:
        if args.refresh:
            forget_commit(spec)
        need = Need(media=not args.annotations_only, limit=args.limit)
        folder = release_root(spec, need)
        print(f"{spec.name}: {spec.data.hf_dataset}@{folder.name[:12]} in {folder}")
    return 0


def run(args: argparse.Namespace) -> int:
    """Dispatch to the chosen action."""
    actions = {
        "list": _list,
        "show": _show,
        "validate": _validate,
        "ids": _ids,
        "fetch": _fetch,
        "pin": _pin,
    }
    return actions[args.action](args)
