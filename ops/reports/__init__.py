"""Benchmark reports: a markdown file, a JSON results file and PNG plots in one directory,
plus rich tables on the console. Every ``semsched bench …`` command writes through
:class:`Report`."""

from ops.reports.report import Report, ReportError

__all__ = ["Report", "ReportError"]
