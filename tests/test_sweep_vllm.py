"""``evalkit sweep`` on the real vLLM CPU engine and the tiny model (heavy): SynthVideo
over 2 frame counts x 2 prompt variants gives four run directories, each equal (records
without their timings, scores, fingerprint) to a run of that setting alone; the sweep
starts its engine once; a sweep stopped after some records resumes without duplicates.

The four runs alone share one engine of their own (through the runner, as ``evalkit run``
runs them) so the test starts three engines, not six: sweep, runs alone, resume."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from evalkit.cli.main import main
from evalkit.synthvideo import generate
from evalkit.tiny_checkpoint import build_tiny_model
from tests._engine_env import engine_env

pytestmark = pytest.mark.heavy

ENGINE = (
    "--engine vllm --dtype float32 --max-num-batched-tokens 256 --max-num-seqs 8 "
    "--max-model-len 2048 --engine-opt enforce_eager=true --max-tokens 8"
)


def _records(run: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for line in (run / "SynthVideo.jsonl").read_text().splitlines():
        r = json.loads(line)
        r.pop("timings", None)
        out[r["id"]] = r
    return out


def test_a_sweep_equals_its_runs_alone_from_one_engine_start_and_resumes(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    pytest.importorskip("vllm")
    for k, v in engine_env().items():
        monkeypatch.setenv(k, v)
    monkeypatch.chdir(tmp_path)
    generate(tmp_path / "synth", 2, "test", 0, families=["yes_no"])
    build_tiny_model(tmp_path / "model", "qwen2_5_vl", seed=0)
    import evalkit.run.execute as runner

    starts: list[Any] = []
    real = runner.make_engine

    def counted(cfg: Any) -> Any:
        starts.append(cfg)
        return real(cfg)

    monkeypatch.setattr(runner, "make_engine", counted)
    base = f"--model model --bench SynthVideo --data-root synth --no-progress {ENGINE}"
    grid = ["--grid", "frames.nframes=2,4", "--grid", "prompt.variant=plain,thinking"]
    flags = [*base.split(), "--cache-root", "cache", "--cache-workers", "1"]
    assert main(["sweep", *flags, *grid, "--sweep-dir", "sw"]) == 0
    assert len(starts) == 1
    doc = json.loads((tmp_path / "sw" / "sweep.json").read_text())
    assert len(doc["settings"]) == 4

    # the runs alone: the CLI's config of `evalkit run` with each setting, one engine
    import asyncio

    from evalkit.cli.main import command_parser
    from evalkit.cli.run import config_from_args
    from evalkit.engines.lifecycle import close_engine
    from evalkit.run.plan import plan_run

    cfgs = []
    for s in doc["settings"]:
        n, variant = s["values"]["frames.nframes"], s["values"]["prompt.variant"]
        argv = [*flags, "--cache-root", "cache2", "--run-id", s["run"]]
        argv += ["--frames-nframes", str(n), "--variant", variant]
        cfgs.append(config_from_args(command_parser("run").parse_args(argv)))

    async def alone() -> None:
        engine = counted(plan_run(cfgs[0]))
        try:
            for cfg in cfgs:
                await runner.aexecute(cfg, engine=engine)
        finally:
            await close_engine(engine)

    asyncio.run(alone())
    swept = {}
    for s in doc["settings"]:
        a, b = tmp_path / "sw" / s["run"], tmp_path / "runs" / s["run"]
        fa = json.loads((a / "config.json").read_text())["fingerprint"]
        fb = json.loads((b / "config.json").read_text())["fingerprint"]
        assert fa == fb
        swept[s["run"]] = _records(a)
        assert swept[s["run"]] == _records(b)
        assert all(r["status"] == "ok" for r in swept[s["run"]].values())

    # stopped after some records: each store keeps its first line; resume finishes them
    for s in doc["settings"]:
        store = tmp_path / "sw" / s["run"] / "SynthVideo.jsonl"
        store.write_text(store.read_text().splitlines(keepends=True)[0])
    assert main(["sweep", "--resume", "sw", "--no-progress"]) == 0
    assert len(starts) == 3
    for s in doc["settings"]:
        lines = (tmp_path / "sw" / s["run"] / "SynthVideo.jsonl").read_text().splitlines()
        assert len(lines) == len({json.loads(x)["id"] for x in lines})
        assert _records(tmp_path / "sw" / s["run"]) == swept[s["run"]]
