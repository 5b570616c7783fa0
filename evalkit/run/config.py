"""The typed settings of ``evalkit run`` (YAML ``--config`` maps onto :class:`RunConfig`).

Kept apart from the runner so that the CLI, ``evalkit score`` and the resume logic can
read and validate a run's settings without importing the orchestration.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, model_validator

from evalkit.config import throughput_only
from evalkit.errors import ConfigError
from evalkit.pipeline import PipelineConfig
from evalkit.video.types import FrameSpec, Resize


class FrameOverrides(BaseModel):
    """Settings that replace every benchmark's pinned FrameSpec values (None = pinned)."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    fps: float | None = None
    """Sampling rate override (replaces a pinned fixed frame count: the rate is then used)."""
    nframes: int | None = Field(default=None, ge=1)
    """Fixed frame count, uniform over the clip (VLMEvalKit's --nframe); replaces the
    sampling rate (rounded to the model's temporal patch, 2 for Qwen-VL)."""
    max_frames: int | None = None
    """Frame cap override."""
    min_pixels: int | None = None
    """Per-frame pixel floor override."""
    max_pixels: int | None = None
    """Per-frame pixel cap override."""
    total_pixels: int | None = None
    """Per-video pixel budget override."""
    resize: Resize | None = None
    """Frame resampling override: torchvision (qwen-vl-utils' exact pixels), transformers
    (transformers' video processors' exact pixels) or pil (fast)."""

    def apply(self, spec: FrameSpec) -> FrameSpec:
        """``spec`` with the overridden fields replaced."""
        update = {k: v for k, v in self.model_dump().items() if v is not None}
        if not update:
            return spec
        if self.fps is not None and self.nframes is None:
            # a pinned fixed count would silently win over the rate asked for (FrameSpec)
            update["nframes"] = None
        try:
            return FrameSpec.model_validate({**spec.model_dump(), **update})
        except ValidationError as exc:  # one line: pydantic's own text spans several
            why = "; ".join(e["msg"] for e in exc.errors())
            raise ConfigError(f"frame settings {update}: {why}") from None


class JudgeConfig(BaseModel):
    """The LLM judge for judged benchmarks (without one they are reported "not scored")."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model: str
    """The judge: a checkpoint directory, or the served model name for the openai engine
    (without a judge, judged benchmarks are not scored)."""
    engine: str = "openai"
    """Backend the judge runs on: openai (a served model), vllm or hf."""
    engine_options: dict[str, Any] = Field(default_factory=dict)
    """Backend settings of the judge engine."""
    graded: bool = False
    """Ask for a graded verdict in [0, 1] instead of 0/1."""
    timeout_s: float = throughput_only(60.0, gt=0)
    """Longest wait for one judge request, in seconds.

    The judge engine's client timeout is set from it unless engine_options name one."""
    retries: int = throughput_only(1, ge=0)
    """Retries of a judge request that timed out or failed transiently."""
    concurrency: int = throughput_only(8, ge=1)
    """Judge requests in flight at once."""
    max_failures: int = throughput_only(5, ge=1)
    """Consecutive failed judge requests after which the judge is marked down.

    The remaining judged samples are then recorded "not scored: judge unavailable"."""


JUDGE_RULE_NEEDS_A_JUDGE = (
    "--rule official+judge sends the replies the official rule cannot decide to the "
    "authors' LLM judge: give --judge-model (and --judge-engine) to name one"
)


class RunConfig(BaseModel):
    """Everything ``evalkit run`` needs; YAML (``--config``) maps onto it, flags override."""

    model_config = ConfigDict(extra="forbid", use_attribute_docstrings=True)

    model: str
    """Checkpoint directory (or served model name for the openai engine)."""
    bench: list[str] = Field(default_factory=list)
    """Benchmark names or aliases (NAME or NAME:VARIANT), comma-separated as a flag."""
    data: str | None = None
    """A unified JSON/JSONL file run as an ad-hoc benchmark."""
    video_root: str | None = None
    """Where the ad-hoc file's relative media paths live (default: its folder)."""
    data_root: str | None = None
    """Folder holding one sub-folder per benchmark, each in its official layout."""
    engine: str = "vllm"
    """Inference backend: vllm, hf or openai."""
    engine_options: dict[str, Any] = Field(default_factory=dict)
    """Backend settings (see each engine's config model), e.g. max_num_batched_tokens."""
    variant: Literal["official", "plain", "thinking"] | None = None
    """Prompt variant for every benchmark (default: each benchmark's pinned one): official
    (its official prompt; the pinned evalkit one where it has none), plain (a direct answer)
    or thinking (reasoning, then a marked answer)."""
    max_tokens: int | None = Field(default=None, gt=0)
    """Generation cap override (default: the benchmark's pinned value for the variant)."""
    frames: FrameOverrides = Field(default_factory=FrameOverrides)
    """Frame sampling overrides (default: each benchmark's pinned settings)."""
    limit: int | None = Field(default=None, gt=0)
    """Run only the first N samples of each benchmark."""
    mode: Literal["async", "sync"] = "async"
    """async = the pipeline; sync = vanilla batches (baseline for measurements only)."""
    require_cache: bool = False
    """Fail samples whose frames are not cached instead of decoding them on the fly."""
    cache_root: str | None = None
    """Frame cache folder (default: $EVALKIT_CACHE or ~/.cache/evalkit/frames)."""
    cache_workers: int = Field(default=2, gt=0)
    """Processes that decode cache misses."""
    cache_identity: Literal["stat", "content"] = "stat"
    """Source identity in the cache key: path + size + mtime (stat), or a hash of the
    video's bytes (content: catches a same-size rewrite with its mtime put back)."""
    cache_codec: Literal["raw", "jpeg"] = "raw"
    """Cached frames: raw uint8 (exact) or one JPEG per frame (smaller, lossy)."""
    cache_jpeg_quality: int = Field(default=90, ge=1, le=100)
    """JPEG quality of the jpeg cache codec."""
    runs_dir: str = "runs"
    """Where run directories are created."""
    run_id: str | None = None
    """Name of the run directory (default: a new time-stamped id)."""
    resume: str | None = None
    """An existing run directory to continue (skips sample ids already recorded)."""
    force: bool = False
    """Allow resuming under changed result settings (recorded as an amendment; config.json
    is kept as it was)."""
    retry_failed: bool = False
    """On resume, also rerun samples recorded as failed."""
    pipeline: PipelineConfig = Field(default_factory=PipelineConfig)
    """Concurrency bounds."""
    judge: JudgeConfig | None = None
    """LLM judge for llm_judge samples; None leaves them unscored (never 0)."""
    rule: Literal["official", "official+judge", "evalkit"] | None = None
    """Headline rule of every benchmark (default: each spec's); official+judge asks the
    authors' LLM judge for the replies the official rule cannot decide (needs a judge).

    official: the benchmark's official rule; official+judge: that rule with the authors'
    LLM judge (``<rule>+judge``, where the benchmark's own code does that); evalkit:
    evalkit's robust rule. None keeps each spec's ``scoring.rule``."""
    replicas: int = Field(default=1, ge=1)
    """Engines run side by side as Ray actors, fed by one driver (1 = in process; only
    speed changes, never a result)."""
    ray_address: str | None = None
    """An existing Ray cluster to run the replicas on (default: a local instance when
    replicas > 1, started and shut down by the run)."""
    cpus_per_replica: int = Field(default=1, ge=1)
    """CPUs reserved per replica where there is no GPU (its placement-group bundle)."""
    replica_restarts: int = Field(default=0, ge=0)
    """Times Ray restarts a replica that crashed (its engine is rebuilt).

    Its samples in flight go to the other replicas either way."""
    ray_connect_timeout_s: float = Field(default=30.0, gt=0)
    """Longest wait for the Ray cluster at ray_address (--ray-address) to answer, in
    seconds."""
    max_engine_failures: float = Field(default=0.0, ge=0, le=1, allow_inf_nan=False)
    """Share of the run's samples the engine may fail (after retries: a server error, a
    dropped connection, a request it refused) before the run exits 1 naming the most common
    cause; 0: any engine failure does. The failed samples count as wrong in the aggregate
    until a resume with --retry-failed reruns them."""
    allow_missing: bool = False
    """Run the samples whose media exist and record the others as failed (default: a
    missing video or image stops the run before any engine starts)."""
    fetch: bool = True
    """Fetch from the Hugging Face Hub on first use what is not here: a benchmark's release
    (into EVALKIT_DATA), a model given by hub id. --no-fetch never asks the Hub: what is
    missing is an error naming the command that fetches it (as with HF_HUB_OFFLINE=1)."""

    @model_validator(mode="after")
    def _judge_rule_needs_a_judge(self) -> RunConfig:
        if self.rule == "official+judge" and self.judge is None:
            raise ValueError(JUDGE_RULE_NEEDS_A_JUDGE)
        return self

    @property
    def on_ray(self) -> bool:
        """Whether the run goes through the Ray driver (replicas or a cluster address)."""
        return self.replicas > 1 or self.ray_address is not None


def judge_engine_options(jc: JudgeConfig) -> dict[str, Any]:
    """The judge engine's options with its client timeout set from the judge's, and its
    own retries off (the judge retries), where its config has such fields."""
    from evalkit.engines import ENGINE_CONFIGS

    fields = ENGINE_CONFIGS.get(jc.engine).model_fields
    client = {"timeout_s": jc.timeout_s, "max_retries": 0}
    return {**{k: v for k, v in client.items() if k in fields}, **jc.engine_options}
