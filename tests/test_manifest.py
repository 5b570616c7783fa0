"""The run manifest: one typed config.json, written by the runner, read by the reports."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
from pydantic import ValidationError

import evalkit
from evalkit.bench.registry import get_benchmark
from evalkit.errors import DataError
from evalkit.manifest import SCHEMA_VERSION, RunManifest, hash_json, package_versions
from evalkit.rundir import RunDir

VMME = get_benchmark("Video-MME")


def _result_config(spec: Any = VMME) -> dict[str, Any]:
    entry = {"spec_hash": hash_json(spec.recorded()), "frames": {"fps": 2.0}}
    rc = {"model": "m", "model_hash": "h", "engine": "vllm", "engine_options": {}}
    return {**rc, "variant": None, "judge": None, "benchmarks": {"Video-MME": entry}}


def _dump(spec: Any) -> Any:
    # a spec read back is the same model as recorded; not kept: the YAML path it was loaded
    # from and how its release is fetched (BenchmarkSpec.recorded)
    return spec.recorded() if spec is not None else None


def _schema_1(path: Path, specs: dict[str, Any] | None) -> Path:
    """config.json as evalkit wrote it before the manifest model (specs, if any, in extra)."""
    rc = _result_config()
    extra: dict[str, Any] = {"bench": ["Video-MME"], "model": "m"}
    if specs is not None:
        extra["specs"] = specs
    doc = {
        "fingerprint": hash_json(rc),
        "result_config": rc,
        "extra": extra,
        "versions": package_versions(),
    }
    path.mkdir(parents=True)
    (path / "config.json").write_text(json.dumps({**doc, "created": "2026-11-01T00:00:00+0000"}))
    return path


def test_a_new_manifest_names_its_schema_and_evalkit_and_hashes_its_result_config() -> None:
    m = RunManifest.build(_result_config(), {}, specs={"Video-MME": VMME})
    assert m.schema_version == SCHEMA_VERSION and m.evalkit_version == evalkit.__version__
    assert m.fingerprint == hash_json(_result_config())  # unset keys stay out of the hash
    assert _dump(m.recorded_spec("Video-MME")) == _dump(VMME) and not m.recorded_spec("MVBench")


def test_the_writer_refuses_a_result_setting_the_contract_does_not_name() -> None:
    with pytest.raises(ValidationError, match="fps"):
        RunManifest.build({**_result_config(), "fps": 2.0}, {}, specs={})


def test_a_schema_1_run_with_specs_in_extra_loads_with_them_lifted(tmp_path: Path) -> None:
    run = RunDir(_schema_1(tmp_path / "r", {"Video-MME": VMME.recorded()}))
    m = run.manifest()
    assert m.schema_version == 1 and m.evalkit_version is None
    assert _dump(m.recorded_spec("Video-MME")) == _dump(VMME) and "specs" not in m.extra
    # the same settings reopen it without --force and without an amendment
    assert run.open(RunManifest.build(_result_config(), m.extra, {"Video-MME": VMME}), force=False)
    assert run.amendments() == []


def test_a_schema_1_run_without_specs_loads_with_none_recorded(tmp_path: Path) -> None:
    m = RunDir(_schema_1(tmp_path / "r", None)).manifest()
    assert m.specs == {} and m.recorded_spec("Video-MME") is None


def test_a_recorded_spec_that_does_not_match_its_hash_is_refused(tmp_path: Path) -> None:
    other = VMME.model_copy(update={"description": "edited by hand"})
    m = RunManifest.build(_result_config(), {}, specs={"Video-MME": other})
    with pytest.raises(ValueError, match="does not match its spec_hash"):
        m.recorded_spec("Video-MME")


def test_a_config_json_this_evalkit_cannot_read_names_the_file_and_field(tmp_path: Path) -> None:
    run = RunDir(_schema_1(tmp_path / "r", None))
    doc = json.loads(run.config_path.read_text())
    doc["result_config"]["engine"] = 3
    run.config_path.write_text(json.dumps(doc))
    with pytest.raises(DataError, match=r"config\.json: .*field result_config\.engine"):
        run.manifest()
