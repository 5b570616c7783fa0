"""Domain parameters carry their types: no bare ``Any`` outside the listed exemptions
(``python -m evalkit._devtools.bare_any``)."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from evalkit._devtools.bare_any import EXEMPT, check, findings_in, stale_exemptions


def _found(source: str) -> list[str]:
    return [f.what for f in findings_in(textwrap.dedent(source), "m", Path("m.py"))]


def test_evalkit_and_the_report_hold_no_bare_any_outside_the_exemptions() -> None:
    assert [str(f) for f in check()] == []


def test_every_exemption_has_a_reason_and_is_still_needed() -> None:
    assert all(why.strip() for why in EXEMPT.values())
    assert stale_exemptions() == []


@pytest.mark.parametrize(
    "annotation", ["Any", "Any | None", "None | Any", "Optional[Any]", "typing.Any", "'Any'"]
)
def test_a_parameter_annotated_any_is_found(annotation: str) -> None:
    assert _found(f"def load(spec: {annotation}) -> None: ...") == ["parameter spec of load"]


def test_a_return_and_a_class_attribute_annotated_any_are_found() -> None:
    source = """
        class Run:
            spec: Any = None

        async def build(x: int) -> Any: ...
    """
    assert sorted(_found(source)) == ["attribute spec of Run", "return of build"]


def test_an_alias_of_any_is_found_rather_than_hiding_it() -> None:
    assert _found("Json = Any\nDoc: TypeAlias = Any\n") == ["alias Json", "alias Doc"]


def test_json_containers_pass_through_args_and_data_values_are_allowed() -> None:
    source = """
        def f(doc: dict[str, Any], rows: list[Any], *args: Any, **kwargs: Any) -> list[Any]: ...

        def score(sample: Sample, target: Any) -> Score: ...

        class ScoreRecord:
            answer: Any = None
            metadata: dict[str, Any] = {}
    """
    assert _found(source) == []


def test_the_command_reports_no_finding_on_this_checkout() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "evalkit._devtools.bare_any"], capture_output=True, text=True
    )
    assert out.returncode == 0, out.stdout
    assert out.stdout.strip().splitlines()[-1].startswith("0 bare Any annotation(s)")
