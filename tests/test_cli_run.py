"""`evalkit run` flags and YAML map onto one typed RunConfig."""

from __future__ import annotations

import argparse
import typing
from pathlib import Path

import pytest
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from evalkit.cli.run import add_arguments, config_from_args
from evalkit.config import field_help, finite_float, flag_type, section_model
from evalkit.errors import ConfigError
from evalkit.pipeline import PipelineConfig
from evalkit.run.config import FrameOverrides, JudgeConfig, RunConfig


def parse(*argv: str) -> argparse.Namespace:
    p = argparse.ArgumentParser()
    add_arguments(p)
    return p.parse_args(argv)


def test_flags_fill_every_section_of_the_config() -> None:
    cfg = config_from_args(
        parse(
            "--model",
            "ckpt",
            "--bench",
            "Video-MME, LVBench",
            "--max-num-batched-tokens",
            "2048",
            "--engine-opt",
            "enforce_eager=true",
            "--frames-fps",
            "1",
            "--pipeline-max-in-flight",
            "9",
            "--judge-model",
            "judge",
            "--judge-opt",
            "timeout_s=30",
            "--variant",
            "thinking",
        )
    )
    assert cfg.bench == ["Video-MME", "LVBench"]
    assert cfg.engine_options == {"max_num_batched_tokens": 2048, "enforce_eager": True}
    assert cfg.frames.fps == 1.0 and cfg.pipeline.max_in_flight == 9
    assert cfg.judge is not None and cfg.judge.engine_options == {"timeout_s": 30}
    assert cfg.variant == "thinking"


def test_flags_override_the_yaml_and_unset_flags_keep_it(tmp_path: Path) -> None:
    yml = tmp_path / "run.yaml"
    yml.write_text("model: a\nbench: [MVBench]\nlimit: 5\nengine_options: {max_num_seqs: 4}\n")
    cfg = config_from_args(parse("--config", str(yml), "--model", "b", "--dtype", "float32"))
    assert (cfg.model, cfg.bench, cfg.limit) == ("b", ["MVBench"], 5)
    assert cfg.engine_options == {"max_num_seqs": 4, "dtype": "float32"}


def test_an_unknown_yaml_key_names_the_file_and_key(tmp_path: Path) -> None:
    yml = tmp_path / "run.yaml"
    yml.write_text("model: a\nbenchmarks: [MVBench]\n")
    with pytest.raises(ConfigError, match=r"run\.yaml.*benchmarks"):
        config_from_args(parse("--config", str(yml)))


def test_a_malformed_key_value_flag_is_named() -> None:
    with pytest.raises(ConfigError, match="--engine-opt 'oops'"):
        config_from_args(parse("--model", "m", "--engine-opt", "oops"))


# RunConfig settings without a flag of their own, and why (every other one must have one).
NO_FLAG = {
    "engine_options": "a dict: --engine-opt KEY=VALUE and the engine flags (--max-num-seqs ...)",
    "judge.engine_options": "a dict: --judge-opt KEY=VALUE",
}


def _settings(model: type[BaseModel], prefix: str = "") -> list[tuple[str, FieldInfo]]:
    """(dotted name, field) of every setting of ``model``, into its sections."""
    out = []
    for name, info in model.model_fields.items():
        section = section_model(info.annotation)
        if section is not None:
            out += _settings(section, f"{prefix}{name}.")
        else:
            out.append((prefix + name, info))
    return out


def test_every_runconfig_setting_has_a_flag_generated_from_its_field() -> None:
    p = argparse.ArgumentParser()
    add_arguments(p)
    by_dest = {a.dest: a for a in p._actions if a.option_strings}
    for name, info in _settings(RunConfig):
        if name in NO_FLAG:
            continue
        action = by_dest.get(name.replace(".", "_"))
        assert action is not None, f"RunConfig.{name} has no flag of `evalkit run`"
        summary = field_help(info)
        assert summary and "\n" not in summary, name
        assert action.help is not None and action.help.startswith(summary), (name, action.help)
        assert action.default is None, name  # unset: the YAML's or the field's default stands
        if flag_type(info) is finite_float:  # the bug class: a float flag taking nan
            assert action.type is finite_float, name
        if typing.get_origin(info.annotation) is typing.Literal:
            assert action.choices == list(typing.get_args(info.annotation)), name


def test_a_representative_command_line_parses_to_the_expected_config() -> None:
    argv = (
        "--model ckpt --bench Video-MME,MVBench --data-root data --allow-missing "
        "--engine hf --variant plain --rule evalkit --max-tokens 64 --limit 5 --mode sync "
        "--require-cache --cache-root c --cache-workers 3 --cache-identity content "
        "--cache-codec jpeg --cache-jpeg-quality 80 --runs-dir r --run-id x "
        "--retry-failed --replicas 2 --ray-address auto --cpus-per-replica 2 "
        "--replica-restarts 1 --ray-connect-timeout 5 --judge-model j --judge-engine vllm "
        "--judge-opt dtype=float32 --frames-fps 0.5 --frames-resize pil "
        "--pipeline-max-in-flight 4 --max-num-seqs 8 --engine-opt enforce_eager=true"
    )
    cfg = config_from_args(parse(*argv.split()))
    expected = RunConfig(
        model="ckpt",
        bench=["Video-MME", "MVBench"],
        data_root="data",
        allow_missing=True,
        engine="hf",
        engine_options={"max_num_seqs": 8, "enforce_eager": True},
        variant="plain",
        rule="evalkit",
        max_tokens=64,
        limit=5,
        mode="sync",
        require_cache=True,
        cache_root="c",
        cache_workers=3,
        cache_identity="content",
        cache_codec="jpeg",
        cache_jpeg_quality=80,
        runs_dir="r",
        run_id="x",
        retry_failed=True,
        replicas=2,
        ray_address="auto",
        cpus_per_replica=2,
        replica_restarts=1,
        ray_connect_timeout_s=5.0,
        judge=JudgeConfig(model="j", engine="vllm", engine_options={"dtype": "float32"}),
        frames=FrameOverrides(fps=0.5, resize="pil"),
        pipeline=PipelineConfig(max_in_flight=4),
    )
    assert cfg.model_dump() == expected.model_dump()


def test_every_judge_setting_and_a_negated_switch_come_from_flags(tmp_path: Path) -> None:
    yml = tmp_path / "run.yaml"
    yml.write_text("model: a\nforce: true\njudge: {model: j, engine_options: {x: 1}}\n")
    argv = (
        f"--config {yml} --no-force --judge-graded --judge-timeout-s 9 --judge-retries 0 "
        "--judge-concurrency 2 --judge-max-failures 3 --ray-connect-timeout-s 7"
    )
    cfg = config_from_args(parse(*argv.split()))
    assert cfg.force is False and cfg.ray_connect_timeout_s == 7.0
    assert cfg.judge == JudgeConfig(
        model="j",
        engine_options={"x": 1},
        graded=True,
        timeout_s=9.0,
        retries=0,
        concurrency=2,
        max_failures=3,
    )


@pytest.mark.parametrize("flag", ["--cache-workers", "--cache-jpeg-quality", "--frames-nframes"])
def test_an_int_setting_that_must_be_positive_is_refused_by_its_flag(flag: str) -> None:
    with pytest.raises(SystemExit):
        parse("--model", "m", flag, "0")
