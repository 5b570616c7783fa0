"""Where evalkit's bundled folders live, installed or in a source checkout.

pyproject.toml installs four top-level folders of the repository under evalkit's
namespace with setuptools ``package-dir`` (``evalkit.benchmarks`` <- ``benchmarks/``,
``evalkit.prompt_templates`` <- ``prompts/``, ``evalkit.reports`` <- ``reports/``,
``evalkit.trainer`` <- ``trainer/``). A wheel holds them inside ``evalkit/``; an editable
install maps them with setuptools' own import finder. A checkout used without installing
it (``python -m pytest`` from the root puts the root on ``sys.path``) has neither, so
:func:`install_checkout_finder` maps the same names onto the same folders. Data is then
found the one way for all three: :func:`package_folder` asks ``importlib.resources``.
"""

from __future__ import annotations

import importlib.abc
import importlib.machinery
import importlib.resources
import importlib.util
import sys
from collections.abc import Sequence
from pathlib import Path
from types import ModuleType

SUBPACKAGES = {
    "benchmarks": "benchmarks",
    "prompt_templates": "prompts",
    "reports": "reports",
    "trainer": "trainer",
}
"""``evalkit.<key>`` -> the top-level folder that holds it (pyproject's package-dir)."""


class _CheckoutFinder(importlib.abc.MetaPathFinder):
    """Imports ``evalkit.<SUBPACKAGES key>`` from the checkout's top-level folder."""

    def __init__(self, root: Path) -> None:
        self.root = root

    def find_spec(
        self,
        fullname: str,
        path: Sequence[str] | None = None,
        target: ModuleType | None = None,
    ) -> importlib.machinery.ModuleSpec | None:
        """A spec for the mapped names only; None (ask the next finder) for the rest."""
        parent, _, name = fullname.rpartition(".")
        if parent != "evalkit" or name not in SUBPACKAGES:
            return None
        folder = self.root / SUBPACKAGES[name]
        init = folder / "__init__.py"
        if not init.is_file():
            return None
        return importlib.util.spec_from_file_location(
            fullname, init, submodule_search_locations=[str(folder)]
        )


def install_checkout_finder(package_dir: Path) -> None:
    """Map the subpackages onto the checkout when ``package_dir`` is a source evalkit/.

    A wheel's evalkit/ holds the subpackages itself (nothing to do). In a checkout (or an
    editable install, whose folders are the same) the finder goes first on
    ``sys.meta_path``, so the tree that ``evalkit`` was imported from is the tree its
    subpackages come from, never another installed copy.
    """
    root = package_dir.parent
    if (package_dir / "reports").exists() or not (root / "pyproject.toml").is_file():
        return
    if any(isinstance(f, _CheckoutFinder) for f in sys.meta_path):
        return
    sys.meta_path.insert(0, _CheckoutFinder(root))


def package_folder(package: str) -> Path:
    """The folder on disk of a data package (``evalkit.benchmarks``, ...)."""
    folder = importlib.resources.files(package)
    if not isinstance(folder, Path):  # a zip import: Jinja and glob need real files
        raise RuntimeError(
            f"{package} is not a folder on disk ({folder!r}); install evalkit unzipped"
        )
    return folder
