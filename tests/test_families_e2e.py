"""Every family beyond the Qwen-VL ones that evalkit builds a tiny checkpoint of (LLaVA-
OneVision, LLaVA-NeXT-Video, InternVL, GLM-4.1V, Gemma 4, Qwen2.5-Omni, Qwen3-Omni,
MiniCPM-V 4.6, ERNIE-4.5-VL), end to end on the real vLLM CPU engine (heavy; ERNIE-4.5-VL,
which vLLM 0.32 cannot serve in transformers 5's format, on the HF engine): ``evalkit model
tiny --family F`` -> ``evalkit run --bench SynthVideo`` -> ``evalkit report``, each sample
answered, the family's frames as the cache gave them (its grid, its reference count) and
the family recorded; and the same through ``evalkit sweep`` over two frame counts (one
engine, two run directories, each reported). LLaVA-OneVision runs on two Ray replicas. (The
Qwen-VL families run end to end in test_run_e2e.py, test_sweep_vllm.py and
test_model_families.py.)

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
# vLLM's CPU kernel for Qwen3.5's gated delta-net layers (MiniCPM-V 4.6's language model)
# runs in bfloat16 only ("CPU GDN attention requires BF16"). The HF engine stays in float32
# (the checkpoint's bfloat16 weights widened exactly), which gives vLLM's tokens; its own
# bfloat16 path rounds otherwise (seen: a flip at a top-2 logit margin of 0.008, token 3)
VLLM_DTYPE = {"minicpmv4_6": "bfloat16"}
# Greedy tokens of bfloat16 vLLM and float32 transformers agree only where the top-2 logit
# margin of each step is above bfloat16's rounding; a tiny random model's margins are small
# (seed 0 of MiniCPM-V 4.6: 0.002-0.008 at some step of these prompts, one flip each way).
# Seed 12's smallest on these two prompts is 0.022 (measured with transformers, float32)
SEED = {"minicpmv4_6": "12"}
# family -> (frames per video, frame size) the cache must give it on SynthVideo (whose spec
# pins a rate: the family's reference wins; a fixed-size family gets its processor's size,
# GLM-4.1V its 2 fps in pairs at the clip's own size on the 28-pixel grid, LLaVA-NeXT-Video
# its 32 frames at the clip's own size, on no grid (its processor resizes and crops them:
# it reads clips made 230x170, on no patch grid, so that vLLM and transformers must take
# such frames; Gemma 4 alike); the Omni families the spec's frames as pinned, as the Qwen
# families, on the 28-pixel grid: Qwen3-Omni's authors' loader's, before its processor's
# 32-pixel one; MiniCPM-V 4.6 a frame per second of each clip, 4.75 s and 7 s, at the clip's
# own size; ERNIE-4.5-VL its 16-frame floor (a clip under 8 s) at the clip's own size)
BUILT = [
    "llava_onevision",
    "llava_next_video",
    "internvl",
    "glm4v",
    "gemma4",
    "qwen2_5_omni",
    "qwen3_omni_moe",
    "minicpmv4_6",
]
EXPECTED: dict[str, tuple[str | dict[str, int] | None, str]] = {
    "llava_onevision": ("32", "56x56"),
    "llava_next_video": ("32", "170x230"),
    "internvl": ("32", "56x56"),
    "glm4v": (None, "168x224"),
    "gemma4": ("32", "170x230"),
    "qwen2_5_omni": (None, "168x224"),
    "minicpmv4_6": ({"5": 1, "7": 1}, "168x224"),
    "ernie4_5_vl_moe": ("16", "170x230"),
    "qwen3_omni_moe": (None, "168x224"),
}


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    root = tmp_path_factory.mktemp("families")
    kinds = ["yes_no", "moving_shape"]
    generate(root / "synth", 1, "test", 0, families=kinds)
    generate(root / "synth-off-grid", 1, "test", 0, width=230, height=170, families=kinds)
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


def _base(world: Path, family: str) -> list[str]:
    """The flags naming the family's tiny checkpoint (built on first use) and SynthVideo."""
    model = world / family
    if not model.is_dir():
        seed = ["--seed", SEED[family]] if family in SEED else []
        _evalkit("model", "tiny", str(model), "--family", family, *seed)
    return ["--model", str(model), "--bench", "SynthVideo", "--data-root", _data(family)]


def _data(family: str) -> str:
    """The SynthVideo copy a family reads: 224x168 (on the patch grids), or 230x170 (on
    none) for a family whose processor resizes the frames itself (but MiniCPM-V 4.6: its
    seed's logit margins were measured on the 224x168 frames, see SEED)."""
    if family == "minicpmv4_6" or not FAMILIES.get(family).keeps_size:
        return "synth"
    return "synth-off-grid"


def _engine(family: str, engine: list[str] = ENGINE) -> list[str]:
    """``engine`` with the family's vLLM dtype where it has one (after ENGINE's: the last
    --dtype wins)."""
    dtype = ["--dtype", VLLM_DTYPE[family]] if engine is ENGINE and family in VLLM_DTYPE else []
    return [*engine, *dtype]


def _run(world: Path, family: str, *extra: str, engine: list[str] = ENGINE, tag: str = "") -> Path:
    base = _base(world, family)
    run_id = ["--run-id", family + tag]
    _evalkit("run", *base, "--no-progress", *run_id, *_engine(family, engine), *extra)
    return world / "runs" / (family + tag)


def _check_run(run: Path, family: str, nframes: int | None = None) -> None:
    """Each sample answered, the family's frames (its reference count, or ``nframes`` set
    by a flag) at its size, the family recorded and reported."""
    records = [json.loads(x) for x in (run / "SynthVideo.jsonl").read_text().splitlines()]
    assert len(records) == 2 and all(r["status"] == "ok" for r in records), records
    assert all(r["tokens"]["output"] >= 1 for r in records)
    seen = json.loads((run / "frames.json").read_text())["SynthVideo"]
    frames, size = EXPECTED[family]
    frames = str(nframes) if nframes is not None else frames
    assert seen["size"] == {size: 2}, seen
    if isinstance(frames, dict):
        assert seen["frames"] == frames, seen
    elif frames is not None:
        assert seen["frames"] == {frames: 2}, seen
    else:
        assert all(int(n) % 2 == 0 for n in seen["frames"]), seen
    manifest = json.loads((run / "config.json").read_text())
    assert manifest["family"]["family"] == family
    pinned = FAMILIES.get(family).qwen_terms  # the benchmark's frames, as the Qwen families
    frames_from = manifest["family"]["frames_from"]["SynthVideo"]["frames"]
    assert frames_from == ("flags" if nframes else "benchmark" if pinned else "family")
    assert main(["report", str(run)]) == 0
    report = (run / "report" / "report.md").read_text()
    assert "model family" in report and manifest["family"]["title"] in report


@pytest.mark.parametrize("family", [f for f in BUILT if f != "llava_onevision"])
def test_a_tiny_checkpoint_runs_synthvideo_to_a_report(world: Path, family: str) -> None:
    _check_run(_run(world, family), family)


def test_ernie_runs_on_the_hf_engine_and_vllm_refuses_its_transformers_format(
    world: Path,
) -> None:
    # vLLM 0.32's ERNIE-4.5-VL module reads Baidu's remote-code config and processor
    # (engine start: "'Ernie4_5_VLMoeConfig' object has no attribute 'spatial_conv_size'"):
    # evalkit refuses the checkpoint in one line before the run starts; the HF engine runs
    # it (MoE with text and vision experts, its processor drawing each frame's timestamp)
    family = "ernie4_5_vl_moe"
    _check_run(_run(world, family, engine=["--engine", "hf", "--max-tokens", "8"]), family)
    base = ["--model", family, "--bench", "SynthVideo", "--data-root", "synth"]
    done = subprocess.run(
        [sys.executable, "-m", "evalkit", "run", *base, "--no-progress", "--run-id", "ev", *ENGINE],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode != 0 and not (world / "runs" / "ev").exists()  # refused up front
    assert "vLLM 0.32 serves ERNIE-4.5-VL only as Baidu's remote-code" in done.stderr
    assert "Traceback" not in done.stderr, done.stderr[-3000:]


def test_llava_onevision_runs_on_two_replicas(world: Path) -> None:
    # its tiny checkpoint names the SigLIP tower as transformers 5 saves it: vLLM loads it
    # through evalkit's renamed view
    _check_run(_run(world, "llava_onevision", "--replicas", "2"), "llava_onevision")


@pytest.mark.parametrize("family", BUILT)
def test_a_tiny_checkpoint_sweeps_two_frame_counts(world: Path, family: str) -> None:
    # one engine for both settings (LLaVA-OneVision's never has two frame counts in one
    # encoder step: FamilySpec.one_frame_count_per_step)
    sweep = world / f"sweep-{family}"
    grid = ["--grid", "frames.nframes=4,8", "--sweep-dir", str(sweep), "--cache-workers", "1"]
    _evalkit("sweep", *_base(world, family), "--no-progress", *_engine(family), *grid)
    doc = json.loads((sweep / "sweep.json").read_text())
    assert sorted(s["values"]["frames.nframes"] for s in doc["settings"]) == [4, 8]
    for s in doc["settings"]:
        _check_run(sweep / s["run"], family, nframes=s["values"]["frames.nframes"])


@pytest.mark.parametrize("family", BUILT)
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
