"""`burnside lint`: the silent burn training bugs in Rust source."""

from __future__ import annotations

import io
import sys
from pathlib import Path

import click
from rich.console import Console

from burnside.atomic import write_atomic
from burnside.cli.command import BurnsideCommand
from burnside.cli.console import stderr, stdout
from burnside.errors import BurnsideError


def _split(value: str | None) -> list[str] | None:
    if not value:
        return None
    return [part for part in value.replace(" ", ",").split(",") if part]


def _write(path: Path, content: str) -> None:
    if not path.parent.is_dir() and str(path.parent) not in ("", "."):
        raise BurnsideError(f"{path}: directory {path.parent} does not exist; create it or choose another --output")
    write_atomic(path, content)


@click.command(cls=BurnsideCommand)
@click.argument("paths", nargs=-1, type=click.Path(path_type=Path))
@click.option("--format", "output_format", type=click.Choice(["text", "json", "sarif"]), default="text",
              show_default=True, help="Report format.")
@click.option("--select", default=None, help="Only these rules, e.g. BS001,BS002.")
@click.option("--ignore", default=None, help="Skip these rules.")
@click.option("-o", "--output", type=click.Path(path_type=Path, dir_okay=False), default=None,
              help="Write the report to this file (atomically).")
@click.option("--root", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Paths in reports are relative to this (default: the current directory).")
@click.option("--rustc", type=click.Path(path_type=Path, file_okay=False), default=None,
              help="Also run `cargo check` with -W unused_results in this crate and merge its step warnings.")
@click.option("-j", "--jobs", type=click.IntRange(min=1), default=None, help="Worker processes (default: up to 2).")
def lint(paths, output_format, select, ignore, output, root, rustc, jobs) -> None:
    """Find silent burn training bugs (discarded optimizer steps, wrong-module grads, ...) in Rust source.

    Exit 1 when an error-severity finding is reported, 0 otherwise, 2 on unusable input.
    """
    from burnside.lint.engine import lint_paths, select_rules

    rule_ids = select_rules(_split(select), _split(ignore))
    root_dir = root or Path.cwd()
    report = lint_paths(list(paths) if paths else [Path(".")], rule_ids, root=root_dir, jobs=jobs)
    if rustc is not None and "BS001" in rule_ids:
        from burnside.lint.rustc import merge_rustc, rustc_step_findings

        report.findings = merge_rustc(report.findings, rustc_step_findings(rustc, root_dir))

    if output_format == "text":
        from burnside.lint.text_output import render_text

        if output is None:
            render_text(report, stdout)
        else:
            console = Console(record=True, file=io.StringIO(), width=200, color_system=None, soft_wrap=True)
            render_text(report, console)
            _write(output, console.export_text())
    else:
        if output_format == "json":
            from burnside.lint.json_output import render_json

            content = render_json(report)
        else:
            from burnside.lint.sarif_output import render_sarif

            content = render_sarif(report)
        if output is None:
            sys.stdout.write(content)
        else:
            _write(output, content)
        for path, reason in report.skipped:
            stderr.print(f"skipped {path}: {reason}", markup=False)
    raise click.exceptions.Exit(1 if report.has_errors else 0)
