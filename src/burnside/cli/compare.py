"""`burnside compare` and `burnside convert`: two traces tensor by tensor; a trace in the other form."""

from __future__ import annotations

from pathlib import Path

import click

from burnside.cli.command import BurnsideCommand
from burnside.cli.options import comparison_options, tolerances_from
from burnside.cli.output import finish, stdout
from burnside.compare import compare_traces, open_reference
from burnside.diagnose import diagnose
from burnside.trace import convert_trace, open_trace

_TRACE = click.Path(path_type=Path, dir_okay=False)


@click.command(cls=BurnsideCommand)
@click.argument("a", type=_TRACE)
@click.argument("b", type=_TRACE)
@comparison_options
def compare(a: Path, b: Path, tol, rtol, ulps, tolerances_file, only, reference, as_json, plot, junit) -> None:
    """Compare trace A (the reference, usually PyTorch) with trace B (usually burn), tensor by tensor.

    Exit 0 within tolerance, 1 on a mismatch, 2 on unusable input.
    """
    comparison = compare_traces(open_trace(a), open_trace(b), tolerances_from(tol, rtol, ulps, tolerances_file), only,
                                reference=open_reference(reference) if reference is not None else None)
    finish(comparison, diagnose(comparison), as_json=as_json, plot=plot, junit=junit)


@click.command(cls=BurnsideCommand)
@click.argument("src", type=_TRACE)
@click.argument("dst", type=_TRACE)
def convert(src: Path, dst: Path) -> None:
    """Rewrite trace SRC as DST in the other form (.safetensors or .json), bit for bit."""
    convert_trace(src, dst)
    stdout.print(f"wrote {dst}")
