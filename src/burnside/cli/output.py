"""How the comparing commands print a result and pick the exit code."""

from __future__ import annotations

from pathlib import Path

import click
from rich.text import Text

from burnside.atomic import atomic_output
from burnside.cli.console import stderr, stdout
from burnside.compare import Comparison
from burnside.diagnose import Diagnosis
from burnside.report import comparison_json, comparison_junit, plot_drift, render, write_html_report
from burnside.report.distribution import reference_losses


def finish(comparison: Comparison, diagnoses: list[Diagnosis], *, as_json: bool, plot: Path | None,
           junit: Path | None = None, report: Path | None = None) -> None:
    """Print the table and diagnoses (or JSON), write the plot, JUnit XML and HTML report if asked,
    exit 0 (OK) or 1."""
    if as_json:
        click.echo(comparison_json(comparison, diagnoses))
    else:
        render(comparison, diagnoses, stdout)
    if plot is not None:
        losses = reference_losses(comparison.reference) if comparison.reference is not None else None
        plot_drift(comparison, plot, losses)
        stderr.print(Text(f"plot: {plot}", style="dim"))
    if junit is not None:
        with atomic_output(junit, "w") as handle:
            handle.write(comparison_junit(comparison, diagnoses))
        stderr.print(Text(f"junit: {junit}", style="dim"))
    if report is not None:
        write_report(comparison, diagnoses, report)
    raise click.exceptions.Exit(0 if comparison.passed else 1)


def write_report(comparison: Comparison, diagnoses: list[Diagnosis], path: Path) -> None:
    """Write the HTML report, with a status line while the plots are drawn."""
    with stderr.status("writing the HTML report (plots)…"):
        write_html_report(comparison, diagnoses, path)
    stderr.print(Text(f"report: {path}", style="dim"))
