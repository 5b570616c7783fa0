"""Frame cache: decoded, resized frames per (video, FrameSpec) in safetensors files, mmap'd.

``FrameCache(root).get(ref, spec)`` returns Frames, decoding and storing them on a miss;
``build_cache(cache, refs, spec, workers=N)`` fills the cache with N processes (``spec`` may
be a list: each video is then decoded once for all of them, as ``cache.ensure_specs`` does). See
``frame_cache.py`` for the layout and ``entry.py`` for what a file holds.
"""

from evalkit.cache.build import BuildReport
from evalkit.cache.build import build as build_cache
from evalkit.cache.frame_cache import FrameCache, default_root
from evalkit.cache.key import FORMAT_VERSION, cache_key, source_identity
from evalkit.cache.maintenance import listing, prune, verify

__all__ = [
    "FORMAT_VERSION",
    "BuildReport",
    "FrameCache",
    "build_cache",
    "cache_key",
    "default_root",
    "listing",
    "prune",
    "source_identity",
    "verify",
]
