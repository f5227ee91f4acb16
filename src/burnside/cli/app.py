"""The root command group: `--version`, the commands in pipeline order, and the one error path."""

from __future__ import annotations

import importlib

import click

from burnside import __version__
from burnside.cli.command import BurnsideGroup

# Where each command lives, in pipeline order. A command's module is imported
# when that command runs (or `--help` lists them all): `burnside lint` and
# `burnside explain` need neither numpy nor the cargo and trace machinery the
# others import, and importing all of it cost 0.7 s at every start.
_COMMANDS = {
    "new": "burnside.cli.new:new",
    "run": "burnside.cli.run:run",
    "check": "burnside.cli.check:check",
    "compare": "burnside.cli.compare:compare",
    "report": "burnside.cli.compare:report",
    "convert": "burnside.cli.compare:convert",
    "lint": "burnside.cli.lint:lint",
    "explain": "burnside.cli.explain:explain",
    "experiments": "burnside.cli.experiments:experiments",
}


class _LazyGroup(BurnsideGroup):
    """A group that imports a command's module only when the command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*_COMMANDS, *sorted(set(self.commands) - set(_COMMANDS))]  # pipeline order, as `--help` shows

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in _COMMANDS:
            module, attribute = _COMMANDS[name].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return self.commands.get(name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="burnside", message="%(prog)s %(version)s")
def app() -> None:
    """Prove a burn port of a PyTorch training loop trains the same; name the silent failures."""


def main() -> None:
    """Console-script entry point."""
    app(prog_name="burnside")
