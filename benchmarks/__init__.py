"""Benchmark specs shipped with evalkit (``*.yaml``) and their adapters (``*.py``).

Installed as ``evalkit.benchmarks`` (pyproject package-dir); adapters are loaded by file
beside their spec (see evalkit.bench.loader.load_hook), not imported through this package.
"""
