"""Every family beyond the Qwen-VL ones that evalkit builds a tiny checkpoint of (LLaVA-
OneVision, LLaVA-NeXT-Video, InternVL, GLM-4.1V, Qwen2.5-Omni, Qwen3-Omni), end to end on
the real vLLM CPU engine (heavy): ``evalkit model tiny --family F`` -> ``evalkit run --bench
SynthVideo`` -> ``evalkit report``, each sample answered, the family's frames as the cache gave them
(its grid, its reference count) and the family recorded. LLaVA-OneVision also runs on two
Ray replicas and through ``evalkit sweep`` over two frame counts. (The Qwen-VL families run
end to end in test_run_e2e.py, test_sweep_vllm.py and test_model_families.py.)

Each family's greedy answers on vLLM (text, prompt and output token counts) equal
transformers' own (the HF engine: its processor and ``model.generate``) for the same requests.

Short on purpose: two yes/no questions, 8 answer tokens, one engine per run (the HF runs
take under a second each). Each command runs as users run it, in a process of its own: in
this one, a run beside the test harness's captured output once left that output closed
(every later test on the worker then failed at its teardown), a state no user's process has.
"""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

pytest.importorskip("vllm")

from evalkit.cli.main import main
from evalkit.engines.family import FAMILIES
from evalkit.synthvideo import generate
from tests._engine_env import engine_env

pytestmark = pytest.mark.heavy

ENGINE_FLAGS = (
    "--engine vllm --dtype float32 --max-num-batched-tokens 512 --max-num-seqs 4 "
    "--max-model-len 4096 --engine-opt enforce_eager=true --max-tokens 8"
)
ENGINE = ENGINE_FLAGS.split()
# family -> (frames per video, frame size) the cache must give it on SynthVideo (whose spec
# pins a rate: the family's reference wins; a fixed-size family gets its processor's size,
# GLM-4.1V its 2 fps in pairs at the clip's own size on the 28-pixel grid, LLaVA-NeXT-Video
# its 32 frames at the clip's own size, under its pixel cap and on its 8-pixel patches: its
# processor crops them; the Omni families the spec's frames as pinned, as the Qwen families,
# on the 28-pixel grid: Qwen3-Omni's authors' loader's, before its processor's 32-pixel one)
EXPECTED = {
    "llava_onevision": ("32", "56x56"),
    "llava_next_video": ("32", "168x224"),
    "internvl": ("32", "56x56"),
    "glm4v": (None, "168x224"),
    "qwen2_5_omni": (None, "168x224"),
    "qwen3_omni_moe": (None, "168x224"),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("families")
    generate(root / "synth", 1, "test", 0, families=["yes_no", "moving_shape"])
    env = {**engine_env(), "EVALKIT_CACHE": str(root / "cache"), "RAY_AUTH_MODE": "disabled"}
    with pytest.MonkeyPatch.context() as mp:
        for key, value in env.items():
            mp.setenv(key, value)
        mp.chdir(root)
        yield root


def _evalkit(*argv: str) -> None:
    """``evalkit ARGV`` in a process of its own (the world's folder and environment)."""
    done = subprocess.run(
        [sys.executable, "-m", "evalkit", *argv], capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, (argv, done.stdout[-2000:], done.stderr[-3000:])


def _run(world: Path, family: str, *extra: str, engine: list[str] = ENGINE, tag: str = "") -> Path:
    model = world / family
    if not model.is_dir():
        _evalkit("model", "tiny", str(model), "--family", family)
    base = ["--model", str(model), "--bench", "SynthVideo", "--data-root", "synth"]
    _evalkit("run", *base, "--no-progress", "--run-id", family + tag, *engine, *extra)
    return world / "runs" / (family + tag)


def _check_run(run: Path, family: str) -> None:
    records = [json.loads(x) for x in (run / "SynthVideo.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["status"] == "ok" for r in records), records
    assert all(r["tokens"]["output"] >= 1 for r in records)
    seen = json.loads((run / "frames.json").read_text())["SynthVideo"]
    frames, size = EXPECTED[family]
    assert seen["size"] == {size: 2}, seen
    if frames is not None:
        assert seen["frames"] == {frames: 2}, seen
    else:
        assert all(int(n) % 2 == 0 for n in seen["frames"]), seen
    manifest = json.loads((run / "config.json").read_text())
    assert manifest["family"]["family"] == family
    pinned = FAMILIES.get(family).qwen_terms  # the benchmark's frames, as the Qwen families
    frames_from = manifest["family"]["frames_from"]["SynthVideo"]["frames"]
    assert frames_from == ("benchmark" if pinned else "family")
    assert main(["report", str(run)]) == 0
    report = (run / "report" / "report.md").read_text()
    assert "model family" in report and manifest["family"]["title"] in report


@pytest.mark.parametrize(
    "family", ["internvl", "glm4v", "llava_next_video", "qwen2_5_omni", "qwen3_omni_moe"]
)
def test_a_tiny_checkpoint_runs_synthvideo_to_a_report(world: Path, family: str) -> None:
    _check_run(_run(world, family), family)


def test_llava_onevision_runs_on_two_replicas_and_sweeps_two_frame_counts(world: Path) -> None:
    # its tiny checkpoint names the SigLIP tower as transformers 5 saves it: vLLM loads it
    # through evalkit's renamed view
    _check_run(_run(world, "llava_onevision", "--replicas", "2"), "llava_onevision")
    grid = ["--grid", "frames.nframes=4,8", "--sweep-dir", "sw", "--cache-workers", "1"]
    base = ["--model", "llava_onevision", "--bench", "SynthVideo", "--data-root", "synth"]
    _evalkit("sweep", *base, "--no-progress", *ENGINE, *grid)
    doc = json.loads((world / "sw" / "sweep.json").read_text())
    assert len(doc["settings"]) == 2
    for s in doc["settings"]:
        run = world / "sw" / s["run"]
        n = s["values"]["frames.nframes"]
        seen = json.loads((run / "frames.json").read_text())["SynthVideo"]
        assert seen["frames"] == {str(n): 2} and seen["size"] == {"56x56": 2}
        records = (run / "SynthVideo.jsonl").read_text().splitlines()
        assert [json.loads(x)["status"] for x in records] == ["ok", "ok"]
        family = json.loads((run / "config.json").read_text())["family"]
        assert family["frames_from"]["SynthVideo"]["frames"] == "flags"


@pytest.mark.parametrize(
    "family",
    ["llava_onevision", "llava_next_video", "internvl", "glm4v", "qwen2_5_omni", "qwen3_omni_moe"],
)
def test_transformers_generates_the_tokens_vllm_generated(world: Path, family: str) -> None:
    # the same requests (request builder, frame cache) through the HF engine: the family's
    # transformers processor and model.generate(do_sample=False), against the vLLM run's
    # records (its own test above, or made here when run alone)
    vllm = world / "runs" / family
    if not vllm.is_dir():
        _run(world, family)
    hf = _run(world, family, engine=["--engine", "hf", "--max-tokens", "8"], tag="-hf")

    def answers(run: Path) -> dict[str, tuple[str, dict[str, int]]]:
        # 8 tokens of a byte-level BPE may end inside a UTF-8 character: transformers'
        # decode writes U+FFFD for its bytes, vLLM's incremental detokenizer holds them back
        # (seen: InternVL's ' ... dimuup\ufffd\ufffd\ufffd' against ' ... dimuup', 8 tokens each)
        lines = (run / "SynthVideo.jsonl").read_text().splitlines()
        return {
            r["id"]: (r["prediction"].rstrip("\ufffd"), r["tokens"]) for r in map(json.loads, lines)
        }

    assert answers(hf) == answers(vllm)
    assert json.loads((hf / "frames.json").read_text()) == json.loads(
        (vllm / "frames.json").read_text()
    )
