"""`burnside conformance`: which burn layers, losses and optimizers compute what their PyTorch twins compute."""

from __future__ import annotations

from pathlib import Path

import click
from rich.text import Text

from burnside.cli.command import BurnsideCommand
from burnside.cli.console import stderr, stdout
from burnside.errors import BurnsideError

_OUT = click.Path(path_type=Path, dir_okay=False)


@click.command(cls=BurnsideCommand)
@click.option("--only", "only", multiple=True, metavar="GLOB",
              help="Only the cases whose id matches (e.g. 'conv2d/*', '*norm*'); repeatable.")
@click.option("--ci", is_flag=True, help="Only the bounded subset CI runs (seconds).")
@click.option("--list", "list_cases", is_flag=True, help="List the cases (id and configuration) and exit.")
@click.option("--json", "as_json", is_flag=True, help="Print the results as JSON instead of the table.")
@click.option("--report", type=_OUT, default=None, help="Also write the table as a self-contained HTML page.")
@click.option("--markdown", type=_OUT, default=None, help="Also write the table as Markdown (the README's).")
@click.option("--out-dir", type=click.Path(path_type=Path, file_okay=False), default=Path("burnside-out/conformance"),
              show_default=True, help="Where each case's traces go (one folder per case).")
def conformance(only, ci, list_cases, as_json, report, markdown, out_dir) -> None:
    """Train every burn layer, loss and optimizer that has a PyTorch twin on its twin's weights and data,
    judge both with a float64 run, and say for each: same (bit-identical or rounding), a framework difference
    (its size and cause), a different default (named, with the fix), or not comparable (why).

    Exit 0 when the suite ran (differences are its findings), 2 on unusable input.
    """
    from burnside.atomic import write_atomic
    from burnside.conformance import all_cases, run_suite, select
    from burnside.conformance.table import html_page, markdown as markdown_text, render_table, results_json
    from burnside.progress import Progress

    cases = select(all_cases(), only, ci)
    if not list_cases:  # before the suite runs: a bad output path is said in a line, not after the run
        for option, path in (("--report", report), ("--markdown", markdown)):
            if path is not None and not path.parent.is_dir():
                raise BurnsideError(f"{option} {path}: directory {path.parent} does not exist; create it or choose "
                                    "another path")
        try:
            out_dir.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise BurnsideError(f"--out-dir {out_dir}: cannot create it ({error.strerror}); choose another "
                                "directory") from None
    if list_cases:
        for case in cases:
            stdout.print(Text(f"{case.id:<36} {case.kind:<9} {case.title}"))
        return
    with Progress(stderr) as progress:
        results = run_suite(cases, out_dir, console=stderr, progress=progress.items("conformance"))
    if as_json:
        click.echo(results_json(results))
    else:
        render_table(results, stdout)
    for path, text in ((report, html_page), (markdown, markdown_text)):
        if path is not None:
            write_atomic(path, text(results))
            stderr.print(Text(f"wrote {path}", style="dim"))
