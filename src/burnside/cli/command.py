"""burnside's click classes: usage errors that always show usage, user errors as one red line."""

from __future__ import annotations

import click
from rich.console import Console
from rich.text import Text

from burnside.errors import BurnsideError


class UserError(click.ClickException):
    """A BurnsideError or OSError on its way out: one red line on stderr, its exit code (2)."""

    def __init__(self, message: str, exit_code: int = 2) -> None:
        super().__init__(message)
        self.exit_code = exit_code

    def show(self, file=None) -> None:
        Console(stderr=True, highlight=False, soft_wrap=True).print(
            Text("error: ", style="bold red") + Text(self.message))


class BurnsideGroup(click.Group):
    """A group that turns the user's errors into `UserError`, so the console script and tests that
    invoke the app (click's CliRunner) take the same path: click prints it and exits with its code."""

    def invoke(self, ctx: click.Context):
        try:
            return super().invoke(ctx)
        except BurnsideError as exc:
            raise UserError(str(exc), exc.exit_code) from None
        except OSError as exc:  # permission denied, disk full, ...: the user's to fix, not a traceback
            where = f"{exc.filename}: " if exc.filename else ""
            raise UserError(f"{where}{exc.strerror or exc}") from None


class BurnsideCommand(click.Command):
    """A command whose usage errors always carry their context, so click prints the usage line
    (click leaves it out for an option missing its value)."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        try:
            return super().parse_args(ctx, args)
        except click.UsageError as exc:
            if exc.ctx is None:
                exc.ctx = ctx
            raise


BurnsideGroup.command_class = BurnsideCommand
