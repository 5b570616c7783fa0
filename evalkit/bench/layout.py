"""Where a benchmark's official release lives and how one of its rows becomes a ``Sample``.

The data half of a pinned spec (``evalkit.bench.spec.BenchmarkSpec`` holds the other half:
frames, prompt, scoring, aggregation): the source and revision, the annotation files, the
media paths, the stable id, and the field mapping. Unknown keys are errors everywhere.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, model_validator

_STRICT = ConfigDict(extra="forbid", use_attribute_docstrings=True, frozen=True)


class DataSource(BaseModel):
    """Where the official release lives. A release on the Hugging Face Hub is fetched on
    first use (``evalkit bench fetch``, ``evalkit.hub``): the annotation files the spec
    reads, then the media of the samples being run, loose or in ``archives``; a folder
    given as ``--data-root`` (or ``local_path``) that holds the release is read as it is."""

    model_config = _STRICT
    hf_dataset: str | None = None
    """Hugging Face dataset id of the official release (``lmms-lab/Video-MME``)."""
    revision: str | None = None
    """Pinned revision (commit hash or tag) of ``hf_dataset`` the spec was checked against
    (None: the commit current at the first fetch, recorded and used from then on)."""
    local_path: str | None = None
    """A default local folder holding the release (overridden by ``--root``)."""
    homepage: str | None = None
    """The benchmark's own page or repository, for the layout and licence."""
    archives: list[str] = Field(default_factory=list)
    """Globs over the release's files naming the archives that hold its media (zip, tar,
    or a tar split in parts, ``videos.tar.part.*``); each is extracted once into a folder
    of its own. Media not in an archive are fetched as loose files at the paths the spec
    reads."""
    media_elsewhere: str | None = None
    """Where the media come from when the release on the Hub holds only the annotations
    (YouTube ids, another site): said, with ``--video-root``, when they are missing."""
    size: str | None = None
    """The release's size as a public source documents it (``evalkit bench fetch --list``)."""
    gated: bool = False
    """The Hub asks each user to accept the release's terms before fetching its files."""
    by_hand: str | None = None
    """Why the release cannot be fetched as the spec reads it (its annotations live
    elsewhere, or inside an archive the spec does not name): fetching it refuses with this."""

    @model_validator(mode="after")
    def _one_source(self) -> DataSource:
        if not (self.hf_dataset or self.local_path):
            raise ValueError("data needs hf_dataset (with revision) or local_path")
        return self


class FileSpec(BaseModel):
    """One annotation file (or a glob of them) of the official layout."""

    model_config = _STRICT
    path: str
    """Path relative to the data root; may be a glob (``json/*.json``)."""
    format: Literal["json", "jsonl", "parquet", "csv"] | None = None
    """File format; inferred from the extension when omitted."""
    records: str | None = None
    """For a JSON object file: the key holding the list of rows (dotted for nesting)."""
    explode: str | None = None
    """A field holding a list of questions per row (LVBench ``qa``): each element becomes
    a row, with the parent's fields underneath it."""
    keyed: str | None = None
    """For a JSON object file whose values are the rows (``{"<id>": {...}, ...}``): the
    field each row's key is stored under (VideoReasonBench's questions/<demo>.json)."""
    explode_optional: bool = False
    """Rows without the ``explode`` field pass through as single rows (OVO-Bench mixes
    single questions and forward-active rows with a ``test_info`` list in one file)."""
    constants: dict[str, Any] = Field(default_factory=dict)
    """Fields added to every row of this file (e.g. MVBench's task name and video folder)."""
    nested: list[str] = Field(default_factory=list)
    """For a JSON object nested one level per name whose innermost values are lists of rows
    (TempCompass's own ``questions/*.json``: ``{video_id: {dim: [{question, answer}]}}``):
    the field each level's key is stored under."""
    or_else: FileSpec | None = None
    """The same rows as another release lays them out, read when ``path`` matches nothing
    (TempCompass: lmms-lab's parquet, else the authors' ``questions/*.json``)."""


class MediaPath(BaseModel):
    """How a row names its video/image/subtitle file: ``root / pattern.format(**row) + ext``."""

    model_config = _STRICT
    root: str = ""
    """Folder under the data root."""
    alt_roots: list[str] = Field(default_factory=list)
    """Other folders tried after ``root`` (MotionBench splits videos over two)."""
    pattern: str
    """Python format string over the row's fields (``"{videoID}"``, ``"{video_dir}/{video}"``)."""
    extensions: list[str] = Field(default_factory=lambda: [""])
    """Extensions tried in order when the pattern has none that exists ("" = as written)."""
    optional: bool = False
    """A row without the fields of ``pattern`` (or with them empty) simply has no such file."""
    missing_ok: bool = False
    """A named file that does not exist is skipped, not an error (Video-MME has no
    subtitles for some videos)."""


class IdSpec(BaseModel):
    """A stable sample id built from the benchmark's own id fields, never list position."""

    model_config = _STRICT
    template: str
    """Python format string over the row's fields (``"{question_id}"``)."""
    hash_fields: list[str] = Field(default_factory=list)
    """Fields whose content hash (8 hex digits) is appended, for releases without an id
    that is unique per question (MVBench has none)."""
    natural: dict[str, str] = Field(default_factory=dict)
    """The row fields a user writes instead of the id (predictions keyed by them, ``evalkit
    bench ids``): name shown -> field of the released row (of the adapted row where the
    release has none). Default: the template's fields and the hash fields, by their names."""
    also: list[dict[str, str]] = Field(default_factory=list)
    """Other field sets that name a sample as well, as other tools write them (name ->
    field of the row, like ``natural``): VLMEvalKit's Video-MME sheet has no question_id
    but ``video`` (the videoID) and ``question``."""
    duplicates: Literal["suffix", "error"] = "suffix"
    """A row whose id was already built (a benchmark asking the same question twice about
    one video): ``suffix`` loads it as ``<id>#2`` (``#3``, ... in file order: deterministic
    for a given release) and reports a warning; ``error`` rejects the repeat as invalid."""


class FieldMap(BaseModel):
    """How a row of the official files maps onto ``Sample``."""

    model_config = _STRICT
    id: IdSpec
    """How the stable sample id is built."""
    question: str
    """Field holding the question text."""
    options: str | None = None
    """Field holding the option list; "A. " / "(A) " / "A: " prefixes are stripped and
    options are put in letter order."""
    option_fields: list[str] = Field(default_factory=list)
    """Alternatively, one field per option, in order (``a0``, ``a1``, ...)."""
    option_prefixes: Literal["strip", "keep"] = "strip"
    """``strip``: letter prefixes are taken off (and lettered lists put in letter order);
    ``keep``: option texts are kept as the release writes them, a letter-like start
    included, where the official code sends the list verbatim (OVO-Bench's stray
    "(E)The toilet brush", Video-MMMU's "A: $3,616.24, B: ..." and prefixed options)."""
    unmatched_answer: Literal["invalid", "wrong"] = "invalid"
    """An ``option_text`` answer that is none of the options: an invalid row, or (``wrong``,
    where the official code keeps such rows) a sample whose target is ``NO_OPTION`` ("@",
    the letter before A that MLVU's qa_template writes), which no reply matches."""
    options_in_question: bool = False
    """Options are lines ``(A) text`` at the end of the question (LVBench); split them off."""
    target: str | None = None
    """Field holding the answer."""
    target_kind: Literal["letter", "option_text", "index", "value"] = "letter"
    """How ``target`` is written: a letter, the text of the right option, a 0-based index,
    or a plain value (number, text, span) kept as is."""
    task_type: str = "multiple_choice"
    """Canonical task type of every sample, unless ``task_type_field`` says otherwise."""
    task_type_field: str | None = None
    """Field whose value picks the task type through ``task_type_map``."""
    task_type_map: dict[str, str] = Field(default_factory=dict)
    """Values of ``task_type_field`` -> canonical task type."""
    start: str | None = None
    """Field with the segment start in seconds (the video is cut to [start, end])."""
    end: str | None = None
    """Field with the segment end in seconds."""
    fields: dict[str, str] = Field(default_factory=dict)
    """``Sample.fields`` name -> row field, for breakdowns and prompts."""
