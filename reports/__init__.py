"""Report rendering: official breakdown tables, reference comparisons, plots.

``load_run`` reads a run directory into per-benchmark official aggregates (with standard
errors and sample counts); ``verdicts`` checks them against published reference scores;
``compare`` sets two runs side by side with a paired bootstrap; ``build_report`` and
``write_report`` produce the terminal table, Markdown, HTML (embedded PNG plots) and JSON.
Importing this package does not import matplotlib (plots import it when drawn).
"""

from .load import BenchmarkReport, Counts, RunReport, load_run
from .reference import ReferenceCheck, Verdict, verdicts
from .report import FORMATS, Report, build_report, write_report
from .stats import Comparison, compare

__all__ = [
    "FORMATS",
    "BenchmarkReport",
    "Comparison",
    "Counts",
    "ReferenceCheck",
    "Report",
    "RunReport",
    "Verdict",
    "build_report",
    "compare",
    "load_run",
    "verdicts",
    "write_report",
]
