"""The `burnside` command line: parses arguments, calls the library, renders, picks the exit code."""

from __future__ import annotations

import sys

import typer
from rich.console import Console

from burnside.errors import BurnsideError

app = typer.Typer(
    name="burnside",
    help="Prove a burn port of a PyTorch training loop trains the same; name the silent failures.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)
err_console = Console(stderr=True, highlight=False)


def main() -> None:
    """Console-script entry point: user errors become one red line and exit code 2."""
    try:
        app(standalone_mode=False)
    except BurnsideError as exc:
        err_console.print(f"[bold red]error:[/] {exc}", markup=True, soft_wrap=True)
        sys.exit(exc.exit_code)
    except typer.Exit as exc:
        sys.exit(exc.exit_code)
    except (typer.Abort, KeyboardInterrupt):
        err_console.print("[bold red]aborted[/]")
        sys.exit(130)
    except Exception as exc:  # click's usage errors arrive here in non-standalone mode
        import click

        if isinstance(exc, click.exceptions.ClickException):
            exc.show()
            sys.exit(exc.exit_code)
        raise


# --- commands -------------------------------------------------------------
# Each command module registers itself here; keep this list in pipeline order.

# lint: `burnside lint` and `burnside explain` (src/burnside/lint/command.py).
from burnside.lint.command import register as _register_lint  # noqa: E402

_register_lint(app)
