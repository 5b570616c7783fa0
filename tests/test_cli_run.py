"""`evalkit run` flags and YAML map onto one typed RunConfig."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from evalkit.cli.run import add_arguments, config_from_args
from evalkit.errors import ConfigError


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
