"""Report rendering: official breakdown tables, reference comparisons, plots.

``load_run`` reads a run directory into per-benchmark official aggregates (with standard
errors and sample counts); ``verdicts`` checks them against published reference scores;
``compare`` sets two runs side by side with a paired bootstrap; ``build_report`` and
``write_report`` produce the terminal table, Markdown, HTML (embedded PNG plots) and JSON.
Importing this package does not import matplotlib (plots import it when drawn).
"""

if __name__ != "evalkit.reports":
    # a checkout's root on sys.path makes the folder importable as `reports` too: a second
    # copy of every module, and a name that does not exist once installed
    raise ImportError(f"import evalkit.reports, not {__name__} (reports/ installs under evalkit)")

from .load import load_run
from .model import BenchmarkReport, Counts, ReferenceCheck, RunReport
from .reference import Verdict, verdicts
from .report import FORMATS, Report, build_report, write_report
from .uncertainty import Comparison, compare

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
