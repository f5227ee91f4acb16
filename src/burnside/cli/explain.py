"""`burnside explain ID`: what a lint or diagnosis rule checks, why, and the fix."""

from __future__ import annotations

import click
from rich.markdown import Markdown
from rich.panel import Panel

from burnside.cli.command import BurnsideCommand
from burnside.cli.console import stdout
from burnside.errors import BurnsideError
from burnside.rule_registry import all_rules, find_rule


@click.command(cls=BurnsideCommand)
@click.argument("rule_id", metavar="ID")
def explain(rule_id: str) -> None:
    """Print what a lint rule (BS001) or diagnosis rule (D001) checks, why it matters, and the fix."""
    rule = find_rule(rule_id)
    if rule is None:
        known = ", ".join(r.id for r in all_rules())
        raise BurnsideError(f"unknown rule {rule_id}; known rules: {known}")
    what = "lint rule of `burnside lint`" if rule.kind == "lint" else "diagnosis rule of `burnside compare`"
    title = f"{rule.id} ({rule.name}) · {what} · default severity: {rule.severity.value}"
    # the console soft-wraps for tables a program reads; a panel of prose must wrap inside its border
    stdout.print(Panel(Markdown(rule.doc), title=title, title_align="left"), soft_wrap=False)
