"""`burnside compare`, `report` and `convert`: two traces tensor by tensor (as a table or an HTML page);
a trace in the other form."""

from __future__ import annotations

from pathlib import Path

import click

from burnside.cli.command import BurnsideCommand
from burnside.cli.options import comparison_options, tolerance_options, tolerances_from
from burnside.cli.output import finish, stderr, stdout, write_report
from burnside.compare import Comparison
from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.progress import Progress
from burnside.report.table import verdict_line
from burnside.trace import convert_trace

_TRACE = click.Path(path_type=Path, dir_okay=False)


@click.command(cls=BurnsideCommand)
@click.argument("a", type=_TRACE)
@click.argument("b", type=_TRACE)
@comparison_options
def compare(a: Path, b: Path, tol, rtol, ulps, tolerances_file, only, skip, reference, as_json, plot, junit,
            report) -> None:
    """Compare trace A (the reference, usually PyTorch) with trace B (usually burn), tensor by tensor.

    Exit 0 within tolerance, 1 on a mismatch, 2 on unusable input.
    """
    comparison = _compare(a, b, tol, rtol, ulps, tolerances_file, only, skip, reference)
    finish(comparison, diagnose(comparison), as_json=as_json, plot=plot, junit=junit, report=report)


@click.command(cls=BurnsideCommand)
@click.argument("a", type=_TRACE)
@click.argument("b", type=_TRACE)
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), required=True,
              help="The HTML file to write.")
@tolerance_options
def report(a: Path, b: Path, output: Path, tol, rtol, ulps, tolerances_file, only, skip, reference) -> None:
    """Compare trace A with trace B and write the HTML report: verdict, findings, plots, both sides'
    metadata and every tensor, in one self-contained page.

    Prints the verdict line. Exit 0 within tolerance, 1 on a mismatch, 2 on unusable input.
    """
    comparison = _compare(a, b, tol, rtol, ulps, tolerances_file, only, skip, reference)
    write_report(comparison, diagnose(comparison), output)
    stdout.print(verdict_line(comparison))
    raise click.exceptions.Exit(0 if comparison.passed else 1)


def _compare(a: Path, b: Path, tol, rtol, ulps, tolerances_file, only, skip, reference) -> Comparison:
    with Progress(stderr) as progress:
        return compare_with_evidence(a, b, tolerances_from(tol, rtol, ulps, tolerances_file), only, reference=reference,
                                     progress=progress.tensors(), skip=skip)


@click.command(cls=BurnsideCommand)
@click.argument("src", type=_TRACE)
@click.argument("dst", type=_TRACE)
def convert(src: Path, dst: Path) -> None:
    """Rewrite trace SRC as DST in the other form (.safetensors or .json), bit for bit."""
    convert_trace(src, dst)
    stdout.print(f"wrote {dst}")
