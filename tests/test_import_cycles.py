"""evalkit's modules import each other without a cycle (``python -m evalkit._devtools.imports``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from evalkit._devtools.imports import ImportGraph, build_graph, cycles, describe


def test_no_module_imports_itself_back_through_others() -> None:
    graph = build_graph()
    found = [describe(graph, c) for c in cycles(graph.all_edges())]
    assert found == [], "import cycles (lazy and type-only imports count):\n" + "\n".join(found)


def test_the_graph_covers_the_subpackages_and_sees_every_kind_of_edge() -> None:
    graph = build_graph()
    for name in ("evalkit.reports.load", "evalkit.trainer.config", "evalkit.benchmarks"):
        assert name in graph.modules
    assert "evalkit.tasks" in graph.eager["evalkit.prompts"]
    assert "evalkit.reports.uncertainty" in graph.eager["evalkit.reports.load"]
    assert "evalkit.run.resume" in graph.lazy["evalkit.run.execute"]  # inside a function


def test_a_cycle_is_found_and_shown_with_its_edge_kinds() -> None:
    none: set[str] = set()
    graph = ImportGraph(
        dict.fromkeys("abcd", Path("x.py")),
        eager={"a": {"b"}, "b": none, "c": none, "d": {"a"}},
        lazy={"a": none, "b": {"c"}, "c": none, "d": none},
        typing={"a": none, "b": none, "c": {"a"}, "d": none},
    )
    (cycle,) = cycles(graph.all_edges())
    assert describe(graph, cycle) == "a -> b -(lazy)-> c -(typing)-> a"
    assert cycles(graph.eager) == []


def test_the_command_exits_0_and_says_so() -> None:
    out = subprocess.run(
        [sys.executable, "-m", "evalkit._devtools.imports", "--cycles"],
        capture_output=True,
        text=True,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip().endswith("0 import cycle(s)")
