"""Load a benchmark from a local copy of its OFFICIAL release, or list everything wrong with it.

``load`` returns the samples of every good row plus the problems of the bad ones (file,
row, field, reason; a bad row never refuses the file), and stops only when nothing can
be read; ``validate`` also lists missing or undecodable videos. Ids are unique: a
question the release asks twice gets ``#2`` (IdSpec.duplicates), reported as a warning.
"""

from __future__ import annotations

import hashlib
import os
import string
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from evalkit.bench import answers
from evalkit.bench.files import Loaded, Problems, Row, RowError, iter_rows, unique_id
from evalkit.bench.layout import MediaPath
from evalkit.bench.media_index import MediaIndex
from evalkit.bench.spec import BenchmarkSpec
from evalkit.errors import DataError, Problem
from evalkit.registry import resolve_ref
from evalkit.sample import OPTION_LETTERS, ImageRef, Sample, VideoRef


@dataclass
class ValidationReport:
    """What ``validate`` found: the samples that loaded and every problem."""

    benchmark: str
    root: str
    samples: list[Sample] = field(default_factory=list)
    problems: Problems = field(default_factory=Problems)
    """Every problem counted; the first ``keep`` given to ``validate`` kept."""
    rows: int = 0
    skipped: int = 0
    valid: int = 0
    """Samples that loaded (held in ``samples`` or not: ``validate(hold=False)``)."""

    @property
    def ok(self) -> bool:
        """True when nothing is wrong (warnings, e.g. repaired ids, do not count)."""
        return not self.problems.counts["error"]


def load(
    spec: BenchmarkSpec,
    root: str | Path,
    *,
    check_media: bool = True,
    wanted: bool = False,
    media_root: Path | None = None,
) -> Loaded:
    """Samples of ``spec`` from the official layout under ``root``, with every problem.

    A bad row fails that row only: it is left out and named in ``.problems`` (file, row,
    field, reason). DataError only when nothing can be read at all: the root or an
    annotation file is missing or unreadable, or not one row loads. ``wanted`` (with
    ``check_media=False``): a missing file the layout allows to be missing (``missing_ok``)
    is named all the same (what a fetch must look for in the release). ``media_root``: where
    the media paths are resolved, when not beside the annotations (a release of
    annotations only whose videos were fetched elsewhere: ``--video-root``).
    """
    out = _collect(spec, Path(root), check_media=check_media, wanted=wanted, media_root=media_root)
    fatal = [p for p in out.invalid if p.row is None]
    if fatal or (not out and out.invalid):
        what = "files are missing or unreadable" if fatal else "not one row loaded"
        shown = "\n".join(f"  {p}" for p in (fatal or out.invalid)[:5])
        raise DataError(
            f"{spec.name}: {what} under {root}:\n{shown}\nexpected layout under {root}:\n"
            f"{spec.layout}"
        )
    return out


def validate(
    spec: BenchmarkSpec,
    root: str | Path,
    *,
    decode: bool = False,
    keep: int | None = None,
    hold: bool = True,
) -> ValidationReport:
    """Every problem of the local copy under ``root`` (``decode`` also opens each video),
    each counted, the first ``keep`` kept (None: all). ``hold=False`` (``bench
    validate``): each sample is counted, its videos opened as it is read, then dropped."""
    seen: set[str] = set()
    undecodable = Problems(keep=keep)  # after the rows' problems, as they always came

    def opened(s: Sample) -> None:
        for m in s.media if decode else ():
            if m.path in seen or not Path(m.path).exists():
                continue
            seen.add(m.path)
            reason = _undecodable(m.path, m.kind)
            if reason:
                undecodable.append(Problem(m.path, None, None, f"cannot decode: {reason}"))

    loaded = _collect(
        spec, Path(root), check_media=True, keep=keep, on_sample=None if hold else opened
    )
    for s in loaded:
        opened(s)
    return _report(spec, root, loaded, undecodable)


def _report(
    spec: BenchmarkSpec, root: str | Path, loaded: Loaded, more: Problems | None = None
) -> ValidationReport:
    if more is not None:
        loaded.problems += more
    return ValidationReport(
        spec.name,
        str(root),
        list(loaded),
        loaded.problems,
        loaded.rows,
        loaded.skipped,
        len(loaded) + loaded.streamed,
    )


def validate_annotations(
    spec: BenchmarkSpec, root: str | Path, *, keep: int | None = None, hold: bool = True
) -> ValidationReport:
    """Every problem of the annotations under ``root``, no video looked for (a
    predictions-only set-up: ``evalkit score`` reads annotations only); ``keep`` and
    ``hold`` as in ``validate``."""
    drop = None if hold else _drop
    loaded = _collect(spec, Path(root), check_media=False, keep=keep, on_sample=drop)
    return _report(spec, root, loaded)


def _drop(sample: Sample) -> None:
    """Counted, not kept."""


def _collect(
    spec: BenchmarkSpec,
    root: Path,
    *,
    check_media: bool,
    keep: int | None = None,
    on_sample: Callable[[Sample], None] | None = None,
    wanted: bool = False,
    media_root: Path | None = None,
) -> Loaded:
    """Every row's fate; ``on_sample``, when given, gets each sample in place of the list
    (counted in ``streamed``, no ids set aside or sources kept)."""
    out = Loaded(keep=keep)
    if not root.is_dir():
        out.problems.append(Problem(str(root), None, None, "data root is not a folder"))
        return out
    adapter = _adapter(spec)
    seen: dict[str, str] = {}
    for fs in spec.files:
        for item in iter_rows(fs, root):
            if isinstance(item, Problem):
                out.rows += item.row is not None
                out.problems.append(item)
                continue
            out.rows += 1
            try:
                sample = build_sample(
                    spec,
                    item,
                    media_root or root,
                    check_media=check_media,
                    adapter=adapter,
                    wanted=wanted,
                )
            except RowError as exc:
                out.problems.append(Problem(item.file, item.where, exc.field, exc.message))
                # a bounded report (keep) has no use for the ids a run sets aside
                if keep is None and (sid := _row_id(spec, item.data, adapter)) is not None:
                    out.set_aside[sid] = f"{item.file}, {item.where}: {exc.message}"
                continue
            if sample is None:
                out.skipped += 1
                continue
            sid, first = unique_id(seen, sample.id, f"{item.file}, {item.where}")
            if first is not None:
                if spec.mapping.id.duplicates == "error":
                    out.problems.append(
                        Problem(
                            item.file,
                            item.where,
                            None,
                            f"duplicate id {sample.id!r}, first at {first}",
                        )
                    )
                    continue
                out.problems.append(
                    Problem(
                        item.file,
                        item.where,
                        None,
                        f"duplicate id {sample.id!r} (first at {first}): loaded as {sid!r}",
                        "warning",
                    )
                )
                sample = sample.model_copy(update={"id": sid})
            if on_sample is not None:
                on_sample(sample)
                out.streamed += 1
                continue
            out.append(sample)
            keys = [_sources(spec, fields, item.data, adapter) for fields in key_sets(spec)]
            out.sources[sample.id], out.keys[sample.id] = keys[0], [k for k in keys if k]
    return out


def id_rule(spec: BenchmarkSpec) -> str:
    """How the benchmark's sample ids are made, in words (``evalkit bench ids``, errors)."""
    ids = spec.mapping.id
    rule = f"{ids.template!r} of the row"
    if ids.hash_fields:
        fields = ", ".join(ids.hash_fields)
        rule += f" + '/' + 8 hex digits of sha1 of repr({fields}) (joined by \\x1f)"
    if spec.adapter:
        rule += f", the row as adapter {spec.adapter} leaves it"
    rule += "; a question asked twice gets '#2'"
    natural = ", ".join(id_fields(spec))
    also = "".join(f" or {', '.join(fields)}" for fields in ids.also)
    return f"{rule}; predictions may give {natural}{also} (as released) instead of 'id'"


def key_sets(spec: BenchmarkSpec) -> list[dict[str, str]]:
    """The field sets that name a sample: ``id_fields``, then ``IdSpec.also``."""
    return [id_fields(spec), *spec.mapping.id.also]


def id_fields(spec: BenchmarkSpec) -> dict[str, str]:
    """The row fields a sample id is made of: name a user writes -> field of the row."""
    ids = spec.mapping.id
    if ids.natural:
        return dict(ids.natural)
    names = [*_pattern_fields(ids.template), *ids.hash_fields]
    return {name: name for name in dict.fromkeys(names)}


def _sources(
    spec: BenchmarkSpec,
    wanted: dict[str, str],
    raw: dict[str, Any],
    adapter: Callable[..., Any] | None,
) -> dict[str, Any]:
    """The values of the ``wanted`` fields in the released row, else in the adapted row (a
    field the adapter computes, such as OVO-Bench's probe index); absent ones left out."""
    out = {name: _maybe(raw, f) for name, f in wanted.items()}
    if adapter is not None and any(v is None for v in out.values()):
        adapted = adapter(dict(raw))  # it ran on this row a moment ago: it succeeds again
        if isinstance(adapted, dict):
            out = {n: v if v is not None else _maybe(adapted, wanted[n]) for n, v in out.items()}
    return {n: v for n, v in out.items() if v is not None}


def _maybe(row: dict[str, Any], name: str) -> Any:
    try:
        return _get(row, name)
    except RowError:
        return None


def _row_id(
    spec: BenchmarkSpec, raw: dict[str, Any], adapter: Callable[..., Any] | None
) -> str | None:
    """The id an invalid row would have had, where it can be built (None otherwise)."""
    try:
        row = adapter(dict(raw)) if adapter is not None else raw
        return _sample_id(spec, row) if isinstance(row, dict) else None
    except (RowError, KeyError, ValueError, TypeError):
        return None


def _get(row: dict[str, Any], name: str) -> Any:
    """``row[name]``; a dotted name reaches into nested objects (``metadata.subject``)."""
    value: Any = row
    for part in name.split("."):
        if not isinstance(value, dict) or value.get(part) is None:
            raise RowError(name, "missing")
        value = value[part]
    return value


def _fmt(template: str, row: dict[str, Any], what: str) -> str:
    try:
        return string.Formatter().vformat(template, (), row)
    except KeyError as exc:
        raise RowError(str(exc.args[0]), f"missing (needed by {what} {template!r})") from None
    except (ValueError, IndexError) as exc:
        raise RowError(None, f"bad {what} template {template!r}: {exc}") from None


def _sample_id(spec: BenchmarkSpec, row: dict[str, Any]) -> str:
    ids = spec.mapping.id
    sid = _fmt(ids.template, row, "id")
    if ids.hash_fields:
        blob = "\x1f".join(repr(_get(row, f)) for f in ids.hash_fields)
        sid += "/" + hashlib.sha1(blob.encode()).hexdigest()[:8]
    return sid


def _options(spec: BenchmarkSpec, row: dict[str, Any], question: str) -> tuple[str, list[str]]:
    m = spec.mapping
    if m.options_in_question:
        try:
            return answers.split_question_options(question)
        except ValueError as exc:
            raise RowError(m.question, str(exc)) from None
    if m.option_fields:
        opts = [str(_get(row, f)).strip() for f in m.option_fields]
        return question, [o for o in opts if o]
    if m.options:
        try:
            keep = m.option_prefixes == "keep"
            return question, answers.parse_options(_get(row, m.options), keep_prefixes=keep)
        except ValueError as exc:
            raise RowError(m.options, str(exc)) from None
    return question, []


def _target(spec: BenchmarkSpec, row: dict[str, Any], options: list[str], task_type: str) -> Any:
    m = spec.mapping
    if m.target is None:
        return None
    raw = _get(row, m.target)
    kind = m.target_kind
    if task_type != "multiple_choice":
        return raw  # letters/indices only mean something for choice questions
    try:
        if kind == "letter":
            return answers.parse_letter(raw, len(options))
        if kind == "index":
            idx = int(raw)
            if not 0 <= idx < len(options):
                raise ValueError(f"index {idx} outside the {len(options)} options")
            return OPTION_LETTERS[idx]
        if kind == "option_text":
            text = str(raw).strip()
            matches = [i for i, o in enumerate(options) if o == text]
            if not matches and m.unmatched_answer == "wrong":
                return answers.NO_OPTION  # kept, as the official code keeps it: never right
            if not matches:
                raise ValueError(f"answer {text[:60]!r} is none of the options")
            # the first of two equal options (MLVU's official rule takes the last one)
            return OPTION_LETTERS[matches[0]]
    except ValueError as exc:
        raise RowError(m.target, str(exc)) from None
    return raw


def _task_type(spec: BenchmarkSpec, row: dict[str, Any]) -> str:
    m = spec.mapping
    if not m.task_type_field:
        return m.task_type
    value = str(_get(row, m.task_type_field))
    if value not in m.task_type_map:
        raise RowError(m.task_type_field, f"value {value!r} not in task_type_map")
    return m.task_type_map[value]


def _seconds(row: dict[str, Any], name: str | None) -> float | None:
    if not name or row.get(name) in (None, ""):
        return None
    try:
        return float(row[name])
    except (TypeError, ValueError):
        raise RowError(name, f"not a number of seconds: {row[name]!r}") from None


def resolve_media(
    media: MediaPath, row: dict[str, Any], root: Path, what: str
) -> tuple[Path | None, list[Path]]:
    """The existing file a row names (None if none exists) and every candidate tried."""
    for name in _pattern_fields(media.pattern):
        if row.get(name) in (None, ""):
            if media.optional:
                return None, []
            raise RowError(name, f"missing (names the {what} file)")
    rel = _fmt(media.pattern, row, what)
    cands: list[Path] = []
    for folder in [media.root, *media.alt_roots]:
        base = root / folder / rel
        for ext in media.extensions:
            cands.append(base.with_name(base.name + ext) if ext else base)
            if ext and base.suffix and base.suffix != ext:
                cands.append(base.with_suffix(ext))
    for c in cands:
        # A video may be a folder of frames (MVBench's episodic reasoning ships so).
        if c.is_file() or (what == "video" and c.is_dir()):
            return c, cands
    # a fetched release: wherever its archives put the file (evalkit.bench.media_index)
    index = MediaIndex.load(root)
    hit = index.find(Path(os.path.relpath(c, root)).as_posix() for c in cands) if index else None
    if hit is not None:
        indexed = root / hit
        # a file of an archive still being fetched while the run goes counts as found: the
        # run waits for it (evalkit.hub.background)
        there = indexed.is_file() or (index is not None and hit in index.pending)
        return (indexed if there else None), [indexed, *cands]
    return None, cands


def _media(
    spec: BenchmarkSpec,
    row: dict[str, Any],
    root: Path,
    check: bool,
    start: float | None,
    end: float | None,
    wanted: bool = False,
) -> tuple[list[Any], dict[str, Any]]:
    media: list[Any] = []
    extra: dict[str, Any] = {}
    for what, mp in (("video", spec.video), ("image", spec.image), ("subtitles", spec.subtitles)):
        if mp is None:
            continue
        found, cands = resolve_media(mp, row, root, what)
        if found is None and not cands:
            continue
        if found is None:
            if mp.missing_ok and not wanted:
                continue
            if check:
                tried = ", ".join(os.path.relpath(c, root) for c in cands)
                raise RowError(_pattern_field(mp.pattern), f"{what} not found (tried {tried})")
        path = str(found or cands[0])
        if what == "video":
            media.insert(0, VideoRef(path=path, start=start, end=end))
        elif what == "image":
            media.append(ImageRef(path=path))
        else:
            extra["subtitle_path"] = path
    return media, extra


def _pattern_fields(pattern: str) -> list[str]:
    return [f for _, f, _, _ in string.Formatter().parse(pattern) if f]


def _pattern_field(pattern: str) -> str | None:
    names = _pattern_fields(pattern)
    return names[-1] if names else None


def build_sample(
    spec: BenchmarkSpec,
    item: Row,
    root: Path,
    *,
    check_media: bool = True,
    adapter: Callable[..., Any] | None = None,
    wanted: bool = False,
) -> Sample | None:
    """One row as a Sample (RowError names the field at fault); None when an adapter skips it.

    An adapter sees the raw row first and returns the row to map (with computed fields
    added), a finished Sample, or None to skip the row.
    """
    m = spec.mapping
    row = item.data
    if adapter is not None:
        try:
            out = adapter(dict(row))
        except (KeyError, ValueError, TypeError) as exc:
            raise RowError(None, f"adapter {spec.adapter}: {exc!r}") from None
        if out is None or isinstance(out, Sample):
            return out
        row = out
    question = str(_get(row, m.question))
    question, options = _options(spec, row, question)
    task_type = _task_type(spec, row)
    start, end = _seconds(row, m.start), _seconds(row, m.end)
    if start is not None and end is not None and end <= start:
        raise RowError(m.end, f"segment end {end} is not after start {start}")
    fields = {name: _get(row, src) for name, src in m.fields.items()}
    media, extra = _media(spec, row, root, check_media, start, end, wanted)
    data: dict[str, Any] = {
        "id": _sample_id(spec, row),
        "task_type": task_type,
        "question": question,
        "options": options,
        "target": _target(spec, row, options, task_type),
        "media": media,
        "benchmark": spec.name,
        "fields": {**fields, **extra},
    }
    try:
        return Sample.model_validate(data)
    except ValueError as exc:
        raise RowError(None, f"not a valid Sample: {exc}") from None


def _adapter(spec: BenchmarkSpec) -> Callable[..., Any] | None:
    return load_hook(spec, spec.adapter) if spec.adapter else None


def load_hook(spec: BenchmarkSpec, ref: str) -> Callable[..., Any]:
    """Resolve ``"module:function"``: ``module.py`` beside the spec's YAML, else an import."""
    if ":" not in ref:
        raise DataError(f"{spec.name}: adapter {ref!r} must be 'module:function'")
    folder = Path(spec.source_path).parent if spec.source_path else None
    fn: Callable[..., Any] = resolve_ref(ref, folder=folder, where=spec.name, error=DataError)
    return fn


def _undecodable(path: str, kind: str) -> str | None:
    """None when the file opens and its first frame decodes, else the reason."""
    try:
        if kind == "image":
            import numpy as np
            from PIL import Image

            with Image.open(path) as im:
                np.asarray(im.convert("RGB"))
            return None
        import av

        with av.open(path) as container:
            stream = container.streams.video[0]
            for _ in container.decode(stream):
                return None
        return "no video frames"
    except Exception as exc:  # any decoder failure is a finding, not a crash
        return f"{type(exc).__name__}: {exc}"
