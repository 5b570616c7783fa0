"""Replicas on a local Ray instance of this module's own, serving through the OpenAI client.

``evalkit sweep --replicas N``: the settings' plans on one set of replicas, one work queue
leasing every setting's samples; each setting's run directory equals the one ``evalkit
run`` writes in process, each sample recorded once, and a resumed sweep finishes the runs
without duplicates. ``evalkit run --replicas N``: the videos are decoded into the frame
cache while the replicas' engines start.

The replicas are the real actors (``evalkit.scale.replica.Replica``) with the real OpenAI
client engine, talking to a scripted server on 127.0.0.1 whose reply is a function of the
request's messages (frames and prompt): a setting's frames or prompt reaching the wrong
run would change its records."""

from __future__ import annotations

import hashlib
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("ray")
pytest.importorskip("httpx")

from evalkit.cli.main import main
from evalkit.scale import driver
from tests._distributed import local_ray
from tests._openai_server import Script, serve
from tests._synth_world import synth_world

pytestmark = pytest.mark.heavy

GRID = ["--grid", "frames.nframes=2,4", "--grid", "prompt.variant=plain,thinking"]


@pytest.fixture(scope="module")
def ray_local() -> Iterator[Any]:
    """A Ray instance of this module's own (never a cluster already on the machine)."""
    with local_ray(4) as ray:
        yield ray


def _answer(body: dict[str, Any]) -> str:
    """yes or no, from the request's messages (its frames and prompt) alone."""
    digest = hashlib.sha256(json.dumps(body["messages"], sort_keys=True).encode()).digest()
    return "yes" if digest[0] % 2 else "no"


def _lines(run: Path) -> list[dict[str, Any]]:
    return [json.loads(x) for x in (run / "SynthVideo.jsonl").read_text().splitlines()]


def _records(run: Path) -> dict[str, dict[str, Any]]:
    out = {}
    for r in _lines(run):
        r.pop("timings", None)
        r.pop("replica", None)
        out[r["id"]] = r
    return out


def _fingerprint(run: Path) -> Any:
    return json.loads((run / "config.json").read_text())["fingerprint"]


@pytest.mark.timeout(600)
def test_a_sweep_on_two_replicas_writes_each_run_once_as_evalkit_run_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ray_local: Any
) -> None:
    world = synth_world(tmp_path, monkeypatch, 4)
    script = Script(answer=_answer)
    with serve(script) as url:
        base = ["--model", "served", "--engine", "openai", "--engine-opt", f"base_url={url}"]
        base += ["--bench", "SynthVideo", "--data-root", str(world / "synth"), "--no-progress"]
        base += ["--cache-workers", "1"]
        sweep_dir = world / "sw"
        flags = [*base, "--cache-root", str(world / "cache"), *GRID, "--replicas", "2"]
        assert main(["sweep", *flags, "--sweep-dir", str(sweep_dir)]) == 0
        doc = json.loads((sweep_dir / "sweep.json").read_text())
        assert len(doc["settings"]) == 4
        stamped: set[str] = set()
        for s in doc["settings"]:
            run = sweep_dir / s["run"]
            ids = [r["id"] for r in _lines(run)]
            assert len(ids) == len(set(ids)) > 1  # each sample recorded once
            stamped |= {r["replica"] for r in _lines(run)}
            startup = json.loads((run / "startup.json").read_text())
            assert startup["replicas"] == 2
        assert stamped == {"r0", "r1"}  # both replicas served the settings' samples
        asked = len(script.bodies)
        assert asked == sum(len(_lines(sweep_dir / s["run"])) for s in doc["settings"])

        # the same settings as separate in-process runs: the same runs
        for s in doc["settings"]:
            n, variant = s["values"]["frames.nframes"], s["values"]["prompt.variant"]
            argv = ["run", *base, "--cache-root", str(world / "cache2"), "--run-id", s["run"]]
            argv += ["--runs-dir", str(world / "runs"), "--frames-nframes", str(n)]
            argv += ["--variant", variant]
            assert main(argv) == 0
            swept, alone = sweep_dir / s["run"], world / "runs" / s["run"]
            assert _fingerprint(swept) == _fingerprint(alone)
            assert _records(swept) == _records(alone)
            # the replicas' frame counts reach this setting's run, not another's
            assert json.loads((swept / "frames.json").read_text()) == json.loads(
                (alone / "frames.json").read_text()
            )
        answers = {r["prediction"] for s in doc["settings"] for r in _lines(sweep_dir / s["run"])}
        assert answers == {"yes", "no"}  # the reply depends on the request: a real check

        # stopped mid-way: two stores cut back to their first record; resumed on replicas
        expected = {s["run"]: _records(sweep_dir / s["run"]) for s in doc["settings"]}
        for s in doc["settings"][:2]:
            store = sweep_dir / s["run"] / "SynthVideo.jsonl"
            store.write_text(store.read_text().splitlines()[0] + "\n")
        before = len(script.bodies)
        assert main(["sweep", "--resume", str(sweep_dir), "--no-progress"]) == 0
        for s in doc["settings"]:
            run = sweep_dir / s["run"]
            ids = [r["id"] for r in _lines(run)]
            assert len(ids) == len(set(ids))
            assert _records(run) == expected[s["run"]]
        redone = sum(len(expected[s["run"]]) - 1 for s in doc["settings"][:2])
        assert len(script.bodies) - before == redone  # only the cut samples ran again


@pytest.mark.timeout(300)
def test_run_on_replicas_decodes_the_videos_while_the_replicas_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, ray_local: Any
) -> None:
    """The replicas' start is made to last until every video is in the frame cache (or
    60 s): with the warm-up they find every frame there; without it nothing decodes
    while they start."""
    world = synth_world(tmp_path, monkeypatch, 3)
    cache = world / "cache"
    videos = len(list((world / "synth").rglob("*.mp4")))
    assert videos > 2
    seen: list[int] = []
    real = driver.start_replicas

    def slow_start(*args: Any, **kwargs: Any) -> Any:
        deadline = time.monotonic() + 60
        while len(list(cache.rglob("*.safetensors"))) < videos and time.monotonic() < deadline:
            time.sleep(0.1)
        seen.append(len(list(cache.rglob("*.safetensors"))))
        return real(*args, **kwargs)

    monkeypatch.setattr(driver, "start_replicas", slow_start)
    with serve(Script(answer=_answer)) as url:
        argv = ["run", "--model", "served", "--engine", "openai", "--engine-opt"]
        argv += [f"base_url={url}", "--bench", "SynthVideo", "--data-root", str(world / "synth")]
        argv += ["--cache-root", str(cache), "--cache-workers", "2", "--no-progress"]
        argv += ["--replicas", "2", "--runs-dir", str(world / "runs"), "--run-id", "r"]
        assert main(argv) == 0
    assert seen == [videos]  # every video decoded while the replicas started
    assert len(_lines(world / "runs" / "r")) == videos  # one sample per video


@pytest.mark.timeout(300)
def test_a_replica_engine_that_does_not_start_is_one_line_naming_why(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    ray_local: Any,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """A checkpoint folder without its processor files (as trainers often save them): the
    replicas' vLLM cannot start; the run says so in one line (not Ray's remote traceback),
    naming the replica, the backend's words and the log with the traceback."""
    pytest.importorskip("vllm")
    world = synth_world(tmp_path, monkeypatch, 1)  # ckpt/: config.json alone
    argv = ["run", "--model", str(world / "ckpt"), "--bench", "SynthVideo", "--no-progress"]
    argv += ["--data-root", str(world / "synth"), "--cache-root", str(world / "cache")]
    argv += ["--replicas", "2", "--runs-dir", str(world / "runs"), "--run-id", "bad"]
    assert main(argv) == 2
    lines = [x for x in capsys.readouterr().err.splitlines() if x.strip()]
    assert len(lines) == 1, lines
    assert "replica r" in lines[0] and "the vllm engine did not start" in lines[0]
    assert "preprocessor_config.json" in lines[0]
    assert lines[0].endswith(f"its output and traceback: {world / 'runs' / 'bad' / 'output.log'}")
    assert "Traceback" in (world / "runs" / "bad" / "output.log").read_text()


class _DiesInSetup:
    def setup(self) -> None:
        import os

        os._exit(1)  # as a replica whose engine process takes it down while starting


@pytest.mark.timeout(120)
def test_a_replica_that_dies_while_its_engine_starts_is_one_line(ray_local: Any) -> None:
    from evalkit.errors import EngineStartError
    from evalkit.scale.cluster import _set_up

    actor = ray_local.remote(num_cpus=0)(_DiesInSetup).remote()
    with pytest.raises(EngineStartError) as caught:
        _set_up(ray_local, "r7", actor.setup.remote())
    message = str(caught.value)
    assert message.startswith("replica r7 died while its engine started (")
    assert message.endswith("its output is in the run's output.log")
    assert "\n" not in message
