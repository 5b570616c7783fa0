"""The shipped specs load, cite their sources, and are found by name, alias or variant."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from evalkit.bench.aggregations import AGGREGATIONS
from evalkit.bench.registry import BenchmarkRegistry, benchmarks_dir, get_benchmark, load_spec
from evalkit.errors import ConfigError
from evalkit.registry import RegistryError, normalize_name

SHIPPED = sorted(benchmarks_dir().glob("*.yaml"))


def test_there_are_shipped_specs() -> None:
    assert len(SHIPPED) >= 5


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_shipped_yaml_loads_with_all_its_variants(path: Path) -> None:
    spec = load_spec(path)
    for variant in [None, *spec.variants]:
        v = spec.with_variant(variant)
        assert v.aggregation.name in AGGREGATIONS or ":" in v.aggregation.name
        assert v.aggregation.source.strip()
        assert v.files and v.layout.strip()


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_every_reference_score_cites_its_source_and_a_real_variant(path: Path) -> None:
    spec = load_spec(path)
    for ref in spec.references:
        assert ref.source.strip() and ref.model.strip()
        assert ref.variant is None or ref.variant in spec.variants


def test_lookup_ignores_case_and_punctuation() -> None:
    assert get_benchmark("Video-MME").name == "Video-MME"
    assert get_benchmark("videomme").name == "Video-MME"
    assert get_benchmark("VIDEO_MME").name == "Video-MME"
    assert normalize_name("Video-MME") == "videomme"


def test_a_variant_is_asked_for_after_a_colon() -> None:
    spec = get_benchmark("videomme:with_subtitles")
    assert spec.variant == "with_subtitles" and spec.subtitles is not None
    assert get_benchmark("videomme").subtitles is None


def test_an_unknown_name_suggests_close_ones() -> None:
    with pytest.raises(
        RegistryError, match=r"unknown benchmark 'videome'; did you mean 'Video-MME'"
    ):
        get_benchmark("videome")


def test_an_unknown_variant_lists_the_known_ones() -> None:
    with pytest.raises(RegistryError, match=r"no variant 'nope' \(variants: with_subtitles\)"):
        get_benchmark("videomme:nope")


def test_unknown_keys_in_a_spec_are_an_error_naming_the_field(tmp_path: Path) -> None:
    text = (
        (benchmarks_dir() / "lvbench.yaml").read_text().replace("layout: |", "layuot: x\nlayout: |")
    )
    (tmp_path / "x.yaml").write_text(text)
    with pytest.raises(ConfigError, match=r"x.yaml: .*field 'layuot'"):
        load_spec(tmp_path / "x.yaml")


def test_a_reference_score_without_source_is_refused(tmp_path: Path) -> None:
    lines = (benchmarks_dir() / "lvbench.yaml").read_text().splitlines()
    i = next(i for i, x in enumerate(lines) if x.startswith("    source: Qwen2.5-VL"))
    lines[i] = "    source: '  '"
    (tmp_path / "x.yaml").write_text("\n".join(lines))
    with pytest.raises(ConfigError, match=r"field 'references.0': .*needs its source"):
        load_spec(tmp_path / "x.yaml")


def test_two_specs_claiming_one_alias_are_refused(tmp_path: Path) -> None:
    for name in ("lvbench", "mvbench"):
        (tmp_path / f"{name}.yaml").write_text((benchmarks_dir() / f"{name}.yaml").read_text())
    text = (
        (tmp_path / "mvbench.yaml").read_text().replace("aliases: [mvbench", "aliases: [lv-bench")
    )
    (tmp_path / "mvbench.yaml").write_text(text)
    with pytest.raises(ConfigError, match="already used by 'LVBench'"):
        BenchmarkRegistry(tmp_path)


def _template_exists(name: str) -> bool:
    from evalkit.prompts import PROMPTS_DIR

    return (PROMPTS_DIR / (name if name.endswith(".jinja") else f"{name}.jinja")).is_file()


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_the_base_prompt_template_of_every_spec_exists(path: Path) -> None:
    assert _template_exists(load_spec(path).prompt.template)


def test_every_variant_prompt_template_exists() -> None:
    missing = {
        spec.with_variant(v).prompt.template
        for spec in map(load_spec, SHIPPED)
        for v in spec.variants
        if not _template_exists(spec.with_variant(v).prompt.template)
    }
    assert not missing, missing


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_task_types_and_scorers_are_known_to_the_scoring_router(path: Path) -> None:
    from evalkit.scoring import SCORERS, canonical_task_type

    spec = load_spec(path)
    for v in [spec.with_variant(name) for name in [None, *spec.variants]]:
        for task_type in v.task_types:
            assert canonical_task_type(task_type) == task_type
        for task_type, scorer_name in v.scorers.items():
            assert canonical_task_type(task_type) == task_type
            assert scorer_name in SCORERS


# A newline right after a block tag, or at the very end, is dropped by evalkit's renderer
# (trim_blocks, keep_trailing_newline off): `+%}` or {{ '\n' }} keeps it as written.
_LOST_NEWLINE = re.compile(r"(?<![+-])%\}\n")


@pytest.mark.parametrize("path", SHIPPED, ids=[p.stem for p in SHIPPED])
def test_no_pinned_official_prompt_has_a_newline_evalkit_would_drop(path: Path) -> None:
    spec = load_spec(path)
    for variant in [None, *spec.variants]:
        for task_type, official in spec.with_variant(variant).prompt.official.items():
            where = f"{path.name} variant {variant} {task_type}"
            assert not _LOST_NEWLINE.search(official.template), f"{where}: newline after a tag"
            assert not official.template.endswith("\n"), f"{where}: final newline"
