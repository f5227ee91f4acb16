"""Presenting results: the comparison table, its JSON and JUnit XML, plots, and the HTML report."""

from burnside.report.html import write_html_report
from burnside.report.json_report import comparison_json
from burnside.report.junit import comparison_junit
from burnside.report.plot import plot_drift
from burnside.report.table import render

__all__ = ["comparison_json", "comparison_junit", "plot_drift", "render", "write_html_report"]
