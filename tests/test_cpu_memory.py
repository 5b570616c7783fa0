"""vLLM on a CPU starts where memory is shared: evalkit sizes its KV cache to what is free
(or refuses in one line, naming the value that fits) instead of vLLM's default share of
0.9 of the machine, and a start that fails anyway names its root cause on the terminal.

The light tests decide on a given memory node (the issue's box: 23.54 GiB, 19.0 free);
the heavy ones run ``evalkit run`` on the tiny model through the real vLLM CPU engine
while another process holds enough memory that vLLM's default share no longer fits."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit.engines.cpu_memory import DEFAULT_KV_GIB, KV_ENV, CpuAsk, fit
from evalkit.engines.logs import root_cause
from evalkit.errors import ConfigError

GIB = 1024**3
BOX = (int(23.54 * GIB), int(19.0 * GIB))
WEIGHTS = int(0.5 * GIB)


@pytest.fixture
def no_kv_env(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(KV_ENV, raising=False)


def test_vllms_default_share_does_not_fit_the_box_but_evalkits_kv_cache_does(
    no_kv_env: None,
) -> None:
    assert not CpuAsk(0.9, 1, *BOX).fits  # vLLM alone: 21.19 GiB asked of 19.0 free
    options = fit({"dtype": "float32"}, WEIGHTS, node=BOX)
    assert options == {"dtype": "float32", "kv_cache_memory_bytes": int(DEFAULT_KV_GIB * GIB)}


def test_short_memory_gets_a_smaller_kv_cache_in_quarters(no_kv_env: None) -> None:
    options = fit({}, WEIGHTS, node=(BOX[0], int(4.0 * GIB)))  # 4 - 0.5 - 1.5 headroom
    assert options["kv_cache_memory_bytes"] == 2 * GIB
    options = fit({}, WEIGHTS, engines=2, node=(BOX[0], int(4.6 * GIB)))  # (4.6-1-1.5)/2
    assert options["kv_cache_memory_bytes"] == GIB


def test_too_little_memory_is_one_line_before_the_engine(no_kv_env: None) -> None:
    with pytest.raises(ConfigError) as err:
        fit({}, WEIGHTS, node=(BOX[0], int(2.1 * GIB)))
    said = str(err.value)
    assert "\n" not in said and "2.10 GiB available is too little" in said
    assert "0.50 GiB" in said and KV_ENV in said


def test_a_share_the_user_set_is_checked_and_refused_with_the_value_that_fits(
    no_kv_env: None,
) -> None:
    with pytest.raises(ConfigError) as err:
        fit({"gpu_memory_utilization": 0.9}, WEIGHTS, node=BOX)
    said = str(err.value)
    assert "will reserve 21.19 GiB" in said and "19.00 GiB available" in said
    assert "set --engine-opt gpu_memory_utilization <= 0.8" in said and "\n" not in said
    ok = {"gpu_memory_utilization": 0.5}
    assert fit(ok, WEIGHTS, node=BOX) == ok  # one that fits is kept as given
    with pytest.raises(ConfigError, match=r"the weights alone take 0\.50 GiB"):
        fit({"gpu_memory_utilization": 0.02}, WEIGHTS, node=BOX)


def test_a_kv_cache_fixed_by_the_user_is_kept_or_refused(
    monkeypatch: pytest.MonkeyPatch, no_kv_env: None
) -> None:
    fixed = {"kv_cache_memory_bytes": 2 * GIB}
    assert fit(fixed, WEIGHTS, node=BOX) == fixed
    with pytest.raises(ConfigError, match=r"kv_cache_memory_bytes=\d+ asks 30\.00 GiB"):
        fit({"kv_cache_memory_bytes": 30 * GIB}, WEIGHTS, node=BOX)
    monkeypatch.setenv(KV_ENV, "1")
    assert fit({}, WEIGHTS, node=BOX) == {}  # vLLM takes the variable itself
    monkeypatch.setenv(KV_ENV, "40")
    with pytest.raises(ConfigError) as err:
        fit({}, WEIGHTS, node=BOX)
    assert f"{KV_ENV}=40 asks 40.00 GiB" in str(err.value)
    assert "set it to 17 GiB or less" in str(err.value)  # 19 - 0.5 - 1.5


def test_the_root_cause_is_the_engine_process_exception_not_the_relay(tmp_path: Path) -> None:
    log = tmp_path / "output.log"
    core = "(EngineCore pid=28695) ERROR 12-06 15:38:10 [core.py:1510] "
    log.write_text(
        "some warning\n"
        f"{core}Traceback (most recent call last):\n"
        f"{core}    raise ValueError(\n"
        f"{core}ValueError: No available memory for the cache blocks.\n"
        "Traceback (most recent call last):\n"
        "    raise ValueError(\n"
        "ValueError: No available memory for the cache blocks.\n"
        "RuntimeError: Engine core initialization failed. See root cause above. Failed core "
        "proc(s): {}\n"
    )
    assert root_cause(log) == ["ValueError: No available memory for the cache blocks."]
    assert root_cause(tmp_path / "none.log") == []


# -- the real engine -------------------------------------------------------------------


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    pytest.importorskip("vllm")
    from evalkit.synthvideo import generate
    from evalkit.tiny_checkpoint import build_tiny_model

    root = tmp_path_factory.mktemp("cpu-memory")
    build_tiny_model(root / "model", "qwen2_5_vl", seed=0)
    generate(root / "synth", 1, "test", 0, families=["yes_no"])
    return root


@pytest.fixture
def memory_held() -> Iterator[None]:
    """Another process holds enough memory that vLLM's default 0.9 share no longer fits."""
    from evalkit.engines.cpu_memory import memory_node

    total, available = memory_node()
    hold = max(int(available - 0.9 * total) + GIB // 2, GIB // 2)
    holder = subprocess.Popen(
        [sys.executable, "-c", _HOLD, str(hold)], stdout=subprocess.PIPE, text=True
    )
    try:
        assert holder.stdout is not None and holder.stdout.readline().strip() == "held"
        assert not CpuAsk(0.9, 1, *memory_node()).fits
        yield
    finally:
        holder.kill()
        holder.wait()


_HOLD = (
    "import sys, time, numpy as np\n"
    "a = np.ones(int(sys.argv[1]), dtype=np.uint8)\n"  # every page written: really held
    "print('held', flush=True)\n"
    "time.sleep(600)\n"
)


def _run(world: Path, run_id: str, *flags: str) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k != KV_ENV}
    cmd = [sys.executable, "-m", "evalkit", "run", "--model", str(world / "model")]
    cmd += ["--bench", "SynthVideo", "--data-root", str(world / "synth"), "--dtype", "float32"]
    cmd += ["--engine-opt", "enforce_eager=true", "--max-model-len", "2048", "--max-tokens", "4"]
    cmd += ["--runs-dir", str(world / "runs"), "--run-id", run_id, "--no-progress"]
    cmd += ["--cache-root", str(world / "cache"), *flags]
    return subprocess.run(cmd, env=env, capture_output=True, text=True, timeout=600)


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_a_run_starts_without_the_kv_variable_while_memory_is_held(
    world: Path, memory_held: None
) -> None:
    done = _run(world, "fitted")
    assert done.returncode == 0, done.stderr[-2000:]
    store = (world / "runs" / "fitted" / "SynthVideo.jsonl").read_text().splitlines()
    assert store and all('"status": "ok"' in line for line in store)


@pytest.mark.heavy
def test_a_share_that_does_not_fit_is_refused_in_one_line_before_the_engine(
    world: Path, memory_held: None
) -> None:
    done = _run(world, "share", "--engine-opt", "gpu_memory_utilization=0.9")
    assert done.returncode == 2
    err = done.stderr.strip().splitlines()
    assert len(err) == 1 and "it does not fit; set --engine-opt gpu_memory_utilization <=" in err[0]
    log = world / "runs" / "share" / "output.log"
    assert "EngineCore" not in (log.read_text() if log.exists() else "")  # never started


@pytest.mark.heavy
@pytest.mark.timeout(600)
def test_an_engine_that_fails_to_start_names_its_root_cause_on_the_terminal(world: Path) -> None:
    done = _run(world, "tiny-kv", "--engine-opt", "kv_cache_memory_bytes=100000")
    assert done.returncode == 2
    err = done.stderr.strip().splitlines()
    assert len(err) == 1
    assert (
        "the engine's output says: ValueError: No available memory for the cache blocks" in (err[0])
    )
