"""evalkit: an evaluation-first toolkit for video language models.

Importing this package is cheap: it never imports vLLM, torch or ray. Heavy parts are
loaded lazily by the modules that need them.
"""

__version__ = "0.1.0"
