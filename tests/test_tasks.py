"""Task types are one registry (evalkit.tasks) that prompts, loaders and scorers all read."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from evalkit import tasks
from evalkit.bench.files import RowError
from evalkit.bench.unified import build_sample, load_unified
from evalkit.prompts import render, template_name
from evalkit.registry import RegistryError
from evalkit.sample import Sample
from evalkit.scoring import needs_judge, score
from evalkit.scoring.types import Score


def _countdown(answer: str, n_options: int) -> int:
    """ "T-5" -> 5 (the test task type's own target syntax)."""
    if not answer.startswith("T-"):
        raise ValueError(f"{answer!r} is not a countdown")
    return int(answer[2:])


def _exact(prediction: str, target: Any, sample: Sample) -> Score:
    return Score(float(prediction.strip() == str(target)), prediction.strip(), "exact")


@pytest.fixture
def countdown() -> Iterator[tasks.TaskType]:
    """A task type registered for one test only (the registry is process-wide)."""
    task = tasks.register(
        tasks.TaskType(
            "test_countdown",
            f"{__name__}:_exact",
            aliases=("Test Countdown", "tcd"),
            template="numerical",
            target=_countdown,
        )
    )
    yield task
    tasks.unregister(task.name)


def test_a_new_task_type_renders_parses_and_scores_with_one_registration(
    tmp_path: Path, countdown: tasks.TaskType
) -> None:
    row = {
        "data_type": "video",
        "data_source": "Bench",
        "problem_type": "Test Countdown",
        "path": "v.mp4",
        "problem": "How many seconds are left?",
        "problem_id": 1,
        "solution": "<answer>T-5</answer>",
    }
    (tmp_path / "f.json").write_text(json.dumps([row]))
    (sample,) = load_unified(tmp_path / "f.json", video_root=tmp_path)
    assert (sample.task_type, sample.target) == ("test_countdown", 5)
    assert template_name(sample) == "numerical.jinja"
    assert "How many seconds are left?" in render(sample)
    assert score(sample, " 5 ").value == 1.0
    assert score(sample, "4").value == 0.0
    assert not needs_judge(sample)


def test_a_target_the_task_type_cannot_parse_is_a_row_error_on_solution(
    tmp_path: Path, countdown: tasks.TaskType
) -> None:
    row = {"problem_type": "tcd", "problem_id": 1, "solution": "five", "path": "v.mp4"}
    with pytest.raises(RowError) as err:
        build_sample(row, tmp_path / "f.json", "row 1", tmp_path)
    assert (err.value.field, err.value.message) == ("solution", "'five' is not a countdown")


def test_an_unregistered_task_type_is_unknown_again(countdown: tasks.TaskType) -> None:
    assert tasks.canonical("TCD") == "test_countdown"
    tasks.unregister(countdown.name)
    with pytest.raises(RegistryError, match="unknown task type 'tcd'"):
        tasks.canonical("tcd")


def test_a_name_or_alias_taken_twice_is_an_error() -> None:
    with pytest.raises(RegistryError, match="already registered"):
        tasks.register(tasks.TaskType("multiple_choice", "x:y"))
    with pytest.raises(RegistryError, match="'mcq' already names 'multiple_choice'"):
        tasks.register(tasks.TaskType("test_other", "x:y", aliases=("MCQ",)))
    assert "test_other" not in tasks.names()


def test_builtin_task_types_name_their_scorer_template_and_judge() -> None:
    mc = tasks.get("mcq")
    assert (mc.name, mc.template_file, mc.judged) == (
        "multiple_choice",
        "multiple_choice.jinja",
        False,
    )
    assert mc.parse_target("(C)", 4) == "C"
    assert tasks.get("gpt_eval").judged
    assert tasks.get("tvg").parse_target('{"time": [1, 2]}') == [1, 2]
    assert tasks.get("open").parse_target("a caption") == "a caption"
    for name in tasks.names():  # every lazy scorer reference resolves
        assert callable(tasks.get(name).scorer_fn())


def test_naming_a_task_type_imports_no_scorer() -> None:
    import subprocess
    import sys

    code = (
        "import sys; from evalkit import tasks; tasks.canonical('mcq');"
        "import evalkit.prompts, evalkit.bench.unified;"
        "print(sorted(m for m in sys.modules if m.startswith('evalkit.scoring')))"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"
