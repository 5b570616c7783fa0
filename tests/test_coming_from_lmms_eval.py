"""A user of lmms-eval or VLMEvalKit finds their way in: task names, flags, frame counts."""

from __future__ import annotations

import argparse
import shlex
from pathlib import Path

import pytest

import evalkit
from evalkit.bench.registry import BenchmarkRegistry, benchmarks_dir, registry
from evalkit.cache.key import SourceIdentity, cache_key
from evalkit.cli.main import main
from evalkit.cli.run import add_arguments, config_from_args
from evalkit.errors import ConfigError
from evalkit.registry import RegistryError
from evalkit.run.plan import bench_run, result_config
from evalkit.sample import VideoRef

# lmms-eval task names (the `task:` of lmms_eval/tasks/*/*.yaml at EvolvingLMMs-Lab/lmms-eval
# 75571cf) -> the evalkit benchmark and variant holding the same questions. Names that
# already normalise to a benchmark's name or alias (videomme, mvbench, lvbench, mlvu_dev,
# video_mmmu, video_holmes, videomme_v2, vsibench, ovobench, minerva) are left out.
LMMS_EVAL_TASKS = [
    ("videomme_w_subtitle", "Video-MME", "with_subtitles"),
    ("videomme_v2_w_subtitle", "Video-MME-v2", "with_subtitles"),
    ("mlvu_test", "MLVU", "test"),
    ("tempcompass_multi_choice", "TempCompass", None),
    ("tempcompass_yes_no", "TempCompass", "yes_no"),
    ("tempcompass_caption_matching", "TempCompass", "caption_matching"),
    ("tempcompass_captioning", "TempCompass", "captioning"),
    ("mmvu_val", "MMVU", None),
    ("longvideobench_val_v", "LongVideoBench", None),
    ("longvideobench_val_i", "LongVideoBench", "interleaved_subtitles"),
    ("temporal_grounding_charades", "Charades-STA", "lmms_eval"),
    ("videomathqa_mcq", "VideoMathQA", None),
    ("videomathqa_mbin", "VideoMathQA", "mbin"),
    ("videomathqa_mcq_w_subtitles", "VideoMathQA", "with_subtitles"),
    ("videomathqa_mbin_w_subtitles", "VideoMathQA", "mbin_with_subtitles"),
    ("vsibench_debiased", "VSI-Bench", "debiased"),
    ("motionbench_full", "MotionBench", None),
]


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(argv)


@pytest.mark.parametrize("task, name, variant", LMMS_EVAL_TASKS)
def test_an_lmms_eval_task_name_finds_its_benchmark_and_variant(
    task: str, name: str, variant: str | None
) -> None:
    spec = registry().get(task)
    assert (spec.name, spec.variant) == (name, variant)


def test_an_alias_of_a_variant_refuses_another_variant_on_top() -> None:
    with pytest.raises(RegistryError, match="'TempCompass:captioning'"):
        registry().get("tempcompass_yes_no:captioning")
    assert registry().get("tempcompass_yes_no:yes_no").variant == "yes_no"


def test_a_spec_alias_naming_no_variant_of_it_is_refused(tmp_path: Path) -> None:
    text = (benchmarks_dir() / "mlvu.yaml").read_text()
    (tmp_path / "mlvu.yaml").write_text(text.replace('"mlvu_test:test"', '"mlvu_test:nosuch"'))
    with pytest.raises(ConfigError, match="alias 'mlvu_test:nosuch' names no variant"):
        BenchmarkRegistry(tmp_path)


@pytest.mark.parametrize(
    "flags, names, instead",
    [
        ("--tasks videomme", "--tasks", "--bench"),
        ("--model_args pretrained=Qwen/Qwen2.5-VL-7B-Instruct", "--model_args", "--model"),
        ("--output_path out/", "--output_path", "--runs-dir"),
        ("--log_samples", "--log_samples", "always recorded"),
        ("--nframe 8", "--nframe", "--frames-nframes"),
        ("--tasks=mvbench", "--tasks", "--bench"),
    ],
)
def test_another_tools_flag_names_evalkits_flag(
    flags: str, names: str, instead: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exc:
        main(["run", "--model", "ckpt", *shlex.split(flags)])
    assert exc.value.code == 2
    (line,) = capsys.readouterr().err.splitlines()
    assert names in line and instead in line and "unrecognized arguments" not in line


def test_a_flag_no_tool_has_keeps_argparses_message(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["run", "--model", "ckpt", "--no-such-flag"])
    assert "unrecognized arguments: --no-such-flag" in capsys.readouterr().err


def test_version_prints_evalkits_version(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["--version"]) == 0
    assert capsys.readouterr().out.strip() == f"evalkit {evalkit.__version__}"


def test_frames_nframes_reaches_the_frame_spec_as_a_fixed_count() -> None:
    cfg = config_from_args(parse("--model", "ckpt", "--frames-nframes", "8"))
    spec = registry().get("Video-MME")
    frames = bench_run(cfg, spec, [], None).frame_spec
    assert frames.nframes == 8 and frames.fps == spec.frames.fps  # fps is then unused


def test_frames_nframes_is_in_the_fingerprint_and_the_cache_key() -> None:
    spec = registry().get("Video-MME")
    runs = {}
    for argv in ((), ("--frames-nframes", "8"), ("--frames-nframes", "16")):
        cfg = config_from_args(parse("--model", "ckpt", *argv))
        runs[argv] = bench_run(cfg, spec, [], None)
    fingerprints = {result_config(cfg, [b]).fingerprint() for b in runs.values()}
    source, ref = SourceIdentity("/v.mp4", 1, 1), VideoRef(path="/v.mp4")
    keys = {cache_key(source, ref, b.frame_spec) for b in runs.values()}
    assert len(fingerprints) == 3 and len(keys) == 3


def test_frames_fps_replaces_a_pinned_fixed_count() -> None:
    # VSI-Bench pins 32 frames: a rate asked for would otherwise be silently ignored
    cfg = config_from_args(parse("--model", "ckpt", "--frames-fps", "1"))
    frames = bench_run(cfg, registry().get("VSI-Bench"), [], None).frame_spec
    assert frames.nframes is None and frames.fps == 1.0


def test_frames_nframes_below_one_is_refused_naming_the_flag(
    capsys: pytest.CaptureFixture[str],
) -> None:
    try:
        rc = main(["run", "--model", "ckpt", "--bench", "MVBench", "--frames-nframes", "0"])
    except SystemExit as exc:  # refused by argparse (the field's ge=1 makes it a positive int)
        rc = exc.code
    assert rc == 2
    assert "--frames-nframes" in capsys.readouterr().err


def _readme_task_table() -> list[tuple[str, str]]:
    text = (Path(__file__).parents[1] / "README.md").read_text()
    table = text.split("| lmms-eval task | evalkit |", 1)[1].split("\n\n", 1)[0]
    pairs = []
    for line in table.splitlines()[2:]:
        cells = [c.strip() for c in line.strip("|").split("|")]
        for task, bench in zip(cells[::2], cells[1::2], strict=True):
            if task:
                pairs.append((task.strip("`"), bench.split(" (")[0]))
    return pairs


def test_the_readmes_task_name_table_is_what_the_registry_resolves() -> None:
    pairs = _readme_task_table()
    assert len(pairs) >= len(LMMS_EVAL_TASKS)
    for task, bench in pairs:
        spec = registry().get(task)
        assert spec.name + (f":{spec.variant}" if spec.variant else "") == bench, task


def test_every_foreign_flag_the_readme_maps_is_named_by_the_error() -> None:
    from evalkit.cli.run import FOREIGN_FLAGS

    text = (Path(__file__).parents[1] / "README.md").read_text()
    section = text.split("## Coming from lmms-eval", 1)[1].split("\n## ", 1)[0]
    for flag in ("--tasks", "--model_args", "--output_path", "--log_samples", "--nframe"):
        assert f"`{flag}" in section and flag in FOREIGN_FLAGS
