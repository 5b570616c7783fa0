"""Report rendering: official breakdown tables, reference comparisons, plots."""
