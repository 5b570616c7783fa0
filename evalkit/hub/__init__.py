"""Data and models from the Hugging Face Hub: a benchmark's release fetched on first use
into ``EVALKIT_DATA`` (``evalkit.hub.fetch``), a model by hub id (``evalkit.hub.models``),
and where each of the 22 benchmarks comes from (``evalkit.hub.catalog``).

Importing this package imports neither ``huggingface_hub`` nor anything heavy: the calls
to the Hub are made inside the functions that need them.
"""

from __future__ import annotations

from evalkit.hub.fetch import FetchDisabled, Need, fetch_command, open_release, release_root
from evalkit.hub.home import data_home, forget_commit, hub_offline, known_commit

__all__ = [
    "FetchDisabled",
    "Need",
    "data_home",
    "fetch_command",
    "forget_commit",
    "hub_offline",
    "known_commit",
    "open_release",
    "release_root",
]
