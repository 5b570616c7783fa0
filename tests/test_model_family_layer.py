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
    assert "size" not in spec.model_dump() and "sampling" not in spec.model_dump()


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


def test_a_remote_code_family_needs_trust_remote_code_said(tmp_path: Path) -> None:
    from evalkit.engines.vllm_engine import VLLMConfig, engine_model

    model = _checkpoint(tmp_path, "internvl_chat", 448)
    with pytest.raises(EvalkitError, match="pass --trust-remote-code"):
        engine_model(VLLMConfig(model=str(model)))
    family, args = engine_model(VLLMConfig(model=str(model), trust_remote_code=True))
    assert family is not None and args["trust_remote_code"] is True


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
