"""The model-family layer without an engine: the registry, which frames a benchmark runs
under with each family (and which source gave them), the frame contract in the cache key,
how a request reaches vLLM per family, and the trainer's refusal of other families."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from evalkit.engines.base import Request
from evalkit.engines.family import (
    FAMILIES,
    FamilySpec,
    FrameReference,
    detect_family,
    family_from_config,
    register_family,
    trainable_family,
)
from evalkit.engines.vllm_engine import vllm_prompt
from evalkit.errors import ConfigError, EvalkitError
from evalkit.registry import RegistryError
from evalkit.run.config import FrameOverrides, RunConfig
from evalkit.run.plan import frame_settings
from evalkit.video.resize import video_size
from evalkit.video.sampling import sample_indices
from evalkit.video.types import FrameSpec
from tests._engine_env import make_frames

PINNED = FrameSpec(fps=2.0, max_frames=768, max_pixels=602112)  # a spec in Qwen's terms


def _checkpoint(tmp_path: Path, model_type: str, side: int | None = None) -> Path:
    """A checkpoint folder as far as the family layer reads one (config + processor)."""
    folder = tmp_path / model_type
    folder.mkdir()
    (folder / "config.json").write_text(json.dumps({"model_type": model_type}))
    if side is not None:
        proc = {"video_processor": {"size": {"height": side, "width": side}}}
        (folder / "processor_config.json").write_text(json.dumps(proc))
    return folder


def test_every_family_names_its_reference_source_and_vllm_serves_its_architectures() -> None:
    from vllm.model_executor.models.registry import _VLLM_MODELS

    for name, fam in FAMILIES.items():
        assert fam.reference.source and fam.reference.describe(), name
        assert fam.prompt and fam.tested, name
        for arch in fam.architectures:
            assert arch in _VLLM_MODELS, (name, arch)


def test_model_types_are_aliases_and_an_unknown_one_lists_the_families() -> None:
    assert FAMILIES.get("qwen3_vl_moe").name == "qwen3_vl"
    assert family_from_config({"model_type": "glm4v_moe"}).family.name == "glm4v"
    with pytest.raises(EvalkitError, match=r"'llama'.*supported: .*llava_onevision"):
        family_from_config({"model_type": "llama"})


def test_a_qwen_family_runs_the_benchmark_frames_as_pinned(tmp_path: Path) -> None:
    qwen3 = family_from_config({"model_type": "qwen3_vl"})
    spec, origin = frame_settings(RunConfig(model="m"), PINNED, qwen3)
    assert spec == PINNED.model_copy(update={"factor": 32})
    assert origin == {"frames": "benchmark", "pixels": "benchmark"}
    assert not {"size", "sampling", "keep_size"} & set(spec.model_dump())


def test_qwen3_omni_caches_its_loaders_grid_and_leaves_the_processors_resize_on() -> None:
    # its authors' loader (qwen-omni-utils, image_patch_size 14) sizes frames on the 28 grid;
    # its processor then resizes them onto the 16-pixel tower's 32 grid
    omni = family_from_config({"model_type": "qwen3_omni_moe", "vision_config": {"patch_size": 16}})
    spec, origin = frame_settings(RunConfig(model="m"), PINNED, omni)
    assert spec == PINNED.model_copy(update={"factor": 28})
    assert origin == {"frames": "benchmark", "pixels": "benchmark"}
    kwargs = omni.family.processor_kwargs
    assert kwargs == {"do_sample_frames": False, "use_audio_in_video": False}
    assert not omni.family.tokens_from_frames


def test_a_fixed_size_family_takes_its_reference_where_the_spec_gives_a_rate(
    tmp_path: Path,
) -> None:
    llava = detect_family(_checkpoint(tmp_path, "llava_onevision", 384))
    spec, origin = frame_settings(RunConfig(model="m"), PINNED, llava)
    assert (spec.nframes, spec.sampling, spec.size, spec.temporal_patch) == (
        32,
        "linspace",
        (384, 384),
        1,
    )
    assert origin == {"frames": "family", "pixels": "model"}


def test_a_benchmark_fixed_frame_count_wins_over_the_family_reference(tmp_path: Path) -> None:
    internvl = detect_family(_checkpoint(tmp_path, "internvl", 448))
    pinned = PINNED.model_copy(update={"fps": None, "nframes": 64})
    spec, origin = frame_settings(RunConfig(model="m"), pinned, internvl)
    assert (spec.nframes, spec.sampling, spec.size) == (64, "segments", (448, 448))
    assert origin["frames"] == "benchmark"


def test_frame_flags_win_over_both_and_are_recorded(tmp_path: Path) -> None:
    llava = detect_family(_checkpoint(tmp_path, "llava_onevision", 384))
    cfg = RunConfig(model="m", frames=FrameOverrides(nframes=8))
    spec, origin = frame_settings(cfg, PINNED, llava)
    assert (spec.nframes, spec.size) == (8, (384, 384))
    assert origin["frames"] == "flags"


def test_a_pixel_flag_on_a_fixed_size_family_is_refused_in_one_line(tmp_path: Path) -> None:
    llava = detect_family(_checkpoint(tmp_path, "llava_onevision", 384))
    cfg = RunConfig(model="m", frames=FrameOverrides(max_pixels=500_000))
    with pytest.raises(
        ConfigError, match=r"--frames-max-pixels: no effect on LLaVA-OneVision.*384x384"
    ):
        frame_settings(cfg, PINNED, llava)


def test_a_grid_family_takes_its_reference_budgets(tmp_path: Path) -> None:
    glm = family_from_config({"model_type": "glm4v"})
    spec, origin = frame_settings(RunConfig(model="m"), PINNED, glm)
    assert (spec.fps, spec.max_frames, spec.total_pixels) == (2.0, 600, 28 * 28 * 30000)
    assert (spec.factor, spec.temporal_patch, spec.size) == (28, 2, None)
    assert origin == {"frames": "family", "pixels": "family"}


def test_a_processor_grid_family_keeps_the_clips_own_size_under_its_pixel_cap() -> None:
    nextvideo = family_from_config({"model_type": "llava_next_video"})
    spec, origin = frame_settings(RunConfig(model="m"), PINNED, nextvideo)
    assert (spec.nframes, spec.sampling, spec.keep_size, spec.size) == (32, "linspace", True, None)
    assert spec.max_pixels == nextvideo.family.reference.max_pixels
    assert origin == {"frames": "family", "pixels": "family"}
    # no patch grid, no floor, no token cap: an odd frame stays itself, a large one only
    # shrinks into max_pixels
    assert video_size(93, 167, spec, 32) == (93, 167)
    assert video_size(720, 1280, spec, 32) == (504, 896)
    for grid_family in ("glm4v", "qwen2_5_vl"):  # control: the grid families round to it
        other = frame_settings(
            RunConfig(model="m"), PINNED, family_from_config({"model_type": grid_family})
        )[0]
        assert not other.keep_size and video_size(93, 167, other, 32) != (93, 167)


def test_a_pixel_flag_that_cannot_act_on_a_processor_grid_family_is_refused() -> None:
    nextvideo = family_from_config({"model_type": "llava_next_video"})
    cfg = RunConfig(model="m", frames=FrameOverrides(min_pixels=50_000, total_pixels=10**7))
    with pytest.raises(
        ConfigError, match=r"--frames-min-pixels, --frames-total-pixels: no effect on LLaVA-NeXT"
    ):
        frame_settings(cfg, PINNED, nextvideo)
    capped = RunConfig(model="m", frames=FrameOverrides(max_pixels=100_000))
    spec, origin = frame_settings(capped, PINNED, nextvideo)
    assert spec.max_pixels == 100_000 and origin["pixels"] == "flags"
    # Qwen3-Omni's processor resizes too, but its cache holds its authors' loader's frames
    # in the Qwen terms, under every pixel budget: the same flags act there
    omni = family_from_config({"model_type": "qwen3_omni_moe"})
    spec, origin = frame_settings(cfg, PINNED, omni)
    assert (spec.min_pixels, spec.total_pixels, spec.keep_size) == (50_000, 10**7, False)


def test_frames_of_any_size_reach_vllm_for_a_processor_grid_family() -> None:
    nextvideo = family_from_config({"model_type": "llava_next_video"})
    odd = Request(id="r", text="<video> What?", videos=[make_frames(4, 93, 167)])
    nextvideo.check_frames(odd)  # what the vLLM, HF and openai engines ask before sending
    inputs = vllm_prompt(odd, "p", nextvideo)
    assert inputs["multi_modal_data"]["video"][0][0].shape == (4, 93, 167, 3)
    assert inputs["mm_processor_kwargs"] == {"do_sample_frames": False}  # its resize stays on
    with pytest.raises(EvalkitError, match="93x167, not multiples of 28"):  # control
        family_from_config({"model_type": "glm4v"}).check_frames(odd)


def test_the_manifest_records_the_family_and_where_each_benchmark_frames_came_from(
    tmp_path: Path,
) -> None:
    from evalkit.bench.registry import get_benchmark
    from evalkit.run.plan import bench_run, plan_of

    model = _checkpoint(tmp_path, "llava_onevision", 384)
    cfg = RunConfig(model=str(model), bench=["SynthVideo"])
    family = detect_family(model)
    run = bench_run(cfg, get_benchmark("SynthVideo"), [], family)
    manifest = plan_of(cfg, [run], family=family).manifest
    assert manifest.family is not None
    assert manifest.family["family"] == "llava_onevision"
    assert manifest.family["frames_from"] == {"SynthVideo": {"frames": "family", "pixels": "model"}}
    assert "lmms-eval" in manifest.family["reference_source"]
    assert manifest.result_config.benchmarks["SynthVideo"].frames["size"] == [384, 384]  # type: ignore[index]


def test_linspace_and_segments_pick_the_frames_the_authors_code_picks() -> None:
    def internvl_get_index(max_frame: int, n: int) -> list[int]:
        # InternVL's get_index with no bound: segment middles over [0, max_frame]
        seg = float(max_frame) / n
        return [int(seg / 2 + np.round(seg * i)) for i in range(n)]

    for total in (5, 31, 32, 33, 97, 600, 7201):
        n = FrameSpec(fps=None, nframes=32, temporal_patch=1)
        lin = n.model_copy(update={"sampling": "linspace"})
        seg = n.model_copy(update={"sampling": "segments"})
        assert sample_indices(total, 30.0, lin) == np.linspace(0, total - 1, 32, dtype=int).tolist()
        assert sample_indices(total, 30.0, seg) == internvl_get_index(total - 1, 32)


def test_arange_picks_the_frames_gemma4s_video_processor_picks() -> None:
    # Gemma4VideoProcessor keeps transformers' default sample_frames
    video_utils = pytest.importorskip("transformers.video_utils")
    spec = FrameSpec(fps=None, nframes=32, temporal_patch=1, sampling="arange")
    for total in (32, 33, 75, 97, 600, 1800, 7201):
        meta = video_utils.VideoMetadata(total_num_frames=total, fps=30.0)
        theirs = video_utils.default_sample_indices_fn(meta, num_frames=32).tolist()
        assert sample_indices(total, 30.0, spec) == theirs
    # where transformers refuses (fewer frames than 32) evalkit repeats frames instead
    assert sample_indices(5, 10.0, spec) == (np.arange(32) * 5 // 32).tolist()
    window = spec.window(1.0, 2.0)  # frames 30..60 at 30 fps: the same rule over the window
    assert sample_indices(300, 30.0, window) == (30 + np.arange(32) * 31 // 32).tolist()


def _glm_request() -> Request:
    return Request(id="r", text="<video> What?", videos=[make_frames(4, 56, 84)])


def test_vllm_gets_each_family_processor_settings_and_metadata() -> None:
    glm = family_from_config({"model_type": "glm4v"})
    inputs = vllm_prompt(_glm_request(), "p", glm)
    (_, meta) = inputs["multi_modal_data"]["video"][0]
    assert meta["do_sample_frames"] is False  # GLM's processor reads it from the metadata
    assert inputs["mm_processor_kwargs"] == {"do_sample_frames": False, "do_resize": False}
    qwen = family_from_config({"model_type": "qwen2_5_vl"})
    plain = vllm_prompt(_glm_request(), "p", qwen)
    assert "do_sample_frames" not in plain["multi_modal_data"]["video"][0][1]
    omni = family_from_config({"model_type": "qwen2_5_omni"})
    assert (
        vllm_prompt(_glm_request(), "p", omni)["mm_processor_kwargs"]["use_audio_in_video"] is False
    )
    assert (
        vllm_prompt(_glm_request(), "p", omni)["multi_modal_data"]["video"][0][0].dtype == "uint8"
    )


def test_qwen3_omnis_processor_gets_float_frames_as_from_its_authors_loader() -> None:
    # its processor resizes them again; qwen-omni-utils hands it float tensors, and on uint8
    # its resize rounds and clips (measured: up to 32 levels apart; float: 0)
    omni3 = family_from_config({"model_type": "qwen3_omni_moe"})
    request = _glm_request()
    (frames, _meta) = vllm_prompt(request, "p", omni3)["multi_modal_data"]["video"][0]
    assert frames.dtype == "float32"
    assert (frames == request.videos[0].array).all()


@pytest.fixture()
def images_family() -> Any:
    spec = FamilySpec(
        name="test_frames_as_images",
        title="Frames-as-images test family",
        model_types=("test_frames_as_images",),
        architectures=(),
        reference=FrameReference(source="this test", nframes=4),
        prompt="frames as images",
        feed="images",
    )
    register_family(spec)
    yield family_from_config({"model_type": "test_frames_as_images"})
    FAMILIES.unregister(spec.name)


def test_a_family_fed_frames_as_images_gets_one_marked_image_per_frame(images_family: Any) -> None:
    from evalkit.engines.prompting import content_items

    still = np.zeros((56, 56, 3), np.uint8)
    req = Request(
        id="r", text="<video> then <image> What?", videos=[make_frames(3, 56, 84)], images=[still]
    )
    items = content_items(req, images_family)
    texts = [i.get("text") for i in items if i["type"] == "text"]
    assert texts[:3] == ["Frame1: ", "Frame2: ", "Frame3: "]
    assert [i["type"] for i in items].count("image") == 4 and not any(
        i["type"] == "video" for i in items
    )
    inputs = vllm_prompt(req, "p", images_family)
    assert "video" not in inputs["multi_modal_data"]
    sent = inputs["multi_modal_data"]["image"]
    assert len(sent) == 4 and sent[3] is still
    assert np.array_equal(sent[1], req.videos[0].array[1])


def test_a_plugin_that_is_not_a_family_is_refused_by_name() -> None:
    from evalkit.engines.family import _add_plugin

    with pytest.raises(RegistryError, match="'bogus' is a str, not a FamilySpec"):
        _add_plugin("bogus", "llava")


def test_the_trainer_refuses_a_family_it_does_not_train_in_one_line(tmp_path: Path) -> None:
    with pytest.raises(EvalkitError, match=r"LLaVA-OneVision .*not trained.*qwen2_5_vl") as info:
        trainable_family(_checkpoint(tmp_path, "llava_onevision", 384))
    assert "\n" not in str(info.value)
    assert trainable_family(_checkpoint(tmp_path, "qwen2_5_vl")).factor == 28


REMOTE_CODE = [n for n, f in FAMILIES.items() if f.trust_remote_code]


def test_the_remote_code_families_are_the_ones_issue_38_names() -> None:
    assert set(REMOTE_CODE) == {
        "internvl_chat", "interns1", "keye", "keye_vl1_5", "llava_onevision2", "minicpmo",
        "minicpmv", "molmo2", "ovis2_5",
    }  # fmt: skip


@pytest.mark.parametrize("name", REMOTE_CODE)
def test_a_remote_code_family_is_recognised_and_needs_trust_remote_code_said(
    tmp_path: Path, name: str
) -> None:
    from evalkit.engines.vllm_engine import VLLMConfig, engine_model

    model = _checkpoint(tmp_path, FAMILIES.get(name).model_types[0], 448)
    assert detect_family(model).family.name == name
    with pytest.raises(EvalkitError, match="pass --trust-remote-code") as info:
        engine_model(VLLMConfig(model=str(model)))
    assert "\n" not in str(info.value)
    family, args = engine_model(VLLMConfig(model=str(model), trust_remote_code=True))
    assert family is not None and family.family.name == name
    assert args["trust_remote_code"] is True


def test_a_run_of_a_remote_code_family_without_the_flag_stops_before_its_run_directory(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalkit.cli.main import main

    model, runs = _checkpoint(tmp_path, "molmo2"), tmp_path / "runs"
    args = ["run", "--model", str(model), "--bench", "SynthVideo", "--runs-dir", str(runs)]
    assert main(args) != 0
    err = capsys.readouterr().err.strip()
    assert "--trust-remote-code" in err and "Molmo2" in err and "\n" not in err
    assert not runs.exists()  # refused in preflight: the engine never started


def test_minicpmv_takes_the_reference_of_its_checkpoints_version() -> None:
    v45 = family_from_config({"model_type": "minicpmv", "version": 4.5})
    v26 = family_from_config({"model_type": "minicpmv", "version": 2.6})
    assert (v45.family.reference.fps, v45.family.reference.max_frames) == (5.0, 180)
    assert (v26.family.reference.fps, v26.family.reference.max_frames) == (1.0, 64)
    spec, _origin = v45.frame_spec(PINNED)
    assert (spec.fps, spec.max_frames, spec.sampling) == (5.0, 180, "segments")
    assert "3D-resampler" in v45.describe()["reference_source"]


@pytest.mark.parametrize("name", REMOTE_CODE)
def test_evalkit_models_says_a_remote_code_family_needs_the_flag_and_its_source(
    capsys: pytest.CaptureFixture[str], name: str
) -> None:
    from evalkit.cli.main import main

    assert main(["models", name, "--json"]) == 0
    (row,) = json.loads(capsys.readouterr().out)
    fam = FAMILIES.get(name)
    assert row["source"].startswith(fam.reference.source)
    assert "--trust-remote-code" in row["needs"] and row["tested"].startswith("not tested here")


def test_llava_onevision_never_has_two_frame_counts_in_flight_on_vllm() -> None:
    import asyncio

    from evalkit.engines.vllm_engine import FrameCountGate

    def req(i: int, t: int) -> Request:
        return Request(id=f"r{i}", text="<video> Q", videos=[make_frames(t, 56, 56)])

    async def go(gate: FrameCountGate) -> list[tuple[str, int]]:
        log: list[tuple[str, int]] = []

        async def one(r: Request) -> None:
            async with gate.admit(r):
                log.append(("in", len(r.videos[0].array)))
                await asyncio.sleep(0.01)
                log.append(("out", len(r.videos[0].array)))

        await asyncio.gather(*(one(req(i, t)) for i, t in enumerate([4, 8, 4, 8])))
        return log

    def most_counts_at_once(log: list[tuple[str, int]]) -> int:
        inside: list[int] = []
        most = 0
        for what, t in log:
            inside.append(t) if what == "in" else inside.remove(t)
            most = max(most, len(set(inside)))
        return most

    llava = family_from_config({"model_type": "llava_onevision"})
    assert most_counts_at_once(asyncio.run(go(FrameCountGate(llava)))) == 1
    # control: a family without the limit runs both counts side by side
    qwen = family_from_config({"model_type": "qwen2_5_vl"})
    assert most_counts_at_once(asyncio.run(go(FrameCountGate(qwen)))) == 2


def test_stride_picks_the_frames_glm_4_1v_processor_picks() -> None:
    pytest.importorskip("torchvision")
    from transformers import Glm4vVideoProcessor
    from transformers.video_utils import VideoMetadata

    glm = Glm4vVideoProcessor()
    spec = family_from_config({"model_type": "glm4v"}).frame_spec(FrameSpec())[0]
    compared = 0
    for total in (1, 2, 3, 7, 60, 601, 9000, 20000):
        for src_fps in (7.5, 23.976, 25.0, 30.0, 60.0):
            meta = VideoMetadata(total_num_frames=total, fps=src_fps, duration=total / src_fps)
            expected = glm.sample_frames(meta).tolist()
            assert sample_indices(total, src_fps, spec) == expected, (total, src_fps)
            compared += 1
    assert compared == 40


def test_seconds_picks_the_frames_minicpm_v_4_6_processor_picks() -> None:
    pytest.importorskip("torchvision")
    from transformers import MiniCPMV4_6VideoProcessor
    from transformers.video_utils import VideoMetadata

    minicpm = MiniCPMV4_6VideoProcessor()
    spec = family_from_config({"model_type": "minicpmv4_6"}).frame_spec(FrameSpec())[0]
    assert spec.sampling == "seconds" and spec.fps == 1.0 and spec.max_frames == 128
    compared = 0
    # short clips (a frame a second) and ones past 128 s (a 0.1 s grid thinned to 128)
    for total in (1, 2, 3, 7, 60, 601, 3841, 9000, 20000):
        for src_fps in (7.5, 23.976, 25.0, 30.0, 60.0):
            meta = VideoMetadata(total_num_frames=total, fps=src_fps, duration=total / src_fps)
            expected = [int(i) for i in minicpm.sample_frames(meta)]
            assert sample_indices(total, src_fps, spec) == expected, (total, src_fps)
            compared += 1
    assert compared == 45


def test_minicpm_v_4_6_requests_reach_vllm_without_frame_sampling_kwargs() -> None:
    # vLLM 0.32 hands a MiniCPM-V 4.6 request's mm_processor_kwargs to the image processor
    # it runs on each frame, which raises on do_sample_frames; the HF engine's video
    # processor samples unless told not to
    fam = family_from_config({"model_type": "minicpmv4_6"})
    request = Request(id="r", text="<video> Q", videos=[make_frames(4, 56, 56)])
    assert vllm_prompt(request, "p", fam)["mm_processor_kwargs"] == {}
    assert fam.family.processor_kwargs == {"do_sample_frames": False}


def test_evalkit_models_lists_every_family_and_details_one(
    capsys: pytest.CaptureFixture[str],
) -> None:
    from evalkit.cli.main import main

    assert main(["models"]) == 0
    lines = capsys.readouterr().out.splitlines()
    rows = [x.strip("│ ").split() for x in lines if x.startswith("│ ") and x[2] != " "]
    assert [r[0] for r in rows] == FAMILIES.names()
    assert any(r[0] == "llava_onevision" and "384x384" in r for r in rows)
    assert main(["models", "glm4v_moe"]) == 0  # a model type names its family
    detail = capsys.readouterr().out
    assert detail.startswith("glm4v  GLM-4.1V / GLM-4.5V") and "Glm4vVideoProcessor" in detail
    assert main(["models", "--json"]) == 0
    rows = json.loads(capsys.readouterr().out)
    assert {r["family"] for r in rows} == set(FAMILIES.names())


def test_trust_remote_code_is_an_engine_option_only_when_given() -> None:
    from evalkit.cli.main import command_parser
    from evalkit.cli.run import config_from_args

    base = ["--model", "m", "--bench", "SynthVideo"]
    given = config_from_args(command_parser("run").parse_args([*base, "--trust-remote-code"]))
    assert given.engine_options == {"trust_remote_code": True}
    # left unset otherwise, so the fingerprints of runs made without it do not move
    assert (
        "trust_remote_code"
        not in config_from_args(command_parser("run").parse_args(base)).engine_options
    )


def test_a_family_whose_processor_sizes_the_frames_is_not_refused_on_the_caches_count(
    tmp_path: Path,
) -> None:
    # the request builder counts a video's tokens from the cached frames, Qwen's way; for
    # LLaVA-NeXT-Video (frames cropped and pooled by its processor) that count is 18816 for
    # 32 SynthVideo frames against the 512 its tower makes of them: the engine decides
    from evalkit.bench.registry import get_benchmark
    from evalkit.cache import FrameCache
    from evalkit.run.components import make_builder
    from evalkit.run.plan import bench_run
    from evalkit.video.budget import FrameLog

    class Engine:
        max_model_len = 4096

    cache = FrameCache(tmp_path / "cache")
    for model_type, checked in [("llava_next_video", None), ("llava_onevision", 4096)]:
        family = detect_family(_checkpoint(tmp_path, model_type, 384))
        cfg = RunConfig(model="m", bench=["SynthVideo"])
        run = bench_run(cfg, get_benchmark("SynthVideo"), [], family)
        builder = make_builder(cfg, run, cache, Engine(), None, FrameLog())  # type: ignore[arg-type]
        assert builder.max_prompt_tokens == checked, model_type


def test_leading_picks_the_frames_ernie_4_5_vl_authors_pick() -> None:
    # Baidu FastDeploy ernie4_5_vl_processor: int(duration x 2) frames at 2 fps, index
    # round(t x fps) (half to even); under 16 or over 180, that many interval starts
    spec = family_from_config({"model_type": "ernie4_5_vl_moe"}).frame_spec(FrameSpec())[0]
    assert (spec.fps, spec.min_frames, spec.max_frames, spec.sampling) == (2, 16, 180, "leading")
    ten_s = sample_indices(250, 25.0, spec)  # 20 frames at 2 fps: 12.5 s apart, rounded
    assert ten_s[:6] == [0, 12, 25, 38, 50, 62] and len(ten_s) == 20
    three_s = sample_indices(75, 25.0, spec)  # 6 < 16: 16 interval starts, floor(i x 75/16)
    assert three_s == [0, 4, 9, 14, 18, 23, 28, 32, 37, 42, 46, 51, 56, 60, 65, 70]
    ten_min = sample_indices(18000, 30.0, spec)  # 1200 > 180: 180 interval starts
    assert ten_min == list(range(0, 18000, 100))
    assert sample_indices(5, 10.0, spec) == [0, 1, 2, 3, 4, 4]  # every frame, last repeated


def test_leading_agrees_with_transformers_ernie_processor_on_whole_rate_steps() -> None:
    # transformers' port floors where Baidu rounds: the two pick the same frames when the
    # source rate is a multiple of 2 fps, or the count is clamped to 16 or 180 frames
    pytest.importorskip("torchvision")
    from transformers import Ernie4_5_VLMoeVideoProcessor
    from transformers.video_utils import VideoMetadata

    ernie = Ernie4_5_VLMoeVideoProcessor(draw_on_frames=False)
    spec = family_from_config({"model_type": "ernie4_5_vl_moe"}).frame_spec(FrameSpec())[0]
    cases = [(t, f) for t in (5, 60, 601, 9000) for f in (30.0, 60.0)]
    cases += [(t, f) for t in (7, 20000) for f in (7.5, 23.976, 25.0)] + [(75, 25.0)]
    for total, src_fps in cases:
        meta = VideoMetadata(total_num_frames=total, fps=src_fps, duration=total / src_fps)
        theirs = ernie.sample_frames(meta, fps=2).tolist()
        ours = sample_indices(total, src_fps, spec)
        assert ours[: len(theirs)] == theirs and len(ours) - len(theirs) in (0, 1), total
    meta = VideoMetadata(total_num_frames=250, fps=25.0, duration=10.0)
    assert ernie.sample_frames(meta, fps=2).tolist()[:4] == [0, 12, 25, 37]  # floor: 37.5


def test_vllm_refuses_ernie_in_transformers_format_in_one_line(tmp_path: Path) -> None:
    from evalkit.engines.vllm_engine import VLLMConfig, engine_model

    model = _checkpoint(tmp_path, "ernie4_5_vl_moe")
    with pytest.raises(EvalkitError, match=r"remote-code.*spatial_conv_size.*--engine hf"):
        engine_model(VLLMConfig(model=str(model)))


def test_a_run_refuses_ernie_on_vllm_before_anything_is_cached(tmp_path: Path) -> None:
    from evalkit.run.preflight import check_served_family

    model = str(_checkpoint(tmp_path, "ernie4_5_vl_moe"))
    for engine in ("vllm", "vllm_batch"):
        with pytest.raises(ConfigError, match=r"^--model .*ernie4_5_vl_moe: vLLM 0\.32 serves"):
            check_served_family(model, engine)
    check_served_family(model, "hf")  # the HF engine runs it
    check_served_family(str(_checkpoint(tmp_path, "glm4v")), "vllm")  # vLLM serves GLM
