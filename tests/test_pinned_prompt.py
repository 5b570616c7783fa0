"""Every pinned prompt and decoding field of a spec takes effect in `evalkit run`: the
variant (official, plain, thinking) and its token budget, the run's --variant override,
the plain variant's instruction, the official prompt's text and system prompt, greedy or
sampled decoding; and the run records per benchmark what it used (config.json)."""

from __future__ import annotations

import argparse
import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
import yaml

from evalkit.engines.base import Completion, Request
from evalkit.run.config import RunConfig
from evalkit.run.execute import execute
from tests.scripted_engine import ScriptedEngine

ROWS = [
    {"qid": "q1", "kind": "mc", "question": "Which colour?", "options": ["red", "blue", "green"]},
    {"qid": "q2", "kind": "mc", "question": "Which shape?", "options": ["disc", "square"]},
]
OFFICIAL = {
    "template": "Q: {{ question }}\n{% for l, t in options %}({{ l }}) {{ t }}\n{% endfor %}"
    "Best option:",
    "system": "You are a careful video analyst.",
    "source": "example/toy-bench eval.py build_prompt",
}


def toy(root: Path, name: str, rows: list[dict[str, Any]] | None = None, **over: Any) -> None:
    """A benchmark spec ``benchmarks/<name>.yaml`` and its rows under ``data/<name>/``."""
    (root / "data" / name).mkdir(parents=True, exist_ok=True)
    (root / "data" / name / "rows.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in rows or ROWS)
    )
    spec: dict[str, Any] = {
        "name": name,
        "citation": "toy benchmark for tests",
        "data": {"local_path": str(root / "data" / name)},
        "layout": "rows.jsonl",
        "files": [{"path": "rows.jsonl"}],
        "mapping": {"id": {"template": "{qid}"}, "question": "question", "options": "options"},
        "aggregation": {"name": "mean", "source": "toy"},
        "generation": {"greedy": True, "max_tokens": 32, "max_tokens_thinking": 512},
    }
    for key, value in over.items():
        spec[key] = {**spec[key], **value} if isinstance(spec.get(key), dict) else value
    (root / "benchmarks").mkdir(exist_ok=True)
    (root / "benchmarks" / f"{name}.yaml").write_text(yaml.safe_dump(spec, sort_keys=False))


@dataclass
class Recorder(ScriptedEngine):
    """The scripted engine, keeping every request it was sent."""

    prefill_s: float = 0.0
    decode_s: float = 0.0
    seen: dict[str, Request] = field(default_factory=dict)

    async def generate(self, request: Request) -> Completion:
        self.seen[f"{request.metadata['benchmark']}/{request.id}"] = request
        return await super().generate(request)


@pytest.fixture
def root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVALKIT_BENCHMARKS", str(tmp_path / "benchmarks"))
    return tmp_path


def run(root: Path, bench: list[str], run_id: str, **cfg: Any) -> tuple[Recorder, dict]:
    """``evalkit run`` of ``bench`` with the recorder; (engine, config.json)."""
    config = RunConfig(
        model="recorder",
        bench=bench,
        data_root=str(root / "data"),
        cache_root=str(root / "cache"),
        cache_workers=1,
        runs_dir=str(root / "runs"),
        run_id=run_id,
        **cfg,
    )
    engine = Recorder()
    execute(config, engine=engine)
    return engine, json.loads((root / "runs" / run_id / "config.json").read_text())


def test_the_pinned_variant_sets_the_prompt_and_its_token_budget(root: Path) -> None:
    toy(root, "Plain", prompt={"variant": "plain"})
    toy(root, "Thinks", prompt={"variant": "thinking"})
    engine, _ = run(root, ["Plain", "Thinks"], "pinned")
    plain, thinks = engine.seen["Plain/q1"], engine.seen["Thinks/q1"]
    assert "<think>" not in plain.text and plain.sampling.max_tokens == 32
    assert "<think> </think>" in thinks.text and thinks.sampling.max_tokens == 512


def test_the_run_variant_overrides_every_benchmarks_pinned_one(root: Path) -> None:
    toy(root, "Plain", prompt={"variant": "plain"})
    toy(root, "Thinks", prompt={"variant": "thinking"})
    engine, config = run(root, ["Plain", "Thinks"], "plain", variant="plain")
    seen = engine.seen.values()
    assert all("<think>" not in r.text and r.sampling.max_tokens == 32 for r in seen)
    assert config["result_config"]["benchmarks"]["Thinks"]["variant"] == "plain"
    engine, config = run(root, ["Plain", "Thinks"], "thinking", variant="thinking")
    seen = engine.seen.values()
    assert all("<think>" in r.text and r.sampling.max_tokens == 512 for r in seen)
    assert config["result_config"]["benchmarks"]["Plain"]["variant"] == "thinking"


def test_the_cli_variant_flag_takes_official_and_defaults_to_the_pinned_one() -> None:
    from evalkit.cli.run import add_arguments, config_from_args

    p = argparse.ArgumentParser()
    add_arguments(p)
    assert config_from_args(p.parse_args(["--model", "m"])).variant is None
    assert config_from_args(p.parse_args(["--model", "m", "--variant", "official"])).variant == (
        "official"
    )


def test_the_pinned_instruction_replaces_the_generic_one_in_the_plain_prompt(root: Path) -> None:
    said = "Reply with the letter of the colour you see."
    toy(root, "Instructed", prompt={"variant": "plain", "instruction": said})
    toy(root, "Generic", prompt={"variant": "plain"})
    engine, _ = run(root, ["Instructed", "Generic"], "instr")
    text = engine.seen["Instructed/q1"].text
    assert text.endswith("C. green\n" + said)
    assert engine.seen["Generic/q1"].text.endswith("(A, B or C) only.")
    # the thinking variant keeps its tag instruction, not the benchmark's sentence
    engine, _ = run(root, ["Instructed"], "instr-thinking", variant="thinking")
    thinking = engine.seen["Instructed/q1"].text
    assert said not in thinking and "<answer> </answer>" in thinking


def test_the_official_prompt_text_and_system_reach_the_request(root: Path) -> None:
    toy(root, "Official", prompt={"variant": "official", "official": {"*": OFFICIAL}})
    engine, config = run(root, ["Official"], "official")
    req = engine.seen["Official/q2"]
    assert req.text == "Q: Which shape?\n(A) disc\n(B) square\nBest option:"
    assert req.system == "You are a careful video analyst."
    assert req.sampling.max_tokens == 32  # the official prompt does not ask to reason
    assert config["result_config"]["benchmarks"]["Official"]["variant"] == "official"


def test_an_official_prompt_that_reasons_gets_the_thinking_budget(root: Path) -> None:
    official = {**OFFICIAL, "thinking": True}
    toy(root, "Official", prompt={"variant": "official", "official": {"*": official}})
    engine, _ = run(root, ["Official"], "official-thinks")
    assert engine.seen["Official/q1"].sampling.max_tokens == 512


def test_official_on_a_benchmark_without_one_falls_back_to_its_pinned_variant(
    root: Path,
) -> None:
    toy(root, "Thinks", prompt={"variant": "thinking"})
    toy(root, "Official", prompt={"variant": "plain", "official": {"*": OFFICIAL}})
    engine, config = run(root, ["Thinks", "Official"], "fallback", variant="official")
    assert "<think> </think>" in engine.seen["Thinks/q1"].text
    assert engine.seen["Official/q1"].text.startswith("Q: Which colour?")
    benches = config["result_config"]["benchmarks"]
    assert benches["Thinks"]["variant"] == "thinking"
    assert benches["Thinks"]["requested_variant"] == "official"
    assert benches["Official"]["variant"] == "official"


def test_a_task_type_without_an_official_prompt_is_rendered_in_the_pinned_variant(
    root: Path,
) -> None:
    rows = [*ROWS, {"qid": "n1", "kind": "count", "question": "How many flashes?", "options": []}]
    types = {"mc": "multiple_choice", "count": "numerical"}
    mapping = {"task_type_field": "kind", "task_type_map": types}
    official = {"multiple_choice": OFFICIAL}
    toy(root, "Mixed", rows, mapping=mapping, prompt={"variant": "thinking", "official": official})
    engine, config = run(root, ["Mixed"], "mixed", variant="official")
    assert engine.seen["Mixed/q1"].text.startswith("Q: Which colour?")
    assert "<think> </think>" in engine.seen["Mixed/n1"].text
    assert engine.seen["Mixed/n1"].system is None
    entry = config["result_config"]["benchmarks"]["Mixed"]
    assert entry["variant"] == "official" and entry["fallback"] == {"numerical": "thinking"}
    assert entry["max_tokens"] == 512  # one of its prompts reasons first


def test_sampled_decoding_settings_reach_the_engine_and_the_fingerprint(root: Path) -> None:
    sampled = {"greedy": False, "temperature": 0.7, "top_p": 0.9, "top_k": 20}
    toy(root, "Sampled", generation=sampled)
    toy(root, "Greedy")
    engine, config = run(root, ["Sampled", "Greedy"], "decoding")
    s = engine.seen["Sampled/q1"].sampling
    assert (s.temperature, s.top_p, s.top_k) == (0.7, 0.9, 20)
    assert engine.seen["Greedy/q1"].sampling.temperature == 0.0
    benches = config["result_config"]["benchmarks"]
    assert benches["Sampled"]["temperature"] == 0.7 and benches["Sampled"]["top_k"] == 20
    assert benches["Greedy"]["temperature"] == 0.0


def test_max_tokens_of_the_run_overrides_every_budget(root: Path) -> None:
    toy(root, "Thinks", prompt={"variant": "thinking"})
    engine, config = run(root, ["Thinks"], "cap", max_tokens=7)
    assert engine.seen["Thinks/q1"].sampling.max_tokens == 7
    assert config["result_config"]["benchmarks"]["Thinks"]["max_tokens"] == 7


def test_evalkit_run_from_the_command_line_uses_each_pinned_variant(
    root: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalkit.cli.run import add_arguments
    from evalkit.cli.run import run as cli_run

    toy(root, "Thinks", prompt={"variant": "thinking"})
    toy(root, "Official", prompt={"variant": "official", "official": {"*": OFFICIAL}})
    engine = Recorder()
    monkeypatch.setattr("evalkit.run.execute.make_engine", lambda cfg: engine)
    p = argparse.ArgumentParser()
    add_arguments(p)
    # a served model's name (openai engine): `run` checks a checkpoint folder exists
    argv = ["--model", "recorder", "--engine", "openai", "--engine-opt", "probe=false"]
    argv += ["--bench", "Thinks,Official"]
    argv += [
        "--no-progress",
        "--data-root",
        str(root / "data"),
        "--cache-root",
        str(root / "cache"),
    ]
    argv += ["--runs-dir", str(root / "runs"), "--run-id", "cli", "--cache-workers", "1"]
    assert cli_run(p.parse_args(argv)) == 0
    assert "<think> </think>" in engine.seen["Thinks/q1"].text
    assert engine.seen["Official/q1"].system == OFFICIAL["system"]
    config = json.loads((root / "runs" / "cli" / "config.json").read_text())
    benches = config["result_config"]["benchmarks"]
    assert (benches["Thinks"]["variant"], benches["Official"]["variant"]) == (
        "thinking",
        "official",
    )
    assert "run directory:" in capsys.readouterr().out


def test_subtitles_reach_an_official_prompt_that_pins_them(tmp_path: Path) -> None:
    from evalkit.bench.loader import load
    from evalkit.bench.registry import get_benchmark
    from evalkit.bench.spec import BenchmarkSpec
    from evalkit.cache import FrameCache
    from evalkit.prompts import PromptPlan
    from evalkit.request_builder import RequestBuilder
    from tests.fixtures.bench import official

    with_subtitles = {
        "template": "{% if subtitles %}Subtitles:\n{{ subtitles | map(attribute='text') | "
        "join('\\n') }}\n{% else %}No subtitles available.\n{% endif %}{{ question }}",
        "source": "example/toy-bench eval.py subtitle prompt",
    }
    spec = get_benchmark("video-mme:with_subtitles")
    data = spec.model_dump()
    data["prompt"] = {**data["prompt"], "variant": "official", "official": {"*": with_subtitles}}
    spec = BenchmarkSpec.model_validate(data)
    samples = {s.id: s for s in load(spec, official.videomme(tmp_path / "vmme"))}
    frames = spec.frames.model_copy(update={"max_frames": 4})
    build = RequestBuilder(FrameCache(tmp_path / "cache"), frames, prompt=PromptPlan.for_spec(spec))
    assert build(samples["001-1"]).text == "Subtitles:\nhello\nQuestion 001-1?"
    assert build(samples["002-1"]).text == "No subtitles available.\nQuestion 002-1?"


def test_an_official_prompt_naming_an_unknown_variable_names_its_source() -> None:
    from evalkit.bench.spec import OfficialPrompt
    from evalkit.errors import ConfigError
    from evalkit.prompts import render_official
    from evalkit.sample import Sample

    prompt = OfficialPrompt(template="{{ question }} {{ choices }}", source="repo/eval.py")
    sample = Sample(id="s1", task_type="multiple_choice", question="Q?", options=["a", "b"])
    with pytest.raises(ConfigError, match=r"s1.*repo/eval\.py.*choices"):
        render_official(prompt, sample)


def test_a_spec_pinning_official_needs_an_official_prompt_for_each_task_type(root: Path) -> None:
    from evalkit.bench.registry import load_spec
    from evalkit.errors import ConfigError

    toy(root, "Unprompted", prompt={"variant": "official"})
    with pytest.raises(ConfigError, match="no prompt for multiple_choice"):
        load_spec(root / "benchmarks" / "Unprompted.yaml")


@pytest.mark.parametrize(
    ("generation", "error"),
    [
        ({"greedy": True, "temperature": 0.7}, "greedy decoding takes no temperature"),
        ({"greedy": False}, "needs the temperature"),
    ],
)
def test_decoding_settings_must_agree_with_greedy(
    root: Path, generation: dict[str, Any], error: str
) -> None:
    from evalkit.bench.registry import load_spec
    from evalkit.errors import ConfigError

    toy(root, "Decoding", generation=generation)
    with pytest.raises(ConfigError, match=error):
        load_spec(root / "benchmarks" / "Decoding.yaml")


def test_a_run_in_the_pinned_variant_shows_no_settings_difference_in_reports(root: Path) -> None:
    from evalkit.reports.load import load_run
    from evalkit.reports.reference import settings_diff

    toy(root, "Thinks", prompt={"variant": "thinking"})
    run(root, ["Thinks"], "as-pinned")
    bench = load_run(root / "runs" / "as-pinned", bootstrap=10).benchmarks["Thinks"]
    assert settings_diff(bench.spec, bench.settings) == []
    run(root, ["Thinks"], "plain", variant="plain")
    bench = load_run(root / "runs" / "plain", bootstrap=10).benchmarks["Thinks"]
    assert settings_diff(bench.spec, bench.settings) == [
        "prompt variant plain (reference thinking)"
    ]


def test_an_official_prompt_from_a_yaml_block_loses_only_its_last_newline() -> None:
    from evalkit.bench.spec import OfficialPrompt
    from evalkit.prompts import render_official
    from evalkit.sample import Sample

    block = yaml.safe_load(
        "t: |\n  Select the best answer.\n  {{ question }}\n  {% for l, t in options %}\n"
        "  {{ l }}. {{ t }}\n  {% endfor %}\n  Answer with the option's letter directly.\n"
    )["t"]
    sample = Sample(id="s", task_type="multiple_choice", question=" Q? ", options=["x", "y"])
    assert render_official(OfficialPrompt(template=block, source="repo/eval.py"), sample) == (
        "Select the best answer.\nQ?\nA. x\nB. y\nAnswer with the option's letter directly."
    )
