"""evalkit: an evaluation-first toolkit for video language models.

Importing this package is cheap: it never imports vLLM, torch or ray. Heavy parts are
loaded lazily by the modules that need them.
"""

__version__ = "0.1.0"

from pathlib import Path as _Path

from evalkit._layout import install_checkout_finder as _install_checkout_finder

# a checkout used in place maps evalkit.benchmarks / .prompt_templates / .reports / .trainer
# onto its top-level folders, as an installed wheel holds them (see evalkit/_layout.py)
_install_checkout_finder(_Path(__file__).resolve().parent)
