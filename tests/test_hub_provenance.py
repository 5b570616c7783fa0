"""Models by hub id, and which data a run read: the model's commit in the run's identity,
per benchmark the dataset, commit and annotation hash recorded, shown by the report, a
reference's data commit checked by repro, and ``evalkit bench pin`` (hub stand-in)."""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from evalkit.bench.registry import benchmarks_dir, get_benchmark
from evalkit.cli.main import main
from evalkit.manifest import DataProvenance
from evalkit.testing import hub_fixtures as fx
from evalkit.testing.hub_server import HubStandIn, client_env
from evalkit.testing.runs import Rec, write_run

PINNED = str(get_benchmark("Video-MME").data.revision)
MODEL_FILES = {
    "config.json": json.dumps({"model_type": "qwen2_5_vl", "_name_or_path": "tiny"}).encode(),
    "tokenizer.json": b"{}",
    "chat_template.jinja": b"{{ messages }}",
    "model.safetensors": b"\0" * 4096,
    "pytorch_model.bin": b"\1" * 4096,  # the same weights as a pickle: never fetched
    "onnx/model.onnx": b"\2" * 4096,
}


@pytest.fixture(scope="module")
def hub() -> Iterator[HubStandIn]:
    with HubStandIn() as stand_in:
        stand_in.add_repo("org/tiny-model", MODEL_FILES, kind="model")
        fx.serve(stand_in, fx.videomme(n_videos=2, per_archive=2, commit=PINNED))
        fx.serve(stand_in, fx.mlvu())
        yield stand_in


def child(hub: HubStandIn, home: Path, *argv: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, *argv],
        env={**client_env(hub, home), **env},
        capture_output=True,
        text=True,
        timeout=300,
        cwd=home,
    )


def test_a_model_by_hub_id_is_fetched_once_with_only_what_an_engine_loads(
    hub: HubStandIn, tmp_path: Path
) -> None:
    hub.clear_log()
    out = child(hub, tmp_path, "-m", "evalkit", "model", "fetch", "org/tiny-model")
    assert out.returncode == 0, out.stderr
    folder = Path(out.stdout.split(" in ")[-1].strip())
    got = sorted(str(p.relative_to(folder)) for p in folder.rglob("*") if p.is_file())
    assert got == ["chat_template.jinja", "config.json", "model.safetensors", "tokenizer.json"]
    assert folder.name == hub.repo("org/tiny-model", "model").head
    hub.clear_log()
    again = child(hub, tmp_path, "-m", "evalkit", "model", "fetch", "org/tiny-model")
    assert again.returncode == 0 and hub.log == [], [r.path for r in hub.log]


def test_a_model_not_in_the_cache_and_fetching_off_is_one_line_naming_the_fetch(
    hub: HubStandIn, tmp_path: Path
) -> None:
    hub.clear_log()
    args = ("-m", "evalkit", "run", "--bench", "Video-MME", "--model", "org/tiny-model")
    out = child(hub, tmp_path, *args, "--no-fetch", "--no-progress")
    assert out.returncode == 2
    (line,) = out.stderr.strip().splitlines()
    assert "--model org/tiny-model: not in the local Hugging Face cache" in line
    assert "`evalkit model fetch org/tiny-model`" in line
    assert hub.log == []


PLAN = """
import json, sys
from evalkit.run.config import RunConfig
from evalkit.run.plan import plan_run
cfg = RunConfig(model=sys.argv[1], bench=[sys.argv[2]], engine="hf", limit=1)
m = plan_run(cfg).manifest
data = {k: v.model_dump() for k, v in m.data.items()}
print(json.dumps({"rc": m.result_config.dump(), "data": data}))
"""


def test_the_plan_records_the_models_commit_and_the_data_each_benchmark_read(
    hub: HubStandIn, tmp_path: Path
) -> None:
    out = child(hub, tmp_path, "-c", PLAN, "org/tiny-model", "Video-MME")
    assert out.returncode == 0, out.stderr
    doc = json.loads(out.stdout.strip().splitlines()[-1])
    assert doc["rc"]["model"] == "org/tiny-model"
    assert doc["rc"]["model_revision"] == hub.repo("org/tiny-model", "model").head
    data = doc["data"]["Video-MME"]
    assert (data["dataset"], data["commit"]) == ("lmms-lab/Video-MME", PINNED)
    release = tmp_path / "data" / "videomme" / PINNED
    assert data["root"] == str(release)
    from evalkit.bench.files import annotation_digest

    assert data["annotations"] == annotation_digest(get_benchmark("Video-MME").files, release)


def test_a_folder_model_records_no_commit_as_runs_did_before(tmp_path: Path) -> None:
    from evalkit.run.config import RunConfig
    from evalkit.run.plan import result_config

    rc = result_config(RunConfig(model=str(tmp_path), bench=[]), [])
    assert "model_revision" not in rc.dump()


VMME_RUN = {"Video-MME": [Rec(str(i), float(i < 13), {"duration": "short"}) for i in range(20)]}
QWEN25 = "/ckpt/Qwen2.5-VL-7B-Instruct"


def _read(commit: str) -> dict[str, DataProvenance]:
    return {
        "Video-MME": DataProvenance(
            dataset="lmms-lab/Video-MME", commit=commit, annotations="ab" * 32, root="/d"
        )
    }


def test_the_report_names_the_dataset_commit_and_annotation_hash_read(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = write_run(tmp_path / "r", QWEN25, VMME_RUN, data=_read(PINNED))
    assert main(["report", str(run)]) == 0
    out = " ".join(capsys.readouterr().out.split())
    assert (
        f"Video-MME: data lmms-lab/Video-MME@{PINNED[:7]}, annotations sha256 abababababab" in out
    )


@pytest.fixture
def reference_with_a_commit(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> str:
    """The shipped specs, Video-MME's first reference saying the data commit it was on."""
    specs = tmp_path / "specs"
    shutil.copytree(benchmarks_dir(), specs)
    yaml = specs / "videomme.yaml"
    text = yaml.read_text()
    yaml.write_text(
        text.replace("    value: 65.1\n", f"    value: 65.1\n    data_commit: {PINNED}\n", 1)
    )
    monkeypatch.setenv("EVALKIT_BENCHMARKS", str(specs))
    assert get_benchmark("Video-MME").references[0].data_commit == PINNED
    return PINNED


def test_repro_names_a_run_that_read_another_data_commit_than_its_reference(
    tmp_path: Path, reference_with_a_commit: str, capsys: pytest.CaptureFixture[str]
) -> None:
    other = "f" * 40
    run = write_run(tmp_path / "r", QWEN25, VMME_RUN, data=_read(other))
    assert main(["repro", str(run), "--tolerance", "1.0"]) == 0  # the score is within
    out = capsys.readouterr().out
    assert f"data differs: Video-MME read data commit {other[:12]} (reference {PINNED[:12]})" in out
    same = write_run(tmp_path / "s", QWEN25, VMME_RUN, data=_read(PINNED))
    main(["repro", str(same), "--tolerance", "1.0"])
    assert "data differs" not in capsys.readouterr().out


def test_bench_pin_writes_the_validated_snapshots_commit_into_the_spec(
    hub: HubStandIn, tmp_path: Path
) -> None:
    specs = tmp_path / "specs"
    shutil.copytree(benchmarks_dir(), specs)
    env = {"EVALKIT_BENCHMARKS": str(specs)}
    premature = child(hub, tmp_path, "-m", "evalkit", "bench", "pin", "MLVU", **env)
    assert premature.returncode == 2 and "no snapshot fetched yet" in premature.stderr
    fetched = child(hub, tmp_path, "-m", "evalkit", "bench", "fetch", "MLVU", **env)
    assert fetched.returncode == 0, fetched.stderr
    unvalidated = child(hub, tmp_path, "-m", "evalkit", "bench", "pin", "MLVU", **env)
    assert unvalidated.returncode == 2 and "was not validated" in unvalidated.stderr
    ok = child(hub, tmp_path, "-m", "evalkit", "bench", "validate", "MLVU", **env)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    pinned = child(hub, tmp_path, "-m", "evalkit", "bench", "pin", "MLVU", **env)
    assert pinned.returncode == 0, pinned.stderr
    head = hub.repo("MLVU/MVLU").head
    text = (specs / "mlvu.yaml").read_text()
    assert f"  revision: {head}  # pinned by `evalkit bench pin` (validated: media)\n" in text
    assert "not pinned yet" not in text.split("layout:")[0]
    # the rest of the file is as it was
    before = (benchmarks_dir() / "mlvu.yaml").read_text().splitlines()
    assert [x for x in text.splitlines() if "revision:" not in x] == [
        x for x in before if "revision:" not in x
    ]


def test_score_fetches_the_annotations_only_and_records_the_data_it_read(
    hub: HubStandIn, tmp_path: Path
) -> None:
    preds = tmp_path / "p.jsonl"
    preds.write_text(
        "".join(json.dumps({"id": f"00{v}-1", "prediction": "A"}) + "\n" for v in (1, 2))
    )
    hub.clear_log()
    argv = ["-m", "evalkit", "score", "--bench", "Video-MME", "--predictions", str(preds)]
    out = child(hub, tmp_path, *argv, "--run-id", "s", "--runs-dir", "runs")
    assert out.returncode == 0, out.stderr
    assert not any("videos_chunked" in r.path for r in hub.log)
    data = json.loads((tmp_path / "runs" / "s" / "config.json").read_text())["data"]
    assert data["Video-MME"]["commit"] == PINNED
