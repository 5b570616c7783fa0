"""Model families: how a checkpoint's model is fed video, read from its config.json (no torch).

A family is a plug-in like a benchmark: one :class:`FamilySpec` in the :data:`FAMILIES`
registry (evalkit's own in :mod:`evalkit.engines.families`; other packages add theirs
through the entry-point group ``evalkit.families``). It says

- how a video reaches the model (``feed``): as a video through vLLM's processor for the
  family, or as its frames, one image each, after a per-frame marker;
- which pixels the frame cache stores (``grid``): ``factor`` = resized to the family's
  patch grid under the pixel budgets (Qwen's smart resize: what the vision tower sees);
  ``fixed`` = resized to the one size the family's processor squashes every frame to
  (read from the checkpoint's processor config: what the vision tower sees); ``processor``
  = kept at the clip's own size (``FrameSpec.keep_size``: no grid, no floor, no token cap)
  and left to the processor, whose own resize is kept on, so that it resizes the source
  pixels once, as its reference path does; only a frame above the family's ``max_pixels``
  is scaled down first (the one place its pixels can differ from the reference's);
- the prompt around the media (the checkpoint's chat template; per-frame markers or
  timestamps where the family's processor writes them);
- its reference frame settings (:class:`FrameReference`) with their source.

Which wins, a benchmark's pinned frames or the family's reference: the benchmark specs
are written in qwen-vl-utils' terms (a rate, a frame cap, pixel budgets on the 28-pixel
grid). A family in those terms (``qwen_terms``: the Qwen families) runs them as pinned. Any
other family takes from a spec only what is the benchmark's own protocol, a fixed frame
count (``nframes``) and the time window, and its reference for the rest (the frame count
or rate, the sampling rule, the pixels); ``--frames-*`` flags win over both; the model's
grid (factor, fixed size) always comes from the checkpoint. The run records which source
gave each benchmark's frames (``RunManifest.family``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, Literal

from evalkit.errors import EvalkitError
from evalkit.registry import Registry, RegistryError, normalize_name
from evalkit.video.types import FrameSpec, Resize, Sampling

if TYPE_CHECKING:
    import numpy as np

    from evalkit.engines.base import Request

VISION_START = "<|vision_start|>"
VISION_END = "<|vision_end|>"

Feed = Literal["video", "images"]
Grid = Literal["factor", "fixed", "processor"]

# vLLM/transformers take these so that frames sampled (and, on a model grid, resized) by
# evalkit's frame cache are used as they are.
NO_RESAMPLE = {"do_sample_frames": False, "do_resize": False}
NO_SAMPLING = {"do_sample_frames": False}

_FRAME_FIELDS = frozenset({"fps", "nframes", "max_frames", "min_frames"})
_PIXEL_FIELDS = frozenset({"min_pixels", "max_pixels", "total_pixels"})


@dataclass(frozen=True)
class FrameReference:
    """The frame settings a family's authors evaluate video with, and where that is written."""

    source: str
    """The model card or the authors' evaluation code (file, function) that says so."""
    nframes: int | None = None
    """A fixed frame count (uniform over the clip, by ``sampling``)."""
    fps: float | None = None
    """A sampling rate (with ``max_frames``), where the count is not fixed."""
    max_frames: int | None = None
    """The frame cap at that rate."""
    min_frames: int | None = None
    """The frame floor at that rate (None: the benchmark's)."""
    sampling: Sampling = "qwen"
    """Which frames a count picks (see ``FrameSpec.sampling``)."""
    resize: Resize = "transformers"
    """How its reference path resamples frames (``FrameSpec.resize``): transformers' video
    processor, or qwen-vl-utils' torchvision call for the Qwen families."""
    size: int | None = None
    """The square side every frame is resized to (a ``fixed`` grid family)."""
    min_pixels: int | None = None
    """Per-frame pixel floor (a ``factor`` or ``processor`` grid family)."""
    max_pixels: int | None = None
    """Per-frame pixel cap."""
    total_pixels: int | None = None
    """Pixels shared by the frames of one video."""

    def describe(self) -> str:
        """One line: ``32 frames (linspace), 384x384``."""
        if self.nframes is not None:
            frames = f"{self.nframes} frames ({self.sampling})"
        else:
            rule = f" ({self.sampling})" if self.sampling != "qwen" else ""
            floor = f"{self.min_frames}-" if self.min_frames is not None else "<= "
            frames = f"{self.fps:g} fps{rule}, {floor}{self.max_frames} frames"
        if self.size is not None:
            return f"{frames}, {self.size}x{self.size}"
        pixels = [f"{k} {v}" for k, v in self._pixels().items()]
        return ", ".join([frames, *pixels])

    def _pixels(self) -> dict[str, int]:
        pairs = {"min_pixels": self.min_pixels, "max_pixels": self.max_pixels}
        pairs["total_pixels"] = self.total_pixels
        return {k: v for k, v in pairs.items() if v is not None}


@dataclass(frozen=True)
class FamilySpec:
    """A model family: how its checkpoints are fed video (one registry entry)."""

    name: str
    title: str
    model_types: tuple[str, ...]
    """``model_type`` values of config.json that belong to it (aliases of ``name``)."""
    architectures: tuple[str, ...]
    """vLLM 0.32 architectures that serve it."""
    reference: FrameReference
    prompt: str
    """The prompt structure around the media, in words (what ``evalkit models`` shows)."""
    grid: Grid = "factor"
    feed: Feed = "video"
    patch_size: int = 14
    """Vision patch side (the checkpoint's vision_config overrides it)."""
    merge_size: int = 2
    """Patches merged per visual token along each side."""
    temporal_patch: int = 2
    """Frames per temporal patch: the frame count is rounded to a multiple of it."""
    qwen_terms: bool = False
    """The benchmark specs' frame settings are in this family's terms and run as pinned."""
    loader_patch: int | None = None
    """The patch its authors' frame loader sizes frames for, where the processor then
    resizes them again onto the tower's own grid (Qwen3-Omni: qwen-omni-utils at its default
    ``image_patch_size`` 14 under a 16-pixel tower): the cache holds the loader's frames, on
    its grid (patch x merge), and the processor's resize is left on (a ``processor`` grid)."""
    frame_marker: str = "Frame{i}: "
    """Text before each frame of the ``images`` feed (``{i}`` counts from 1)."""
    video_metadata: dict[str, Any] = field(default_factory=dict)
    """Keys vLLM's processor for the family reads from a video's metadata beyond the
    source clip's (GLM-4.1V reads ``do_sample_frames`` there, not in the kwargs)."""
    weight_renames: tuple[tuple[str, str], ...] = ()
    """(prefix transformers 5 writes, prefix vLLM 0.32 expects) for weight names."""
    one_frame_count_per_step: bool = False
    """vLLM encodes only videos of one frame count together for this family: evalkit's
    vLLM engines never have videos of two frame counts in flight at once."""
    trust_remote_code: bool = False
    """Its checkpoints ship their own code: runs only with ``--trust-remote-code``."""
    trainable: bool = False
    """evalkit's trainer supports it."""
    tiny: bool = False
    """``evalkit model tiny --family NAME`` builds a checkpoint of it."""
    audio: str | None = None
    """What happens to a video's audio track (Omni families: left out, and said here)."""
    tested: str = "not tested here"
    """What evalkit's own tests run of it."""
    image_pad: str = "<|image_pad|>"
    video_pad: str = "<|video_pad|>"
    vllm_refusal: str = ""
    """Why vLLM 0.32 cannot serve this family's checkpoints as transformers 5 saves them
    (empty: it serves them): evalkit's vLLM engines refuse them in one line saying so."""
    hf_model: str | None = None
    """The transformers class evalkit's HF engine loads its checkpoints with, where
    ``AutoModelForImageTextToText`` does not take them (an Omni checkpoint: its thinker)."""
    version_references: tuple[tuple[str, FrameReference], ...] = ()
    """(config.json ``version``, reference) where checkpoints of one model type are
    evaluated differently by version (MiniCPM-V 2.6/4.0 and 4.5 are all ``minicpmv``);
    ``reference`` is the one of any other version."""
    vllm_kwargs: dict[str, Any] | None = None
    """``mm_processor_kwargs`` for vLLM where not :attr:`processor_kwargs` (MiniCPM-V 4.6:
    vLLM 0.32 hands them to the image processor it runs on each frame, which refuses
    ``do_sample_frames``; its video path never samples frames)."""

    def processor_frames(self, frames: np.ndarray) -> np.ndarray:
        """A video's cached frames as the family's processor is handed them: as float where
        it resizes its authors' loader's frames again (their loader hands it float tensors;
        on uint8 frames its resize rounds and clips: measured up to 32 levels apart)."""
        return frames.astype("float32") if self.loader_patch else frames

    @property
    def processor_kwargs(self) -> dict[str, Any]:
        """``mm_processor_kwargs``: sampling off, and the resize off on a model grid."""
        extra = {"use_audio_in_video": False} if self.audio else {}
        return {**(NO_SAMPLING if self.grid == "processor" else NO_RESAMPLE), **extra}

    @property
    def vllm_processor_kwargs(self) -> dict[str, Any]:
        """``mm_processor_kwargs`` of a vLLM request (engine or server) for the family."""
        return dict(self.processor_kwargs if self.vllm_kwargs is None else self.vllm_kwargs)

    @property
    def keeps_size(self) -> bool:
        """The frame cache keeps the clip's own frames (``FrameSpec.keep_size``): a
        ``processor`` grid family whose frames are not in the Qwen terms (Qwen3-Omni's are
        its authors' loader's, on their grid)."""
        return self.grid == "processor" and not self.qwen_terms

    @property
    def tokens_from_frames(self) -> bool:
        """The cache's frames bound the video's tokens from below (one per factor x factor
        pixels per temporal patch, as the request builder counts them before decoding);
        not so where the processor resizes or crops them itself (a ``processor`` grid)."""
        return self.grid != "processor"

    @property
    def pixels(self) -> str:
        """Which pixels the frame cache stores, in words."""
        if self.loader_patch:
            return (
                f"resized to its authors' loader grid ({self.loader_patch * self.merge_size} px) "
                "under the pixel budgets; the processor resizes them onto its own"
            )
        return {
            "factor": "resized to the patch grid (patch x merge) under the pixel budgets",
            "fixed": "resized to the processor's fixed frame size",
            "processor": "the clip's own size (scaled down only above max_pixels); the "
            "processor resizes",
        }[self.grid]

    def bind(self, config: dict[str, Any], folder: Path | None = None) -> ModelFamily:
        """This family as one checkpoint has it (its patch sizes, its processor's size, its
        version's reference)."""
        vision = config.get("vision_config") or {}
        patch = vision.get("patch_size", self.patch_size)
        version = str(config.get("version"))
        spec = next(
            (replace(self, reference=r) for v, r in self.version_references if v == version), self
        )
        size = _fixed_size(folder, spec) if self.grid == "fixed" else None
        return ModelFamily(
            name=str(config.get("model_type", self.name)),
            patch_size=int(patch[0] if isinstance(patch, list) else patch),
            merge_size=int(vision.get("spatial_merge_size", self.merge_size)),
            temporal_patch=int(vision.get("temporal_patch_size", self.temporal_patch)),
            image_pad=self.image_pad,
            video_pad=self.video_pad,
            size=size,
            spec=spec,
        )


FAMILIES: Registry[FamilySpec] = Registry(
    "model family",
    base=FamilySpec,
    normalize=normalize_name,
    group="evalkit.families",
    modules=lambda: ["evalkit.engines.families"],
    add=lambda name, obj: _add_plugin(name, obj),
)
"""Every model family, by name; its model types are aliases (plug-ins: entry points
``evalkit.families``, each a :class:`FamilySpec` or a module that calls
:func:`register_family`)."""


def register_family(spec: FamilySpec) -> FamilySpec:
    """Add ``spec`` under its name, its model types as aliases."""
    aliases = [t for t in spec.model_types if t != spec.name]
    return FAMILIES.register(spec.name, spec, aliases=aliases)


def _add_plugin(name: str, obj: object) -> None:
    if isinstance(obj, ModuleType):  # a module that called register_family on import
        return
    if not isinstance(obj, FamilySpec):
        raise RegistryError(
            f"model family plug-in {name!r} is a {type(obj).__name__}, not a FamilySpec"
        )
    register_family(obj)


@dataclass(frozen=True)
class ModelFamily:
    """A family as one checkpoint has it: what the engines and the run plan need."""

    name: str
    """The checkpoint's ``model_type``."""
    patch_size: int
    merge_size: int = 2
    temporal_patch: int = 2
    image_pad: str = "<|image_pad|>"
    video_pad: str = "<|video_pad|>"
    size: tuple[int, int] | None = None
    """The fixed (H, W) of a ``fixed`` grid family, from the checkpoint's processor."""
    spec: FamilySpec | None = field(default=None, compare=False)
    """Its registry entry (None only for a family made by hand in a test)."""

    @property
    def factor(self) -> int:
        """Frame H and W must be multiples of this when frames arrive pre-resized."""
        return self.patch_size * self.merge_size

    @property
    def family(self) -> FamilySpec:
        """The registry entry (the one of ``name`` when made by hand)."""
        return self.spec if self.spec is not None else FAMILIES.get(self.name)

    def frame_spec(self, pinned: FrameSpec) -> tuple[FrameSpec, dict[str, str]]:
        """The frames a benchmark pinned as ``pinned`` runs under with this model (before
        ``--frames-*`` flags), and which source gave them (see the module's docstring)."""
        fam = self.family
        if fam.qwen_terms:
            return pinned, {"frames": "benchmark", "pixels": "benchmark"}
        ref, values = fam.reference, pinned.model_dump()
        origin = {"frames": "benchmark"}
        if pinned.nframes is None:  # a rate is the model's choice; a fixed count is not
            origin["frames"] = "family"
            values.update(nframes=ref.nframes, fps=ref.fps or pinned.fps)
            values["max_frames"] = ref.max_frames or pinned.max_frames
            floor = ref.min_frames if ref.min_frames is not None else pinned.min_frames
            values["min_frames"] = min(floor, values["max_frames"])
        values.update(ref._pixels(), sampling=ref.sampling, resize=ref.resize)
        origin["pixels"] = "model" if fam.grid == "fixed" else "family"
        return self.on_grid(FrameSpec.model_validate(values)), origin

    def on_grid(self, spec: FrameSpec) -> FrameSpec:
        """``spec`` on this model's grid (factor, fixed size, temporal patch)."""
        fam = self.family
        if fam.qwen_terms:  # as before families: only the factor (fingerprints unchanged)
            loader = fam.loader_patch and fam.loader_patch * self.merge_size
            update: dict[str, Any] = {"factor": loader or self.factor}
        elif fam.grid == "fixed":
            update = {"size": self.size, "temporal_patch": self.temporal_patch}
        elif fam.keeps_size:  # the clip's own size: the processor resizes once
            update = {
                "keep_size": True,
                "factor": self.patch_size,
                "temporal_patch": self.temporal_patch,
            }
        else:
            update = {"factor": self.factor, "temporal_patch": self.temporal_patch}
        if all(getattr(spec, k) == v for k, v in update.items()):
            return spec
        return FrameSpec.model_validate({**spec.model_dump(), **update})

    def refuse_flags(self, flagged: set[str]) -> None:
        """A ``--frames-*`` pixel flag that would do nothing is an error: any of them on a
        fixed-size family, the floor and the per-video budget on a processor-grid one."""
        grid = self.family.grid
        dead = _PIXEL_FIELDS if grid == "fixed" else frozenset()
        if self.family.keeps_size:
            dead = _PIXEL_FIELDS - {"max_pixels"}
        refused = flagged & dead
        if not refused:
            return
        names = ", ".join(f"--frames-{f.replace('_', '-')}" for f in sorted(refused))
        if grid == "fixed":
            h, w = self.size or (0, 0)
            why, keep = f"resizes every frame to {h}x{w}", "frame count flags apply"
        else:
            why = "sizes the frames itself (the cache keeps the clip's own size)"
            keep = "--frames-max-pixels caps the stored frames"
        raise EvalkitError(
            f"{names}: no effect on {self.family.title} ({self.name}), whose processor {why}; "
            f"leave {'it' if len(refused) == 1 else 'them'} out ({keep})"
        )

    def check_frames(self, request: Request) -> None:
        """Frames arrive resized: on the model's grid, or at its fixed size."""
        grid, size = self.family.grid, self.size or (0, 0)
        if grid == "factor":
            check_frame_sizes(request, self.factor)
        for i, video in enumerate(request.videos if grid == "fixed" else ()):
            _t, h, w, _c = video.array.shape
            if (h, w) != size:
                raise EvalkitError(
                    f"request {request.id}: video {i} frames are {h}x{w}, not the {self.name} "
                    f"model's fixed {size[0]}x{size[1]}; build the cache with "
                    f"FrameSpec.size={list(size)}"
                )

    def describe(self) -> dict[str, Any]:
        """What a run records of the family (``RunManifest.family``)."""
        fam = self.family
        out: dict[str, Any] = {
            "family": fam.name,
            "title": fam.title,
            "model_type": self.name,
            "feed": fam.feed,
            "grid": fam.grid,
            "reference": fam.reference.describe(),
            "reference_source": fam.reference.source,
            "precedence": (
                "benchmark spec (qwen-vl-utils terms)"
                if fam.qwen_terms
                else "benchmark's fixed frame count and window; family reference for the "
                "rest; --frames-* flags over both"
            ),
        }
        if self.size is not None:
            out["size"] = list(self.size)
        if fam.audio:
            out["audio"] = fam.audio
        return out


def _fixed_size(folder: Path | None, fam: FamilySpec) -> tuple[int, int]:
    """The (H, W) the checkpoint's video processor resizes every frame to (its reference
    size where the checkpoint's processor config says none)."""
    for name in ("processor_config.json", "video_preprocessor_config.json"):
        path = folder / name if folder is not None else None
        if path is None or not path.is_file():
            continue
        doc = json.loads(path.read_text(encoding="utf-8"))
        size = (doc.get("video_processor") or doc).get("size") or {}
        if "height" in size and "width" in size:
            return int(size["height"]), int(size["width"])
    side = fam.reference.size
    if side is None:
        raise EvalkitError(f"{folder}: no video processor size for {fam.title} frames")
    return side, side


def family_from_config(
    config: dict[str, Any], source: str = "config", folder: Path | None = None
) -> ModelFamily:
    """The family of a checkpoint given its parsed config.json."""
    model_type = config.get("model_type")
    if not isinstance(model_type, str) or model_type not in FAMILIES:
        known = ", ".join(n for n in FAMILIES.names())
        raise EvalkitError(
            f"{source}: model_type {model_type!r} is not a supported video model family "
            f"(supported: {known}; `evalkit models` lists them)"
        )
    fam = FAMILIES.get(model_type)
    if model_type not in fam.model_types:  # matched a family's name spelt another way
        raise EvalkitError(
            f"{source}: model_type {model_type!r} is not one of {fam.title}'s "
            f"({', '.join(fam.model_types)})"
        )
    return fam.bind(config, folder)


def read_config(model_dir: str | Path) -> dict[str, Any]:
    """``model_dir/config.json``, parsed (EvalkitError naming the file otherwise)."""
    path = Path(model_dir) / "config.json"
    if not path.is_file():
        raise EvalkitError(f"{path}: no config.json; is {model_dir} a model checkpoint directory?")
    try:
        config = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as exc:
        raise EvalkitError(f"{path}: not valid JSON ({exc})") from None
    if not isinstance(config, dict):
        raise EvalkitError(f"{path}: not a JSON object")
    return config


def detect_family(model_dir: str | Path) -> ModelFamily:
    """Read ``model_dir/config.json`` and return the model family."""
    config = read_config(model_dir)
    return family_from_config(config, str(Path(model_dir) / "config.json"), Path(model_dir))


def trainable_family(model_dir: str | Path) -> ModelFamily:
    """The family of a checkpoint the trainer is given; EvalkitError (one line) for a family
    the trainer does not support."""
    fam = detect_family(model_dir)
    if not fam.family.trainable:
        supported = ", ".join(n for n, f in FAMILIES.items() if f.trainable)
        raise EvalkitError(
            f"{model_dir}: {fam.family.title} ({fam.name}) is evaluated by evalkit but not "
            f"trained: the trainer supports the Qwen families ({supported})"
        )
    return fam


def named_family(name_or_dir: str) -> ModelFamily:
    """A family by name (its reference sizes) or by a checkpoint folder (its own)."""
    if Path(name_or_dir).is_dir():
        return detect_family(name_or_dir)
    fam = FAMILIES.get(name_or_dir)  # an unknown name: RegistryError with did-you-mean
    return fam.bind({"model_type": fam.model_types[0]})


def run_family(model: str, local: bool, named: str | None = None) -> ModelFamily | None:
    """The family a run feeds: the one ``named`` (an engine's ``family`` option: a served
    model), else a local checkpoint's; None when neither says (a served model unnamed)."""
    if named:
        return named_family(named)
    if local and Path(model).is_dir():
        return detect_family(model)
    return None


def require_trust(family: ModelFamily | None, model: str, trusted: bool) -> None:
    """EvalkitError in one line naming ``--trust-remote-code`` when ``family`` ships its own
    code and the engine was not told to trust it."""
    if family is not None and family.family.trust_remote_code and not trusted:
        raise EvalkitError(
            f"{model}: {family.family.title} runs code shipped with the checkpoint; "
            "pass --trust-remote-code to allow it (it is recorded with the run)"
        )


def check_frame_sizes(request: Request, factor: int) -> None:
    """Frames arrive resized; H and W must be multiples of the model's patch x merge."""
    for i, video in enumerate(request.videos):
        _t, h, w, _c = video.array.shape
        if h % factor or w % factor:
            raise EvalkitError(
                f"request {request.id}: video {i} frames are {h}x{w}, not multiples of {factor} "
                "(patch x merge of this model); build the cache with FrameSpec.factor="
                f"{factor}"
            )
    for i, image in enumerate(request.images):
        h, w = image.shape[:2]
        if h % factor or w % factor:
            raise EvalkitError(
                f"request {request.id}: image {i} is {h}x{w}, not multiples of {factor}"
            )
