"""Every shipped benchmark spec (``benchmarks/*.yaml``), looked up by name or alias.

Lookup ignores case and punctuation (``Video-MME`` = ``videomme`` = ``video_mme``); a
variant is asked for as ``NAME:VARIANT`` (``Video-MME:with_subtitles``). An alias may stand
for a variant (``aliases: ["videomme_w_subtitle:with_subtitles"]``): that is how other
tools' task names (lmms-eval's ``videomme_w_subtitle``) find the variant they are. An
unknown name gets a did-you-mean hint.
"""

from __future__ import annotations

import os
from functools import lru_cache
from importlib import resources
from importlib.resources.abc import Traversable
from pathlib import Path
from types import ModuleType

from evalkit import plugins
from evalkit._layout import package_folder
from evalkit.bench.spec import BenchmarkSpec
from evalkit.config import load_yaml_model
from evalkit.errors import ConfigError
from evalkit.registry import Registry, RegistryError, did_you_mean, normalize_name


def benchmarks_dir() -> Path:
    """Folder of the specs: ``$EVALKIT_BENCHMARKS``, else package data ``evalkit.benchmarks``."""
    env = os.environ.get("EVALKIT_BENCHMARKS")
    # the repository's benchmarks/ in a checkout, evalkit/benchmarks/ in a wheel (_layout.py)
    return Path(env) if env else package_folder("evalkit.benchmarks")


def load_spec(path: str | Path) -> BenchmarkSpec:
    """One YAML spec, validated (unknown keys and bad values name the file and field)."""
    spec = load_yaml_model(path, BenchmarkSpec)
    return spec.located(str(Path(path).resolve()))


class BenchmarkRegistry:
    """Specs of one folder and of the installed plug-ins, by normalised name and aliases.

    Another package adds benchmarks through the entry points ``evalkit.benchmarks``: each
    names a package whose ``*.yaml`` files are specs (adapters beside them, as here), a
    :class:`BenchmarkSpec`, or a YAML file or folder; they are read on the first lookup.
    """

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._specs: Registry[BenchmarkSpec] = Registry(
            "benchmark",
            base=BenchmarkSpec,
            normalize=normalize_name,
            group="evalkit.benchmarks",
            add=self._add_plugin,
        )
        with plugins.builtins():  # the shipped specs are evalkit's own, whoever asks first
            self._add_folder(self.folder)

    def _add_folder(self, folder: Path | Traversable) -> None:
        for path in sorted((p for p in folder.iterdir() if p.name.endswith(".yaml")), key=str):
            self._add(load_spec(str(path)), str(path))

    def _add(self, spec: BenchmarkSpec, where: str) -> None:
        if self._specs.owner(spec.name) == spec.name:
            why = f"{where}: benchmark {spec.name!r} is defined twice"
            raise self._specs.refusal(why, ConfigError)
        for key in [spec.name, *spec.aliases]:
            alias = key.partition(":")[0]
            owner = self._specs.owner(alias)
            if owner is not None:
                why = f"{where}: benchmark name {alias!r} already used by {owner!r}"
                raise self._specs.refusal(why, ConfigError)
        self._specs.register(spec.name, spec, aliases=[a.partition(":")[0] for a in spec.aliases])

    def _add_plugin(self, name: str, obj: object) -> None:
        if isinstance(obj, ModuleType):  # a package of specs, as evalkit.benchmarks is
            self._add_folder(resources.files(obj))
        elif isinstance(obj, BenchmarkSpec):
            self._add(obj, f"plug-in {name!r}")
        elif isinstance(obj, (str, Path)) and Path(obj).is_dir():
            self._add_folder(Path(obj))
        elif isinstance(obj, (str, Path)):
            self._add(load_spec(obj), str(obj))
        else:
            raise ConfigError(
                f"{type(obj).__name__} is no benchmark: give a package of *.yaml specs, "
                "a BenchmarkSpec, or a YAML file or folder"
            )

    def names(self) -> list[str]:
        """Display names, sorted."""
        return sorted(self._specs.names(), key=str.lower)

    def specs(self) -> list[BenchmarkSpec]:
        """All specs, sorted by name."""
        return [self._specs.get(n) for n in self.names()]

    def resolve(self, name: str) -> tuple[str, str | None]:
        """``(benchmark name, variant or None)`` that ``name`` (``NAME[:VARIANT]``, an alias
        or an alias standing for a variant) asks for."""
        base, _, variant = name.partition(":")
        if base not in self._specs:
            known = ", ".join(self.names()) or f"none: no *.yaml spec in {self.folder}"
            hint = did_you_mean(normalize_name(base), self._specs.keys())
            raise RegistryError(f"unknown benchmark {base!r}{hint} (known: {known})")
        bench = self._specs.canonical(base)
        implied = _implied_variant(self._specs.get(bench), base)
        if implied and variant and variant != implied:
            raise RegistryError(
                f"{base!r} is {bench}:{implied} already; for variant {variant!r} give "
                f"'{bench}:{variant}'"
            )
        return bench, variant or implied

    def get(self, name: str) -> BenchmarkSpec:
        """The spec called ``name`` (or ``name:variant``, or an alias of a variant)."""
        bench, variant = self.resolve(name)
        try:
            return self._specs.get(bench).with_variant(variant)
        except KeyError as exc:
            raise RegistryError(str(exc.args[0])) from None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and name.partition(":")[0] in self._specs

    @property
    def group(self) -> str | None:
        """The entry-point group its plug-ins come from."""
        return self._specs.group

    def load(self) -> None:
        """Add the installed plug-ins' benchmarks now (else on the first lookup)."""
        self._specs.load()

    def __len__(self) -> int:
        return len(self._specs)


def _implied_variant(spec: BenchmarkSpec, name: str) -> str | None:
    """The variant an alias ``name`` of ``spec`` stands for (``aliases: [A:VARIANT]``)."""
    key = normalize_name(name)
    for alias in spec.aliases:
        base, _, variant = alias.partition(":")
        if variant and normalize_name(base) == key:
            return variant
    return None


@lru_cache(maxsize=4)
def _registry(folder: str) -> BenchmarkRegistry:
    return BenchmarkRegistry(folder)


def registry() -> BenchmarkRegistry:
    """The registry of the shipped specs (cached per folder)."""
    return _registry(str(benchmarks_dir()))


def get_benchmark(name: str) -> BenchmarkSpec:
    """Shortcut: the shipped spec called ``name``."""
    return registry().get(name)
