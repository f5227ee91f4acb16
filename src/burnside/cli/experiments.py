"""`burnside experiments list|run`: the seed pages' experiments S1-S16."""

from __future__ import annotations

from pathlib import Path

import click
from rich.text import Text

from burnside.cli.command import BurnsideGroup
from burnside.cli.output import stdout


@click.group(cls=BurnsideGroup)
def experiments() -> None:
    """The seed pages' experiments S1-S16."""


@experiments.command("list")
def experiments_list() -> None:
    """List the experiments: ID, seed page, sides, title."""
    from burnside.experiments import all_experiments

    for e in all_experiments():
        stdout.print(Text(f"{e.id:<4} page {e.page}  {'+'.join(e.sides):<11} {e.title}"))


@experiments.command("run")
@click.argument("ids", nargs=-1, required=True, metavar="ID... | all")
@click.option("--out-dir", type=click.Path(path_type=Path, file_okay=False), default=Path("burnside-out"),
              show_default=True, help="Where experiments write files.")
def experiments_run(ids: tuple[str, ...], out_dir: Path) -> None:
    """Run experiments; each prints what its seed page prints and checks the page's claim."""
    from burnside.experiments import (
        Context,
        all_experiments,
        get_experiment,
        run_experiment,
    )

    chosen = all_experiments() if [i.lower() for i in ids] == ["all"] else [get_experiment(i) for i in ids]
    failed = []
    for experiment in chosen:
        ctx = Context(console=stdout, workdir=out_dir / experiment.id.lower())
        if not run_experiment(experiment, ctx).passed:
            failed.append(experiment.id)
        stdout.print()
    if failed:
        stdout.print(Text(f"claims that did not hold: {', '.join(failed)}", style="bold red"))
        raise click.exceptions.Exit(1)
