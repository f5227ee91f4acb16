"""Options shared by the commands that compare (`compare`, `run`, `check`): tolerances and output."""

from __future__ import annotations

import math
from collections.abc import Callable
from pathlib import Path

import click

from burnside.compare import Tolerance, Tolerances, load_tolerances


def _finite_non_negative(ctx: click.Context, param: click.Parameter, value: float | None) -> float | None:
    if value is not None and not (math.isfinite(value) and value >= 0):
        raise click.BadParameter(f"{value} is not a finite number >= 0")
    return value


def _apply(options: list, command: Callable) -> Callable:
    for option in reversed(options):
        command = option(command)
    return command


def tolerance_options(command: Callable) -> Callable:
    """Add --tol, --rtol, --ulps, --tolerances, --only, --skip and --reference: what a comparison judges by."""
    return _apply([
        click.option("--tol", type=float, default=None, callback=_finite_non_negative,
                     help="Absolute tolerance per element  [default: 1e-06; run: the model's own]."),
        click.option("--rtol", type=float, default=0.0, show_default=True, callback=_finite_non_negative,
                     help="Relative tolerance: an element passes when |a-b| <= tol + rtol*|b|."),
        click.option("--ulps", type=click.IntRange(min=0), default=None,
                     help="Also accept elements within this many ULPs."),
        click.option("--tolerances", "tolerances_file", type=click.Path(path_type=Path, dir_okay=False), default=None,
                     help="Per-tensor tolerances (.toml or .json; see docs/compare.md)."),
        click.option("--only", multiple=True, metavar="GLOB",
                     help="Compare only the tensors this glob matches (repeat it: a tensor any of them matches)."),
        click.option("--skip", multiple=True, metavar="GLOB",
                     help="Leave out the tensors this glob matches (repeatable)."),
        click.option("--reference", type=click.Path(path_type=Path, dir_okay=False), default=None,
                     help="A float64 reference trace (burnside.reference): judge each tensor by both sides' "
                     "distance to it, so rounding noise passes and a real difference names its side."),
    ], command)


def comparison_options(command: Callable) -> Callable:
    """The tolerance options, and --json, --plot, --junit and --report: what to write besides the table."""
    return tolerance_options(_apply([
        click.option("--json", "as_json", is_flag=True, help="Print the whole result as JSON."),
        click.option("--plot", type=click.Path(path_type=Path, dir_okay=False), default=None,
                     help="Also write a PNG of loss and drift per step."),
        click.option("--junit", type=click.Path(path_type=Path, dir_okay=False), default=None,
                     help="Also write the result as JUnit XML (a test case per tensor), for CI systems."),
        click.option("--report", type=click.Path(path_type=Path, dir_okay=False), default=None,
                     help="Also write the HTML report (one self-contained page: verdict, findings, plots, "
                     "metadata, every tensor)."),
    ], command))


def tolerances_from(tol: float | None, rtol: float, ulps: int | None, tolerances_file: Path | None,
                    default_atol: float = 1e-6) -> Tolerances:
    """The default tolerance from the options (``default_atol`` without --tol), overridden per tensor
    by the file if given."""
    default = Tolerance(atol=default_atol if tol is None else tol, rtol=rtol, ulps=ulps)
    return load_tolerances(tolerances_file, default) if tolerances_file else Tolerances(default)
