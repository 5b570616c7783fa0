"""A bad invocation of any subcommand ends in one line naming the argument or file, exit
status 2, no traceback, and no new run directory.

Every case runs the real entry point (``evalkit.cli.main:main``) in-process on a small
world of files built here: SynthVideo annotations, a checkpoint folder, a scored run.
"""

from __future__ import annotations

import argparse
import json
import shlex
from pathlib import Path

import pytest

from evalkit.cli.main import main
from evalkit.cli.score import score_predictions
from evalkit.synthvideo import generate

SYNTH = "--bench SynthVideo --data-root synth --no-progress"
RUN = f"run --model ckpt {SYNTH}"

# (argv, what the one line must name). Grouped by subcommand; each is a mistake a person
# makes: a typo in a path, a file where a folder goes, a value out of range, a flag cut
# short, a file in the wrong encoding.
CASES: list[tuple[str, str]] = [
    # run: the model
    (f"run --model nosuch/dir/ckpt {SYNTH}", "--model nosuch/dir/ckpt"),
    (f"run --model ./missing {SYNTH}", "--model ./missing"),
    (f"run --model afile {SYNTH}", "--model afile"),
    (f"run --model emptydir {SYNTH}", "config.json"),
    ("run " + SYNTH, "--model"),
    # run: data and folders
    ("run --model ckpt --data missing.json --no-progress", "--data missing.json"),
    ("run --model ckpt --data latin1.json --no-progress", "latin1.json"),
    ("run --model ckpt --data notjson.json --no-progress", "notjson.json"),
    ("run --model ckpt --data emptydir --no-progress", "--data emptydir"),
    ("run --model ckpt --bench SynthVideo --data-root missing --no-progress", "--data-root"),
    ("run --model ckpt --bench SynthVideo --data-root afile --no-progress", "--data-root afile"),
    (f"{RUN} --video-root missing", "--video-root missing"),
    (f"{RUN} --cache-root afile", "--cache-root afile"),
    ("run --model ckpt --bench SynthVideo --no-progress --data-root emptydir", "SynthVideo"),
    # run: benchmarks and values
    ("run --model ckpt --bench SynthVideo:nosuch --data-root synth", "'nosuch'"),
    ("run --model ckpt --bench NoSuchBench --data-root synth", "NoSuchBench"),
    (f"{RUN} --limit 0", "--limit"),
    (f"{RUN} --limit -3", "--limit"),
    (f"{RUN} --limit three", "--limit"),
    (f"{RUN} --max-tokens 0", "--max-tokens"),
    (f"{RUN} --cache-workers 0", "--cache-workers"),
    (f"{RUN} --frames-fps -1", "fps"),
    (f"{RUN} --engine nosuch", "--engine"),
    (f"{RUN} --engine-opt oops", "--engine-opt 'oops'"),
    (f"{RUN} --engine-opt no_such_knob=1", "no_such_knob"),
    (f"{RUN} --max-num-seqs many", "--max-num-seqs"),
    # sweep: the grid
    (f"sweep --model ckpt {SYNTH} --grid frames.nframe=2,4", "frames.nframe"),
    (f"sweep --model ckpt {SYNTH} --grid prompt.variant=plain,loud", "prompt.variant=loud"),
    (f"sweep --model ckpt {SYNTH} --grid frames.nframes=0", "frames.nframes=0"),
    (f"sweep --model ckpt {SYNTH} --grid frames.nframes=2,4 --zip --grid frames.fps=1", "--zip"),
    (f"sweep --model ckpt {SYNTH}", "--grid"),
    ("sweep --resume emptydir", "--resume emptydir"),
    (f"sweep --model ckpt {SYNTH} --grid frames.nframes=2 --replicas 2 --mode sync", "--mode sync"),
    (f"sweep --model ckpt {SYNTH} --grid frames.nframes=2,2", "listed twice"),
    (f"sweep --model ckpt {SYNTH} --grid frames.min_pixels=99999999", "min_pixels"),
    # watch: the folder, the base model, what a watch cannot do
    (f"watch missing {SYNTH}", "CKPT_DIR missing"),
    (f"watch emptydir --model-base emptydir {SYNTH}", "--model-base emptydir"),
    (f"watch emptydir {SYNTH} --resume runs/x", "--resume"),
    # run: flags cut short or unknown, config files
    (f"{RUN} --max-token 3", "--max-token"),
    (f"{RUN} --lim 3", "--lim"),
    (f"{RUN} --no-such-flag", "--no-such-flag"),
    ("run --config missing.yaml", "missing.yaml"),
    ("run --config badkey.yaml", "bogus"),
    ("run --config limit0.yaml", "limit"),
    # bench
    ("bench show NoSuchBench", "NoSuchBench"),
    ("bench show SynthVideo:nosuch", "'nosuch'"),
    ("bench validate", "--root"),
    ("bench validate SynthVideo --root missing", "--root missing"),
    ("bench validate --data missing.json", "--data missing.json"),
    ("bench validate --data latin1.json", "latin1.json"),
    ("bench validate SynthVideo --root synth --max-problems -1", "--max-problems"),
    ("bench validate SynthVideo --roo synth", "--roo"),
    ("bench nosuch", "nosuch"),
    # cache
    ("cache build", "VIDEO"),
    ("cache build --list missing.txt", "missing.txt"),
    ("cache build afile --workers -1", "--workers"),
    ("cache build afile --max-pixels -5", "max_pixels"),
    ("cache verify --root afile", "--root afile"),
    ("cache ls --root missing", "--root missing"),
    ("cache prune --root missing", "--root missing"),
    ("cache nosuch", "nosuch"),
    # report
    ("report missing", "missing"),
    ("report emptydir", "emptydir"),
    ("report scored/r1 --format pdf", "--format"),
    ("report scored/r1 --bootstrap -1", "--bootstrap"),
    ("report scored/r1 --tolerance -1", "--tolerance"),
    ("report scored/r1 --out afile", "--out afile"),
    # repro
    ("repro", "run directory"),
    ("repro missing", "missing"),
    ("repro scored/r1 --tolerance -1", "--tolerance"),
    ("repro scored/r1 --json missing/dir/x.json", "--json missing/dir/x.json"),
    # score
    ("score --bench SynthVideo --data-root synth --predictions missing.jsonl", "missing.jsonl"),
    ("score --bench SynthVideo --data-root synth --predictions latin1.json", "latin1.json"),
    ("score --bench SynthVideo:nosuch --data-root synth --predictions preds.jsonl", "'nosuch'"),
    ("score --bench NoSuchBench --data-root synth --predictions preds.jsonl", "NoSuchBench"),
    ("score --predictions preds.jsonl", "--bench"),
    ("score --bench SynthVideo --data-root synth", "--predictions"),
    # synth
    ("synth --out out --n 0", "--n"),
    ("synth --out out --n -2", "--n"),
    ("synth --out out --families nosuch", "nosuch"),
    ("synth --out afile", "--out afile"),
    ("synth --out out --width 0", "width"),
    # model
    ("model tiny", "out"),
    ("model tiny afile", "afile"),
    ("model tiny out --family nosuch", "--family"),
    ("model nosuch", "nosuch"),
    ("models llava_onevison", "did you mean 'llava_onevision'"),
    # the command itself
    ("nosuch", "nosuch"),
]


@pytest.fixture(scope="module")
def world(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder with what the cases point at, good and bad."""
    root = tmp_path_factory.mktemp("world")
    synth = root / "synth"
    generate(synth, 1, "test", 0, families=["yes_no"])
    ckpt = root / "ckpt"
    ckpt.mkdir()
    (ckpt / "config.json").write_text(json.dumps({"model_type": "qwen2_5_vl"}))
    (root / "emptydir").mkdir()
    (root / "afile").write_text("not a folder\n")
    (root / "latin1.json").write_bytes(
        '[{"question": "Qu\'est-ce qu\'un caf\xe9?"}]'.encode("latin-1")
    )
    (root / "notjson.json").write_text("question: what?\n")
    (root / "badkey.yaml").write_text("model: ckpt\nbogus: 1\n")
    (root / "limit0.yaml").write_text("model: ckpt\nbench: [SynthVideo]\nlimit: 0\n")
    rows = [json.loads(line) for line in (synth / "synthvideo_test.jsonl").read_text().splitlines()]
    preds = root / "preds.jsonl"
    preds.write_text("".join(json.dumps({"id": r["id"], "prediction": "yes"}) + "\n" for r in rows))
    score_predictions(
        preds, bench="SynthVideo", data_root=str(synth), runs_dir=str(root / "scored"), run_id="r1"
    )
    return root


def _run_dirs(root: Path) -> set[str]:
    found = set()
    for parent in (root / "runs", root / "scored"):
        if parent.is_dir():
            found |= {f"{parent.name}/{p.name}" for p in parent.iterdir()}
    return found


@pytest.mark.parametrize(("argv", "names"), CASES, ids=[c[0] for c in CASES])
def test_a_bad_invocation_is_one_line_naming_the_thing_and_exit_2(
    argv: str,
    names: str,
    world: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    monkeypatch.chdir(world)
    for key, value in {
        "VLLM_LOGGING_LEVEL": "WARNING",
        "TRANSFORMERS_VERBOSITY": "warning",
    }.items():
        monkeypatch.setenv(key, value)  # `run` sets them; keep the session's as they were
    before = _run_dirs(world)
    try:
        rc = main(shlex.split(argv))
    except SystemExit as exc:  # argparse exits; that is part of the contract too
        rc = exc.code
    err = capsys.readouterr().err
    lines = [line for line in err.splitlines() if line.strip()]
    assert rc == 2, err
    assert len(lines) == 1, err
    assert "Traceback" not in err
    assert lines[0].startswith("evalkit"), lines[0]
    assert names in lines[0], lines[0]
    assert _run_dirs(world) == before, "a bad invocation created a run directory"


def test_the_table_covers_every_subcommand() -> None:
    from evalkit.cli.main import COMMANDS

    used = {shlex.split(argv)[0] for argv, _ in CASES}
    assert set(COMMANDS) <= used
    assert len(CASES) >= 25


def test_no_parser_accepts_an_abbreviated_flag() -> None:
    import argparse

    from evalkit.cli.main import COMMANDS, command_parser

    def walk(p: argparse.ArgumentParser) -> list[argparse.ArgumentParser]:
        subs = [a for a in p._actions if isinstance(a, argparse._SubParsersAction)]
        return [p, *(q for s in subs for child in s.choices.values() for q in walk(child))]

    parsers = [q for name in COMMANDS for q in walk(command_parser(name))]
    assert len(parsers) > len(COMMANDS)  # the sub-actions were reached
    assert all(not p.allow_abbrev for p in parsers), [p.prog for p in parsers if p.allow_abbrev]


def test_limit_zero_in_a_library_config_is_refused_too() -> None:
    from pydantic import ValidationError

    from evalkit.run.config import RunConfig

    with pytest.raises(ValidationError):
        RunConfig(model="m", limit=0)


@pytest.mark.parametrize("value", ["nan", "inf", "-inf"])
def test_every_float_flag_refuses_a_number_that_is_not_finite(
    value: str, capsys: pytest.CaptureFixture[str]
) -> None:
    from evalkit.cli.main import command_parser

    checked = []
    for command in ("run", "cache", "score", "report", "repro", "bench", "synth", "model"):
        parser = command_parser(command)
        actions = list(parser._actions)
        for sub in [a for a in actions if isinstance(a, argparse._SubParsersAction)]:
            actions += [x for p in sub.choices.values() for x in p._actions]
        for action in actions:
            if action.option_strings and action.type is not None and _takes_floats(action):
                flag = action.option_strings[0]
                with pytest.raises(SystemExit) as exit_:
                    _parse_one(parser, action, flag, value)
                assert exit_.value.code == 2
                checked.append(flag)
    assert "--frames-fps" in checked and len(checked) > 5
    assert "finite" in capsys.readouterr().err


def _takes_floats(action: argparse.Action) -> bool:
    try:
        return isinstance(action.type("1.5"), float)  # type: ignore[misc]
    except (argparse.ArgumentTypeError, ValueError, TypeError):
        return False


def _parse_one(parser: argparse.ArgumentParser, action: argparse.Action, flag: str, value: str):
    """Run ``action``'s type on ``value`` the way argparse does (its error exits 2)."""
    try:
        return action.type(value)  # type: ignore[misc]
    except (argparse.ArgumentTypeError, ValueError) as exc:
        parser.error(f"argument {flag}: {exc}")
