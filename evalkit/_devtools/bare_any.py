"""Domain parameters carry their types: no bare ``Any`` in evalkit's and the report's signatures.

``python -m evalkit._devtools.bare_any`` lists every function parameter, return and class
attribute annotated with a bare ``Any`` (``Any``, ``Any | None``, ``Optional[Any]``) in
``evalkit`` and ``evalkit.reports`` and exits 1 if there is one outside :data:`EXEMPT`.
It is what mypy's ``disallow_any_explicit`` would say, less the JSON: that flag also
refuses ``dict[str, Any]``, which is the honest type of a JSON document, so an ``Any``
inside a container is allowed here and only an ``Any`` standing for a whole value is not
(``spec: Any  # BenchmarkSpec`` hides the type from the checker and the reader).
``*args: Any`` / ``**kwargs: Any`` are allowed too: they pass arguments through to a
callee that types them. A module-level alias of ``Any`` (``Json = Any``) is a finding
itself: it would hide the same ``Any`` under a name. The trainer is not checked
(``evalkit.trainer``: model, processor and tensor objects from torch/transformers, typed
``Any`` where those are not imported).
"""

from __future__ import annotations

import argparse
import ast
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

from evalkit._devtools.imports import find_modules

UNCHECKED = ("evalkit.trainer", "evalkit.benchmarks", "evalkit.prompt_templates")
"""Subpackages left out (see the module docstring)."""

_JSON = "JSON payload handler"
_ARGPARSE = "the CLI's argparse glue"
_LAZY = "third-party objects of a package imported lazily (importing evalkit must not)"
EXEMPT: dict[str, str] = {
    # argparse: namespaces, parser groups and the values handed to them
    "evalkit.config": _ARGPARSE + ": flag types made from pydantic field annotations",
    "evalkit.cli.run": _ARGPARSE + ": parser groups; the terminal is rich's Console",
    "evalkit.cli.bench": _ARGPARSE + ": subparsers; --json output rows",
    "evalkit.cli.cache": _ARGPARSE + ": videos as given (a VideoRef or a path)",
    "evalkit.cli.checks": _ARGPARSE + ": argparse type= validators return the parsed value",
    # JSON: a value whose shape is the data's (dataset rows, replies, documents)
    "evalkit.bench.answers": _JSON + ": dataset answer/option fields as the rows hold them",
    "evalkit.bench.files": _JSON + ": dataset files (JSON/JSONL/CSV/parquet) before rows",
    "evalkit.bench.loader": _JSON + ": row fields looked up by the spec's field map",
    "evalkit.bench.unified": _JSON + ": unified-format rows",
    "evalkit.bench.unified_known": _JSON + ": --data rows matched to known benchmarks",
    "evalkit.bench.subtitles": _JSON + ": subtitle timestamps as the files give them",
    "evalkit.bench.aggregations.question_groups": _JSON + ": question-group fields of rows",
    "evalkit.manifest": _JSON + ": hash_json's input; a schema-1 config.json before lifting",
    "evalkit.rundir": _JSON + ": config.json amendments merged as documents",
    "evalkit.records": _JSON + ": the store's fallback encoder takes any value a scorer kept",
    "evalkit.predictions": _JSON + ": replies as other harnesses' files hold them",
    "evalkit.foreign": _JSON + ": other tools' files read safely (JSON values, sheet cells)",
    "evalkit.tasks": _JSON + ": parse_target returns the target in its task type's shape",
    "evalkit.scoring.extract": _JSON + ": JSON objects pulled out of replies",
    "evalkit.scoring.grounding": _JSON + ": spans and boxes parsed from replies/targets",
    "evalkit.scoring.judge_cot": _JSON + ": the CoT judge's parsed verdict",
    "evalkit.scoring.verdicts": _JSON + ": answers shortened for the record",
    "evalkit.scoring.rules._easyvideor1": _JSON + ": EasyVideoR1's parsed replies (as ported)",
    "evalkit.scoring.rules._options": _JSON + ": gold answers as the benchmark's rows hold them",
    "evalkit.scoring.rules.mlvu": _JSON + ": MLVU's gold answer field",
    "evalkit.scoring.rules.stvg": _JSON + ": boxes and spans parsed from replies",
    "evalkit.scoring.rules.vsibench": _JSON + ": numbers as replies/targets give them",
    # lazy references and plug-ins: the caller knows the type of what it asked for
    "evalkit.registry": "resolves lazy 'module:attr' references and plug-ins to any object",
    "evalkit.engines": "resolves an engine registration's lazy 'module:attr' references",
    "evalkit.scoring.rules": "Rule.fallback is a JudgeFallback, whose module registers rules "
    "here: even a type-only import would close a cycle",
    "evalkit.engines.lifecycle": "a thread's result handed to the awaiting future (generic)",
    # objects of packages evalkit imports only when used
    "evalkit.engines.vllm_engine": _LAZY + ": vLLM's engine, outputs and stat loggers",
    "evalkit.engines.hf_engine": _LAZY + ": transformers models, tensors, logits processors",
    "evalkit.engines.prompting": _LAZY + ": a Hugging Face tokenizer/processor",
    "evalkit.engines.openai_engine": _LAZY + ": the HTTP client's streamed response",
    "evalkit.tiny_checkpoint.common": _LAZY + ": torch/transformers (tiny test checkpoints)",
    "evalkit.tiny_checkpoint.qwen": _LAZY + ": torch/transformers (the tiny Qwen checkpoint)",
    "evalkit.engines.reference_rope": _LAZY + ": torch/transformers (the reference RoPE patch)",
    "evalkit.video.decode": _LAZY + ": PyAV containers, streams and frames",
    "evalkit.scale.cluster": _LAZY + ": the ray module, actor handles, placement groups",
    "evalkit.scale.driver": _LAZY + ": the ray module and the object refs of replicas' calls",
    "evalkit.scale.judge_service": _LAZY + ": the ray module and the judge's actor handle",
    "evalkit.scale.cache_build": _LAZY + ": the ray module and its object refs",
    "evalkit.scale.progress": _LAZY + ": rich's Console and Table",
    "evalkit.scoring.sandbox": _LAZY + ": a subprocess preexec_fn (resource limits)",
    "evalkit.reports.plots": _LAZY + ": matplotlib's figures and axes",
}
"""Module -> why it may keep a bare ``Any`` (a reason a reviewer can check)."""

DATA_NAMES: dict[str, str] = {
    "target": "a sample's reference answer, in its dataset's shape (a letter, a number, "
    "spans, boxes by frame): each task type's scorer reads its own (tasks.parse_target)",
    "answer": "what a rule extracted from a reply, in that rule's shape (JSON-able)",
}
"""Parameters and attributes of these names may be ``Any`` anywhere: they hold a value whose
shape is the data's, not a domain object (the same name always means the same thing)."""


@dataclass(frozen=True)
class Finding:
    """One annotation that is a bare ``Any``."""

    module: str
    path: Path
    line: int
    what: str
    """``parameter spec of load``, ``return of build``, ``attribute spec of Run``."""

    def __str__(self) -> str:
        return f"{self.path}:{self.line}: {self.module}: {self.what} is annotated Any"


def is_bare_any(node: ast.expr | None) -> bool:
    """Whether an annotation stands for any value: ``Any``, ``typing.Any``, ``"Any"``, or a
    union / Optional of it (``Any | None``). ``list[Any]`` and ``dict[str, Any]`` are not."""
    if node is None:
        return False
    if isinstance(node, ast.Constant) and isinstance(node.value, str):
        try:
            return is_bare_any(ast.parse(node.value, mode="eval").body)
        except SyntaxError:
            return False
    if isinstance(node, ast.Name):
        return node.id == "Any"
    if isinstance(node, ast.Attribute):
        return node.attr == "Any"
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.BitOr):
        return is_bare_any(node.left) or is_bare_any(node.right)
    if isinstance(node, ast.Subscript) and _name(node.value) in ("Optional", "Union"):
        inner = node.slice
        items = inner.elts if isinstance(inner, ast.Tuple) else [inner]
        return any(is_bare_any(item) for item in items)
    return False


def _name(node: ast.expr) -> str:
    if isinstance(node, ast.Name):
        return node.id
    return node.attr if isinstance(node, ast.Attribute) else ""


def findings_in(source: str, module: str, path: Path) -> Iterator[Finding]:
    """Every bare ``Any`` parameter, return and class attribute in one module's source,
    and every module-level alias of ``Any``."""
    tree = ast.parse(source, str(path))
    for stmt in tree.body:
        if isinstance(stmt, ast.Assign | ast.AnnAssign) and is_bare_any(stmt.value):
            names = stmt.targets if isinstance(stmt, ast.Assign) else [stmt.target]
            yield Finding(module, path, stmt.lineno, f"alias {ast.unparse(names[0])}")
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            args = node.args
            for arg in (*args.posonlyargs, *args.args, *args.kwonlyargs):
                if arg.arg not in DATA_NAMES and is_bare_any(arg.annotation):
                    yield Finding(module, path, arg.lineno, f"parameter {arg.arg} of {node.name}")
            if is_bare_any(node.returns):
                yield Finding(module, path, node.lineno, f"return of {node.name}")
        elif isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and is_bare_any(stmt.annotation):
                    target = ast.unparse(stmt.target)
                    if target in DATA_NAMES:
                        continue
                    yield Finding(module, path, stmt.lineno, f"attribute {target} of {node.name}")


def checked_modules() -> dict[str, Path]:
    """The modules the check reads: evalkit's and the report's, less :data:`UNCHECKED`."""
    return {
        name: path
        for name, path in find_modules().items()
        if name.split(".")[0] == "evalkit"
        and not any(name == u or name.startswith(u + ".") for u in UNCHECKED)
    }


def check(modules: dict[str, Path] | None = None) -> list[Finding]:
    """The findings outside :data:`EXEMPT`, in module order."""
    found: list[Finding] = []
    for name, path in sorted((modules or checked_modules()).items()):
        if name not in EXEMPT:
            found += findings_in(path.read_text(encoding="utf-8"), name, path)
    return found


def stale_exemptions(modules: dict[str, Path] | None = None) -> list[str]:
    """Exempt modules that no longer exist or no longer hold a bare ``Any`` (so the list
    only shrinks: a module typed since is checked from then on)."""
    modules = modules or checked_modules()
    return [
        name
        for name in EXEMPT
        if name not in modules
        or not any(findings_in(modules[name].read_text(encoding="utf-8"), name, modules[name]))
    ]


def main(argv: list[str] | None = None) -> int:
    """Print each finding; exit 1 if there is one."""
    parser = argparse.ArgumentParser(prog="python -m evalkit._devtools.bare_any")
    parser.add_argument("--exempt", action="store_true", help="list the exempt modules and why")
    args = parser.parse_args(argv)
    if args.exempt:
        for name, why in EXEMPT.items():
            print(f"{name}: {why}")
        return 0
    modules = checked_modules()
    found, stale = check(modules), stale_exemptions(modules)
    for f in found:
        print(f)
    for name in stale:
        print(f"{name}: exempt but holds no bare Any (or is gone): drop it from EXEMPT")
    print(f"{len(found)} bare Any annotation(s) outside the {len(EXEMPT)} exempt modules")
    return 1 if found or stale else 0


if __name__ == "__main__":
    sys.exit(main())
