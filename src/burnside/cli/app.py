"""The root command group: `--version`, the commands in pipeline order, and the one error path."""

from __future__ import annotations

import click

from burnside import __version__
from burnside.cli.check import check
from burnside.cli.command import BurnsideGroup
from burnside.cli.compare import compare, convert, report
from burnside.cli.experiments import experiments
from burnside.cli.explain import explain
from burnside.cli.lint import lint
from burnside.cli.run import run


@click.group(cls=BurnsideGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="burnside", message="%(prog)s %(version)s")
def app() -> None:
    """Prove a burn port of a PyTorch training loop trains the same; name the silent failures."""


for command in (run, check, compare, report, convert, lint, explain, experiments):  # pipeline order
    app.add_command(command)


def main() -> None:
    """Console-script entry point."""
    app(prog_name="burnside")
