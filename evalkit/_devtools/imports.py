"""evalkit's module import graph, read from the source (AST), and its cycles.

``python -m evalkit._devtools.imports --cycles`` prints every import cycle among evalkit's
modules (``evalkit.reports``, ``evalkit.trainer`` and ``evalkit.benchmarks`` included, found
where the running evalkit finds them: a checkout or an installed wheel) and exits 1 if
there is one. Only imports that run when the module is imported count as edges: module
level, class bodies and module-level ``if`` / ``try`` blocks. Imports inside functions are
lazy (they run on first call) and imports under ``if TYPE_CHECKING:`` are for the type
checker only; both are listed with ``--lazy``. A cycle is a cycle whatever its edges: a
lazy or type-only import that closes a loop hides a layering fault (two modules that each
need the other's definitions) rather than removing it, so ``--cycles`` follows all three
kinds and marks the non-eager edges. A parent package's ``__init__`` is not an edge of its
own: only the module named in the statement is.
"""

from __future__ import annotations

import argparse
import ast
import importlib.util
import itertools
import sys
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

from evalkit._layout import SUBPACKAGES

ROOT_PACKAGE = "evalkit"


@dataclass
class ImportGraph:
    """Import edges between evalkit modules, by kind: eager, lazy, typing (type-only)."""

    modules: dict[str, Path]
    eager: dict[str, set[str]] = field(default_factory=dict)
    lazy: dict[str, set[str]] = field(default_factory=dict)
    typing: dict[str, set[str]] = field(default_factory=dict)

    def all_edges(self) -> dict[str, set[str]]:
        """Every edge whatever its kind."""
        return {m: self.eager[m] | self.lazy[m] | self.typing[m] for m in self.modules}

    def kind(self, source: str, target: str) -> str:
        """``eager``, ``lazy`` or ``typing`` (the first that holds) for one edge."""
        for name in ("eager", "lazy", "typing"):
            if target in getattr(self, name)[source]:
                return name
        raise KeyError(f"no import {source} -> {target}")


def _package_folders() -> dict[str, Path]:
    """``evalkit`` and its mapped subpackages -> the folder each is imported from."""
    folders = {}
    for name in (ROOT_PACKAGE, *(f"{ROOT_PACKAGE}.{key}" for key in SUBPACKAGES)):
        spec = importlib.util.find_spec(name)
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError(f"cannot find package {name}: is evalkit installed?")
        folders[name] = Path(next(iter(spec.submodule_search_locations)))
    return folders


def find_modules() -> dict[str, Path]:
    """Every evalkit module name -> its source file."""
    modules: dict[str, Path] = {}
    for package, folder in _package_folders().items():
        for path in sorted(folder.rglob("*.py")):
            parts = list(path.relative_to(folder).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            name = ".".join((package, *parts))
            # a wheel holds the subpackages inside evalkit/: one name, one file
            modules.setdefault(name, path)
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _walk_imports(node: ast.AST, kind: str) -> Iterator[tuple[ast.Import | ast.ImportFrom, str]]:
    """(import statement, its kind) for each import below ``node``, at any depth."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child, kind
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            yield from _walk_imports(ast.Module(body=child.body, type_ignores=[]), "typing")
            yield from _walk_imports(ast.Module(body=child.orelse, type_ignores=[]), kind)
        elif isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            yield from _walk_imports(child, "typing" if kind == "typing" else "lazy")
        else:
            yield from _walk_imports(child, kind)


def _targets(node: ast.Import | ast.ImportFrom, module: str, is_package: bool) -> list[str]:
    """The module names a statement imports (not yet filtered to evalkit's)."""
    if isinstance(node, ast.Import):
        return [alias.name for alias in node.names]
    base = node.module or ""
    if node.level:
        anchor = module.split(".")
        if not is_package:
            anchor.pop()
        anchor = anchor[: len(anchor) - (node.level - 1)]
        base = ".".join([*anchor, base] if base else anchor)
    return [base, *(f"{base}.{alias.name}" for alias in node.names)]


def build_graph(modules: dict[str, Path] | None = None) -> ImportGraph:
    """Parse every module and collect the edges to other evalkit modules."""
    graph = ImportGraph(modules if modules is not None else find_modules())
    for name, path in graph.modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        is_package = path.name == "__init__.py"
        for kind in ("eager", "lazy", "typing"):
            getattr(graph, kind)[name] = set()
        for node, kind in _walk_imports(tree, "eager"):
            found = [t for t in _targets(node, name, is_package) if t in graph.modules]
            # `from pkg import mod` names the module; `from mod import obj` the module itself
            edge = found[1:] or found[:1]
            getattr(graph, kind)[name].update(t for t in edge if t != name)
    return graph


def cycles(edges: dict[str, set[str]]) -> list[list[str]]:
    """One shortest cycle through each strongly connected group of modules, sorted."""
    found = []
    for group in _strongly_connected(edges):
        if len(group) > 1:
            found.append(_shortest_cycle(min(group), edges, group))
    return sorted(found)


def _strongly_connected(edges: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's algorithm, iterative (the graph is a few hundred modules deep at most)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[set[str]] = []
    for root in sorted(edges):
        if root in index:
            continue
        work = [(root, iter(sorted(edges.get(root, ()))))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, todo = work[-1]
            nxt = next(todo, None)
            if nxt is None:
                work.pop()
                if work:
                    low[work[-1][0]] = min(low[work[-1][0]], low[node])
                if low[node] == index[node]:
                    group = set()
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        group.add(member)
                        if member == node:
                            break
                    groups.append(group)
            elif nxt not in index:
                index[nxt] = low[nxt] = len(index)
                stack.append(nxt)
                on_stack.add(nxt)
                work.append((nxt, iter(sorted(edges.get(nxt, ())))))
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
    return groups


def _shortest_cycle(start: str, edges: dict[str, set[str]], group: set[str]) -> list[str]:
    """The shortest path start -> ... -> start inside ``group`` (breadth first)."""
    parents: dict[str, str] = {}
    frontier = [start]
    while frontier:
        following = []
        for node in frontier:
            for nxt in sorted(edges.get(node, set()) & group):
                if nxt == start:
                    path = [node]
                    while path[-1] != start:
                        path.append(parents[path[-1]])
                    return [*reversed(path), start]
                if nxt not in parents:
                    parents[nxt] = node
                    following.append(nxt)
        frontier = following
    raise AssertionError(f"{start} is in a cycle group but no cycle returns to it")


def describe(graph: ImportGraph, cycle: list[str]) -> str:
    """``a -> b -(lazy)-> c -> a``: a cycle with its non-eager edges marked."""
    text = cycle[0]
    for source, target in itertools.pairwise(cycle):
        kind = graph.kind(source, target)
        text += f" -({kind})-> {target}" if kind != "eager" else f" -> {target}"
    return text


def main(argv: list[str] | None = None) -> int:
    """Print the import cycles (``--cycles``) and/or the non-eager imports (``--lazy``)."""
    parser = argparse.ArgumentParser(prog="python -m evalkit._devtools.imports")
    parser.add_argument("--cycles", action="store_true", help="print cycles; exit 1 if any")
    parser.add_argument("--lazy", action="store_true", help="list lazy and type-only imports")
    args = parser.parse_args(argv)
    graph = build_graph()
    counts = {
        k: sum(len(t) for t in getattr(graph, k).values()) for k in ("eager", "lazy", "typing")
    }
    print(
        f"{len(graph.modules)} modules; imports: "
        + ", ".join(f"{n} {k}" for k, n in counts.items())
    )
    if args.lazy:
        for kind in ("lazy", "typing"):
            for name, targets in sorted(getattr(graph, kind).items()):
                for target in sorted(targets):
                    print(f"{kind}: {name} -> {target}")
    if not args.cycles:
        return 0
    found = cycles(graph.all_edges())
    for cycle in found:
        print("cycle: " + describe(graph, cycle))
    print(f"{len(found)} import cycle(s)")
    return 1 if found else 0


if __name__ == "__main__":
    sys.exit(main())
