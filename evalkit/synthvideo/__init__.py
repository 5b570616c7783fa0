"""SynthVideo: a small synthetic video benchmark, generated from a seed, answers known.

One question family per task type evalkit scores (moving shapes -> multiple choice,
flashes -> counting, appearance -> temporal grounding, location -> spatial grounding,
tracking -> spatio-temporal grounding, a written word -> OCR, an equation -> math,
yes/no questions -> boolean). ``generate(out_dir, n_per_family, split, seed)`` writes the
videos and ``synthvideo_<split>.jsonl``; ``benchmarks/synthvideo.yaml`` loads them.
It feeds the CPU demo, the tests and the trainer's cold-start runs (train split).
"""

from evalkit.synthvideo.families import FAMILIES, Family, family
from evalkit.synthvideo.generate import (
    SPLITS,
    VERSION,
    annotation_name,
    generate,
    make_row,
    read_rows,
    sample_id,
    to_unified,
    write_unified,
    write_video,
)

__all__ = [
    "FAMILIES",
    "SPLITS",
    "VERSION",
    "Family",
    "annotation_name",
    "family",
    "generate",
    "make_row",
    "read_rows",
    "sample_id",
    "to_unified",
    "write_unified",
    "write_video",
]
