"""perf/gpu_check.py stays runnable without a GPU: its plan parses with evalkit's own CLI."""

from __future__ import annotations

import importlib.util
import json
import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

SCRIPT = Path(__file__).resolve().parent.parent / "perf" / "gpu_check.py"


def _module() -> ModuleType:
    spec = importlib.util.spec_from_file_location("perf_gpu_check", SCRIPT)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


@pytest.mark.timeout(120)
def test_the_dry_run_validates_the_plan_on_cpu_and_exits_zero() -> None:
    proc = subprocess.run(
        [sys.executable, str(SCRIPT), "--dry-run"], capture_output=True, text=True, timeout=110
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    plan = json.loads(proc.stdout.strip().splitlines()[-1])
    assert plan["problems"] == []
    names = [s["name"] for s in plan["stages"]]
    assert names[:5] == ["model", "videos", "cache", "sync", "async"]
    replicas = ["async_replicas_1", "async_replicas_2"]
    if plan["skipped"]:  # the Ray scale-out of `evalkit run` is not there: said, not hidden
        assert sorted(plan["skipped"]) == replicas and plan["ray_head"] is None
    else:  # one GPU: both replica arms join the head that shares it
        assert names[5:] == replicas and plan["ray_head"][:3] == ["ray", "start", "--head"]


def test_a_flag_evalkit_does_not_know_is_a_problem_of_the_dry_run(capsys) -> None:
    gpu_check = _module()
    args = gpu_check.parse_args(["--dry-run"])
    plan = gpu_check.make_plan(args, Path("/nowhere"), gpus=2)
    plan.stages[3].argv.append("--no-such-flag")
    assert gpu_check.dry_run(plan, args.budget_s) == 1
    out = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
    assert out["problems"] == ["sync: evalkit run does not accept these flags"]


def test_an_arms_figures_come_from_its_run_directory(tmp_path: Path) -> None:
    from evalkit.records import failed_record
    from evalkit.sample import Sample
    from evalkit.store import Store

    gpu_check = _module()
    run = tmp_path / "runs" / "async_replicas_2"
    run.mkdir(parents=True)
    launched = 1000.0
    with Store(run / "synthvideo.jsonl") as store:
        for i in range(4):  # 4 samples between t=1010 and t=1012: 2 samples/s
            timings = {"io_start": 1010.0 + i * 0.5, "scored": 1010.5 + i * 0.5}
            sample = Sample(id=f"s{i}", task_type="multiple_choice", question="q")
            store.append(failed_record(sample, "engine", "x", fingerprint="f", timings=timings))
    figures = gpu_check.arm_figures(run, launched)
    assert figures["samples"] == 4 and figures["ok"] == 0
    assert figures["samples_per_s"] == 2.0 and figures["engine_start_s"] == 10.0

    args = gpu_check.parse_args([])
    plan = gpu_check.make_plan(args, tmp_path, gpus=2)
    done = {
        "arms": {
            "sync": {"samples_per_s": 4.0},
            "async": {"samples_per_s": 5.0},
            "async_replicas_1": {"samples_per_s": 5.0},
            "async_replicas_2": figures,
        },
        "stage_s": {},
        "errors": {},
    }
    out = gpu_check.summarize(plan, done, ("NVIDIA H200", 2, 139.8))
    assert out["async_over_sync_ratio"] == 1.25 and out["replicas_2_over_1_ratio"] == 0.4
    assert out["gpu_name"] == "NVIDIA H200" and out["async_replicas_2_engine_start_s"] == 10.0
