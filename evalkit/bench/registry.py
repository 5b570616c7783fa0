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
from pathlib import Path

from evalkit._layout import package_folder
from evalkit.bench.spec import BenchmarkSpec, normalize_name
from evalkit.config import load_yaml_model
from evalkit.errors import ConfigError
from evalkit.registry import RegistryError, did_you_mean


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
    """Specs of one folder, by normalised name and aliases."""

    def __init__(self, folder: str | Path) -> None:
        self.folder = Path(folder)
        self._specs: dict[str, BenchmarkSpec] = {}
        self._keys: dict[str, tuple[str, str | None]] = {}
        """Normalised name or alias -> (benchmark, the variant the alias stands for)."""
        for path in sorted(self.folder.glob("*.yaml")):
            spec = load_spec(path)
            if spec.name in self._specs:
                raise ConfigError(f"{path}: benchmark {spec.name!r} is defined twice")
            self._specs[spec.name] = spec
            for key in [spec.name, *spec.aliases]:
                alias, _, variant = key.partition(":")
                k = normalize_name(alias)
                owner = self._keys.get(k, (spec.name, None))[0]
                if owner != spec.name:
                    raise ConfigError(f"{path}: name {alias!r} already used by {owner!r}")
                self._keys[k] = (spec.name, variant or None)

    def names(self) -> list[str]:
        """Display names, sorted."""
        return sorted(self._specs, key=str.lower)

    def specs(self) -> list[BenchmarkSpec]:
        """All specs, sorted by name."""
        return [self._specs[n] for n in self.names()]

    def resolve(self, name: str) -> tuple[str, str | None]:
        """``(benchmark name, variant or None)`` that ``name`` (``NAME[:VARIANT]``, an alias
        or an alias standing for a variant) asks for."""
        base, _, variant = name.partition(":")
        key = normalize_name(base)
        if key not in self._keys:
            hint = did_you_mean(key, {k: v[0] for k, v in self._keys.items()})
            known = ", ".join(self.names()) or f"none: no *.yaml spec in {self.folder}"
            raise RegistryError(f"unknown benchmark {base!r}{hint} (known: {known})")
        bench, implied = self._keys[key]
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
            return self._specs[bench].with_variant(variant)
        except KeyError as exc:
            raise RegistryError(str(exc.args[0])) from None

    def __contains__(self, name: object) -> bool:
        return isinstance(name, str) and normalize_name(name.partition(":")[0]) in self._keys

    def __len__(self) -> int:
        return len(self._specs)


@lru_cache(maxsize=4)
def _registry(folder: str) -> BenchmarkRegistry:
    return BenchmarkRegistry(folder)


def registry() -> BenchmarkRegistry:
    """The registry of the shipped specs (cached per folder)."""
    return _registry(str(benchmarks_dir()))


def get_benchmark(name: str) -> BenchmarkSpec:
    """Shortcut: the shipped spec called ``name``."""
    return registry().get(name)
