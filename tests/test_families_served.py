"""A served model of any family through the openai engine (a scripted OpenAI-compatible
server, no vLLM): ``--engine-opt family=NAME`` makes the run cache frames on the family's
grid and send its processor settings, and records the family; without it a served model is
fed as a Qwen-VL family (the control)."""

from __future__ import annotations

import base64
import io
import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit.cli.main import main
from evalkit.synthvideo import generate
from tests._openai_server import Script, serve


@pytest.fixture(scope="module")
def synth(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("served")
    generate(root / "synth", 1, "test", 0, families=["yes_no", "moving_shape"])
    return root


@pytest.fixture()
def server() -> Iterator[tuple[str, Script]]:
    script = Script()
    with serve(script) as url:
        yield url, script


def _frames(body: dict[str, object]) -> list[tuple[int, int]]:
    from PIL import Image

    content = body["messages"][-1]["content"]  # type: ignore[index]
    (video,) = [c for c in content if c["type"] == "video_url"]
    data = video["video_url"]["url"].partition(",")[2]
    return [Image.open(io.BytesIO(base64.b64decode(p))).size for p in data.split(",")]


def _run(synth: Path, url: str, run_id: str, *opts: str) -> Path:
    argv = ["run", "--model", "served", "--engine", "openai", "--bench", "SynthVideo"]
    argv += ["--data-root", str(synth / "synth"), "--no-progress", "--runs-dir", str(synth)]
    argv += ["--run-id", run_id, "--cache-root", str(synth / "cache"), "--max-tokens", "8"]
    argv += ["--engine-opt", f"base_url={url}", "--engine-opt", "max_retries=0", *opts]
    assert main(argv) == 0
    return synth / run_id


def test_a_served_family_gets_its_frames_and_settings_and_is_recorded(
    synth: Path, server: tuple[str, Script]
) -> None:
    url, script = server
    run = _run(synth, url, "llava", "--engine-opt", "family=llava_onevision")
    assert len(script.bodies) == 2
    for body in script.bodies:
        sizes = _frames(body)
        assert len(sizes) == 32 and set(sizes) == {(384, 384)}  # the reference, 384 x 384
        assert body["mm_processor_kwargs"] == {"do_sample_frames": False, "do_resize": False}
    family = json.loads((run / "config.json").read_text())["family"]
    assert family["family"] == "llava_onevision" and family["size"] == [384, 384]
    engine = json.loads((run / "config.json").read_text())["result_config"]["engine_options"]
    assert engine["family"] == "llava_onevision"  # the fingerprint says which family was fed


def test_control_a_served_model_without_a_family_is_fed_as_qwen(
    synth: Path, server: tuple[str, Script]
) -> None:
    url, script = server
    run = _run(synth, url, "plain")
    sizes = {s for body in script.bodies for s in _frames(body)}
    assert (384, 384) not in sizes and all(w % 28 == 0 and h % 28 == 0 for w, h in sizes)
    assert json.loads((run / "config.json").read_text())["family"] is None


def test_an_unknown_served_family_is_one_line_with_a_suggestion(
    synth: Path, server: tuple[str, Script], capsys: pytest.CaptureFixture[str]
) -> None:
    url, _ = server
    argv = ["run", "--model", "served", "--engine", "openai", "--bench", "SynthVideo"]
    argv += ["--data-root", str(synth / "synth"), "--no-progress", "--runs-dir", str(synth)]
    argv += ["--engine-opt", f"base_url={url}", "--engine-opt", "family=llava_onevison"]
    assert main(argv) == 2
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "did you mean 'llava_onevision'" in err[0], err
