"""The one registry mechanism: names and aliases normalised once, explicit lazy entries,
a base type checked on register, entry points read on the first lookup (a broken one an
error naming it, at every lookup)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from evalkit.registry import PluginError, Ref, Registry, RegistryError, normalize_name


def _registry(**kw: object) -> Registry[int]:
    return Registry("number", base=int, normalize=normalize_name, **kw)  # type: ignore[arg-type]


def _dist(path: Path, group: str, entries: dict[str, str], module: str) -> None:
    """A distribution on ``path`` (its dist-info and one module) with entry points."""
    info = path / "test_plug-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: test-plug\nVersion: 0.1\n")
    lines = [f"[{group}]", *(f"{k} = {v}" for k, v in entries.items())]
    (info / "entry_points.txt").write_text("\n".join(lines) + "\n")
    (path / "test_plug_mod.py").write_text(module)


@pytest.fixture
def plug_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.delitem(sys.modules, "test_plug_mod", raising=False)
    return tmp_path


def test_a_name_and_its_aliases_are_looked_up_normalised() -> None:
    reg = _registry()
    reg.register("Forty-Two", 42, aliases=["the answer"])
    assert reg.get("forty_two") == reg.get("The-Answer") == 42
    assert reg.canonical("THEANSWER") == "Forty-Two" and reg.names() == ["Forty-Two"]
    with pytest.raises(RegistryError, match="alias 'theanswer' already names 'Forty-Two'"):
        reg.register("other", 1, aliases=["The Answer"])
    assert "other" not in reg


def test_an_entry_of_another_type_is_refused_on_register_or_when_resolved() -> None:
    reg = _registry()
    with pytest.raises(RegistryError, match="number 'pi' is a float, not a int"):
        reg.register("pi", 3.14)
    reg.register_lazy("e", "math:e")
    with pytest.raises(RegistryError, match="number 'e' is a float"):
        reg.get("e")


def test_a_lazy_entry_is_imported_on_first_get_only() -> None:
    reg: Registry[object] = Registry("thing")
    reg.register("ref", Ref("json:dumps"))
    reg.register("str", "json:loads")  # a string entry is a reference too
    assert isinstance(reg._entries["ref"], Ref)
    assert reg.get("ref").__name__ == "dumps" and reg.get("str").__name__ == "loads"
    with pytest.raises(RegistryError, match="is not a 'module:attr' ref"):
        reg.register("plain", "no colon")


def test_entry_points_are_read_on_the_first_lookup(plug_path: Path) -> None:
    _dist(plug_path, "evalkit.test_numbers", {"seven": "test_plug_mod:SEVEN"}, "SEVEN = 7\n")
    reg = _registry(group="evalkit.test_numbers")
    assert "test_plug_mod" not in sys.modules  # nothing read on construction
    assert reg.get("Seven") == 7 and reg.names() == ["seven"]


def test_a_broken_entry_point_is_an_error_naming_it_at_every_lookup(plug_path: Path) -> None:
    _dist(plug_path, "evalkit.test_numbers", {"bad": "test_plug_mod:X"}, "raise ValueError(1)")
    reg = _registry(group="evalkit.test_numbers")
    reg.register("one", 1)
    for _ in range(2):
        with pytest.raises(PluginError, match="plug-in 'bad' = 'test_plug_mod:X' of test-plug"):
            reg.get("one")


def test_a_plugin_taking_a_registered_name_is_an_error_naming_it(plug_path: Path) -> None:
    _dist(plug_path, "evalkit.test_numbers", {"one": "test_plug_mod:ONE"}, "ONE = 1\n")
    reg = _registry(group="evalkit.test_numbers")
    reg.register("one", 1)
    with pytest.raises(PluginError, match=r"'one' = 'test_plug_mod:ONE'.*already registered"):
        list(reg)
