"""The one registry mechanism: names and aliases normalised once, explicit lazy entries,
a base type checked on register, entry points read on the first lookup, after every
built-in entry (a broken one skipped with a warning naming it; one taking a name refused
whole)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from evalkit import plugins
from evalkit.plugins import PluginWarning
from evalkit.registry import Ref, Registry, RegistryError, normalize_name


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
    for name in ("test_plug_mod", "test_plug_reg", "test_plug_builtin"):
        monkeypatch.delitem(sys.modules, name, raising=False)
    monkeypatch.setattr(plugins, "_PLUGINS", {})  # this test's plug-ins only
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


def test_a_broken_entry_point_is_skipped_with_a_warning_naming_it(plug_path: Path) -> None:
    _dist(plug_path, "evalkit.test_numbers", {"bad": "test_plug_mod:X"}, "raise ValueError(1)")
    reg = _registry(group="evalkit.test_numbers")
    reg.register("one", 1)
    said = "plug-in 'bad' = 'test_plug_mod:X' of test-plug 0.1 .* does not load: ValueError: 1"
    with pytest.warns(PluginWarning, match=said):
        assert reg.get("one") == 1  # the lookup goes on without it
    assert reg.names() == ["one"]  # said once
    (problem,) = plugins.problems(["evalkit.test_numbers"])
    assert problem.name == "bad" and not plugins.loaded()


def test_a_plugin_taking_a_registered_name_is_refused_naming_both(plug_path: Path) -> None:
    _dist(plug_path, "evalkit.test_numbers", {"one": "test_plug_mod:ONE"}, "ONE = 11\n")
    reg = _registry(group="evalkit.test_numbers")
    reg.register("one", 1)
    said = r"'one' = 'test_plug_mod:ONE'.* refused: number 'one' is already registered \(by evalkit"
    with pytest.warns(PluginWarning, match=said):
        assert reg.get("one") == 1


REGISTRIES = """\
from evalkit.registry import Registry

LETTERS = Registry("letter", modules=lambda: ["test_plug_builtin"])
"""


def test_a_plugin_is_refused_whole_and_every_builtin_entry_stays(plug_path: Path) -> None:
    # the case: a plug-in of one group registering into another registry, whose
    # built-ins are imported lazily, before anything looked that registry up
    (plug_path / "test_plug_reg.py").write_text(REGISTRIES)
    builtin = (
        "from test_plug_reg import LETTERS\nLETTERS.register('x', 1)\nLETTERS.register('y', 2)\n"
    )
    (plug_path / "test_plug_builtin.py").write_text(builtin)
    module = (
        "from test_plug_reg import LETTERS\nLETTERS.register('new', 3)\nLETTERS.register('x', 4)\n"
    )
    _dist(plug_path, "evalkit.test_numbers", {"mod": "test_plug_mod"}, module)
    reg = _registry(group="evalkit.test_numbers")
    with pytest.warns(PluginWarning, match="'mod' = 'test_plug_mod'.* refused: letter 'x' is al"):
        assert reg.names() == []
    from test_plug_reg import LETTERS  # type: ignore[import-not-found]

    assert LETTERS.names() == ["x", "y"] and LETTERS.get("x") == 1  # "new" taken back too
