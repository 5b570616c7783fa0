"""``evalkit watch``, without an engine: which folders are checkpoints, when one is whole
and settled, when it needs another engine, the watch directory's record and its curve.

The engine-backed behaviour (one warm engine, in-place loads equal to fresh runs, resume
after SIGKILL) is tests/test_watch_vllm.py."""

from __future__ import annotations

import json
import struct
from pathlib import Path

import pytest

from evalkit.errors import ConfigError
from evalkit.run.config import RunConfig
from evalkit.watch import (
    Checkpoint,
    Follower,
    Outcome,
    Settling,
    Watch,
    WatchConfig,
    candidates,
    differs,
    identity,
    not_whole,
)


def _safetensors(path: Path, values: int = 16, cut: int = 0) -> None:
    """A valid safetensors file of one float32 tensor (``cut``: bytes left off its end)."""
    header = json.dumps(
        {"w": {"dtype": "F32", "shape": [values], "data_offsets": [0, 4 * values]}}
    ).encode()
    data = struct.pack("<Q", len(header)) + header + b"\0" * (4 * values)
    path.write_bytes(data[: len(data) - cut] if cut else data)


def _checkpoint(path: Path, config: dict[str, object] | None = None, cut: int = 0) -> Path:
    path.mkdir(parents=True, exist_ok=True)
    (path / "config.json").write_text(json.dumps(config or {"model_type": "qwen2_5_vl"}))
    _safetensors(path / "model.safetensors", cut=cut)
    return path


def test_checkpoint_folders_are_found_by_name_in_step_order(tmp_path: Path) -> None:
    for name in ("checkpoint-20", "checkpoint-3", "global_step_7", "step_100", "notes", "x-1"):
        (tmp_path / name).mkdir()
    (tmp_path / "global_step_7" / "actor" / "huggingface").mkdir(parents=True)
    (tmp_path / ".tmp-checkpoint-30").mkdir()  # being written, renamed into place when done
    (tmp_path / "checkpoint-40.json").write_text("{}")  # a file, not a folder
    found = candidates(tmp_path)
    assert [(c.step, c.name) for c in found] == [
        (3, "checkpoint-3"),
        (7, "global_step_7"),
        (20, "checkpoint-20"),
        (100, "step_100"),
    ]
    assert found[1].path == tmp_path / "global_step_7" / "actor" / "huggingface"  # verl


@pytest.mark.parametrize(
    ("make", "why"),
    [
        (lambda p: p.mkdir(), "no config.json yet"),
        (lambda p: (p.mkdir(), (p / "config.json").write_text('{"model_')), "not whole yet"),
        (lambda p: _checkpoint(p, cut=10), "model.safetensors is 125 of 135 bytes"),
        (lambda p: _checkpoint(p, cut=100), "is 35 bytes, its header alone 71"),
    ],
    ids=["empty", "config-cut", "weights-cut", "header-cut"],
)
def test_a_half_written_checkpoint_is_not_whole(tmp_path: Path, make: object, why: str) -> None:
    folder = tmp_path / "checkpoint-1"
    make(folder)  # type: ignore[operator]
    reason = not_whole(folder)
    assert reason is not None and why in reason


def test_a_sharded_checkpoint_waits_for_every_shard_its_index_names(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path / "checkpoint-1")
    (folder / "model.safetensors").rename(folder / "model-00001-of-00002.safetensors")
    index = {
        "weight_map": {
            "a": "model-00001-of-00002.safetensors",
            "b": "model-00002-of-00002.safetensors",
        }
    }
    (folder / "model.safetensors.index.json").write_text(json.dumps(index))
    assert not_whole(folder) == "1 of 2 weight files not written yet"
    _safetensors(folder / "model-00002-of-00002.safetensors")
    assert not_whole(folder) is None


def test_a_whole_checkpoint_is_read_only_once_it_has_settled(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path / "checkpoint-1")
    ck = Checkpoint(1, folder.name, folder)
    now = [folder.stat().st_mtime + 1.0]  # its files were written a second ago
    settling = Settling(5.0, clock=lambda: now[0])
    assert (settling.ready(ck) or "").startswith("settling (1 of 5 s unchanged)")
    now[0] += 3
    assert settling.ready(ck) is not None
    now[0] += 2  # five seconds since the last write, the same files seen since
    assert settling.ready(ck) is None
    old = Settling(5.0, clock=lambda: folder.stat().st_mtime + 60)
    assert old.ready(ck) is None  # written long ago (a restarted watch): read at first sight


def test_a_file_that_changes_while_settling_starts_the_wait_again(tmp_path: Path) -> None:
    folder = _checkpoint(tmp_path / "checkpoint-1")
    ck = Checkpoint(1, folder.name, folder)
    now = [folder.stat().st_mtime + 4.0]
    settling = Settling(5.0, clock=lambda: now[0])
    assert settling.ready(ck) is not None
    (folder / "tokenizer.json").write_text("{}")  # the trainer writes more files
    now[0] = (folder / "tokenizer.json").stat().st_mtime + 4.0
    assert settling.ready(ck) is not None
    now[0] += 1.5
    assert settling.ready(ck) is None


def test_another_architecture_or_tokenizer_needs_another_engine(tmp_path: Path) -> None:
    base = _checkpoint(tmp_path / "a", {"model_type": "qwen2_5_vl", "hidden_size": 64})
    (base / "tokenizer.json").write_text('{"v": 1}')
    same = _checkpoint(
        tmp_path / "b",
        {"model_type": "qwen2_5_vl", "hidden_size": 64, "transformers_version": "5.19.0"},
    )
    assert differs(identity(base), identity(same)) is None  # no tokenizer: the engine's own
    wider = _checkpoint(tmp_path / "c", {"model_type": "qwen2_5_vl", "hidden_size": 128})
    assert differs(identity(base), identity(wider)) == (
        "another architecture (config.json differs in hidden_size)"
    )
    (same / "tokenizer.json").write_text('{"v": 2}')
    assert differs(identity(base), identity(same)) == "another tokenizer"


def _watch(tmp_path: Path, **run: object) -> Watch:
    (tmp_path / "ckpts").mkdir(exist_ok=True)
    cfg = WatchConfig(ckpt_dir=str(tmp_path / "ckpts"), watch_dir=str(tmp_path / "w"))
    return Watch.open(cfg, RunConfig(model="m", bench=["SynthVideo"], **run))  # type: ignore[arg-type]


def test_a_watch_directory_is_continued_only_with_its_own_settings(tmp_path: Path) -> None:
    watch = _watch(tmp_path)
    watch.outcomes[10] = Outcome(10, "checkpoint-10", "p", "failed", reason="did not load: x")
    watch.write()
    again = _watch(tmp_path)
    assert again.outcomes[10].status == "failed"  # recorded once: not tried again
    with pytest.raises(ConfigError, match=r"holds a watch of other settings \(differs in: limit\)"):
        _watch(tmp_path, limit=4)
    # how many replicas evaluate it changes its speed, never its records
    assert _watch(tmp_path, replicas=2, replica_restarts=1).outcomes[10].status == "failed"


def test_each_checkpoint_runs_in_its_own_run_directory_resumed_after_a_kill(
    tmp_path: Path,
) -> None:
    watch = _watch(tmp_path)
    ck = Checkpoint(20, "checkpoint-20", tmp_path / "ckpts" / "checkpoint-20")
    cfg = watch.settings_for(ck)
    assert (cfg.model, cfg.runs_dir, cfg.run_id, cfg.resume) == (
        str(ck.path),
        str(watch.path),
        "step-20",
        None,
    )
    (watch.path / "step-20").mkdir(parents=True)
    (watch.path / "step-20" / "config.json").write_text("{}")  # killed mid-run
    assert watch.settings_for(ck).resume == str(watch.path / "step-20")


def test_the_curve_page_plots_each_benchmark_and_names_the_best(tmp_path: Path) -> None:
    from evalkit.reports.curve import sections, write_page

    watch = _watch(tmp_path)
    for step, value in ((0, 40.0), (10, 55.0), (20, 50.0)):
        for bench, shift in (("A", 0.0), ("B", 10.0)):
            watch.curve.append(
                {
                    "step": step,
                    "benchmark": bench,
                    "headline": value + shift,
                    "stderr": 2.0,
                    "ci95": [value + shift - 3.92, value + shift + 3.92],
                    "samples": 10,
                    "wall_s": 1.0,
                    "checkpoint": f"checkpoint-{step}",
                    "official": True,
                }
            )
    watch.outcomes[30] = Outcome(30, "checkpoint-30", "p", "failed", reason="did not load: x")
    watch.write()
    assert watch.best()["A"]["step"] == 10 and watch.best()["B"]["headline"] == 65.0
    secs = sections(watch.path, figures=False)
    assert [s.title for s in secs] == ["A", "B", "checkpoints not evaluated"]
    assert secs[0].rows[1] == [
        "10",
        "checkpoint-10",
        "55.00 ± 2.00",
        "[51.08, 58.92]",
        "10",
        "1.0",
        "best",
    ]
    assert "best checkpoint: step 10 (checkpoint-10): 55.00" in secs[0].notes
    page = write_page(watch.path).read_text()
    assert page.count("data:image/png;base64,") == 2 and "did not load: x" in page


def test_watch_refuses_what_it_cannot_do_in_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalkit.cli.main import main

    (tmp_path / "ckpts").mkdir()
    base = ["watch", str(tmp_path / "ckpts"), "--bench", "SynthVideo"]
    cases = [
        (["watch", str(tmp_path / "none")], "CKPT_DIR"),
        ([*base, "--model-base", str(tmp_path)], "--model-base"),
        ([*base, "--engine", "openai"], "--engine openai: a watch loads each checkpoint"),
        ([*base, "--loggers", "tensorbard"], "--loggers"),
    ]
    for argv, said in cases:
        assert main(argv) == 2
        err = capsys.readouterr().err.strip().splitlines()
        assert len(err) == 1 and said in err[0], err


def test_the_curve_page_shows_its_plots_in_a_browser(tmp_path: Path) -> None:
    """Headless Chromium: every plot decodes, the tables fit the page; a screenshot is
    kept beside the page (``curve.png``)."""
    import re

    from evalkit.reports.curve import write_page
    from tests._browser import dump_dom, page_layout

    watch = _watch(tmp_path)
    for step, value in ((0, 31.0), (10, 44.0), (20, 52.0), (30, 47.5)):
        watch.curve.append(
            {
                "step": step,
                "benchmark": "Video-MME",
                "headline": value,
                "stderr": 2.5,
                "ci95": [value - 4.9, value + 4.9],
                "samples": 300,
                "wall_s": 12.0,
                "checkpoint": "base" if step == 0 else f"checkpoint-{step}",
                "official": True,
            }
        )
    watch.write()
    page = write_page(watch.path)
    probe = page.with_name("images.html")
    script = (
        "<script>window.addEventListener('load',()=>{const i=[...document.images];"
        "document.body.setAttribute('data-img',[i.length,i.filter(x=>x.naturalWidth>0).length]"
        ".join(','))})</script>"
    )
    probe.write_text(page.read_text().replace("</body>", script + "</body>"))
    found = re.search(r'data-img="(\d+),(\d+)"', dump_dom(probe))
    assert found and found.groups() == ("1", "1")  # one plot, decoded
    layout = page_layout(page, watch.path / "curve.png", width=1100, height=1400)
    assert layout["tables"] == 1 and layout["table_right"] <= layout["page"]
    assert (watch.path / "curve.png").stat().st_size > 10_000


def test_a_checkpoint_that_fails_to_load_is_recorded_and_the_engine_restarts(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Scheduling only (a scripted engine that loads weights): a failed in-place load is the
    checkpoint's recorded failure, never the next one's mixed weights; another architecture
    restarts the engine with one line; headlines reach the scalar sinks at their step."""
    import asyncio
    from dataclasses import dataclass, field

    from tests._synth_world import synth_world
    from tests.scripted_engine import ScriptedEngine

    @dataclass
    class Reloading(ScriptedEngine):
        loads: list[str] = field(default_factory=list)

        async def load_weights(self, path: str) -> None:
            if "checkpoint-20" in path:
                raise RuntimeError("size mismatch for lm_head.weight")
            self.loads.append(Path(path).name)

    world = synth_world(tmp_path, monkeypatch, 1)
    started: list[str] = []

    def make_engine(plan: object) -> Reloading:
        started.append(Path(plan.config.model).name)  # type: ignore[attr-defined]
        return Reloading(prefill_s=0, decode_s=0)

    monkeypatch.setattr("evalkit.run.execute.make_engine", make_engine)
    arch = {"model_type": "qwen2_5_vl"}
    ckpts = [
        _checkpoint(world / "ckpts" / f"checkpoint-{s}", arch if s != 40 else {**arch, "x": 1})
        for s in (10, 20, 30, 40)
    ]
    logged: list[tuple[int, dict[str, object]]] = []

    class Sink:
        def log(self, step: int, values: dict[str, object]) -> None:
            logged.append((step, values))

    cfg = WatchConfig(ckpt_dir=str(world / "ckpts"), watch_dir=str(world / "w"), settle_s=0)
    run = RunConfig(model="m", bench=["SynthVideo"], data_root=str(world / "synth"))
    said: list[str] = []
    follower = Follower(Watch.open(cfg, run), say=said.append, scalars=Sink())

    async def follow_all() -> list[Outcome]:
        try:
            return [await follower.evaluate(Checkpoint(int(c.name[11:]), c.name, c)) for c in ckpts]
        finally:
            await follower.close()

    outcomes = asyncio.run(follow_all())
    assert [o.status for o in outcomes] == ["done", "failed", "done", "done"]
    assert outcomes[1].reason == "did not load: size mismatch for lm_head.weight"
    assert [o.loaded for o in (outcomes[0], outcomes[2], outcomes[3])] == [
        "engine started",
        "engine restarted (the last load failed)",
        "engine restarted (another architecture (config.json differs in x))",
    ]
    assert started == ["checkpoint-10", "checkpoint-30", "checkpoint-40"]
    assert said == [
        "step 30: restarting the engine (the last load failed)",
        "step 40: restarting the engine (another architecture (config.json differs in x))",
    ]
    assert not (world / "w" / "step-20").exists()  # nothing ran on mixed weights
    assert [step for step, _ in logged] == [10, 30, 40] and "eval/SynthVideo" in logged[0][1]
    again = Watch.open(cfg, run)  # recorded: a restarted watch does not try step 20 again
    assert again.outcomes[20].status == "failed"


def test_latest_only_evaluates_the_newest_and_records_the_rest_as_skipped(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import asyncio

    from tests._synth_world import synth_world
    from tests.scripted_engine import ScriptedEngine

    world = synth_world(tmp_path, monkeypatch, 1)
    monkeypatch.setattr(
        "evalkit.run.execute.make_engine", lambda plan: ScriptedEngine(prefill_s=0, decode_s=0)
    )
    for step in (1, 2, 3):
        _checkpoint(world / "ckpts" / f"checkpoint-{step}")
    cfg = WatchConfig(
        ckpt_dir=str(world / "ckpts"),
        watch_dir=str(world / "w"),
        settle_s=0,
        once=True,
        latest_only=True,
    )
    run = RunConfig(model="m", bench=["SynthVideo"], data_root=str(world / "synth"))
    said: list[str] = []
    watch = Watch.open(cfg, run)
    from evalkit.watch import follow

    assert asyncio.run(follow(Follower(watch, say=said.append))) == 1
    assert {s: o.status for s, o in watch.outcomes.items()} == {
        1: "skipped",
        2: "skipped",
        3: "done",
    }
    assert said[0] == "--latest-only: skipped steps 1, 2"
    assert watch.outcomes[1].reason == "--latest-only: step 3 was ready too"


def test_a_terminated_watch_says_how_to_go_on() -> None:
    """A watch has no --resume: its SIGTERM line says to start it again."""
    import signal

    from evalkit.engines.lifecycle import Termination

    term = Termination()
    term.signum = signal.SIGTERM
    assert term.summary("watch").endswith("(start the same watch again to go on)")
    assert term.summary("sweep").endswith("(go on with `evalkit sweep --resume SWEEP_DIR`)")
    assert term.summary("run").endswith("(resume the run with --resume)")
