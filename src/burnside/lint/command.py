"""The `burnside lint` and `burnside explain` commands (registered from burnside.cli)."""

from __future__ import annotations

import io
import sys
from enum import Enum
from pathlib import Path

import typer
from rich.console import Console
from rich.text import Text

from burnside.atomic import atomic_output
from burnside.errors import BurnsideError


class OutputFormat(str, Enum):
    text = "text"
    json = "json"
    sarif = "sarif"


def _split(value: str | None) -> list[str] | None:
    if not value:
        return None
    return [part for part in value.replace(" ", ",").split(",") if part]


def write_atomically(path: Path, content: str) -> None:
    """Readers of `--output` never see a half-written report."""
    path.resolve().parent.mkdir(parents=True, exist_ok=True)
    with atomic_output(path, "w") as handle:
        handle.write(content)


def _exit(code: int):
    # SystemExit, not typer.Exit: burnside.cli.main runs click with
    # standalone_mode=False, where click turns typer.Exit into a return value.
    sys.exit(code)


def _fail(message: str, code: int = 2):
    Console(stderr=True, highlight=False).print(Text("error: ", style="bold red") + Text(message), soft_wrap=True)
    _exit(code)


def lint(
    paths: list[Path] = typer.Argument(None, help="Rust files or directories (default: current directory)."),
    output_format: OutputFormat = typer.Option(OutputFormat.text, "--format", help="text, json or sarif."),
    select: str = typer.Option(None, "--select", help="Only these rules, e.g. BS001,BS002."),
    ignore: str = typer.Option(None, "--ignore", help="Skip these rules."),
    output: Path = typer.Option(None, "--output", "-o", help="Write the report to this file (atomically)."),
    root: Path = typer.Option(None, "--root", help="Paths in reports are relative to this (default: cwd)."),
    rustc: Path = typer.Option(
        None, "--rustc", help="Also run `cargo check` with -W unused_results in this crate and merge its step warnings."
    ),
    jobs: int = typer.Option(None, "--jobs", "-j", help="Worker processes (default: up to 2)."),
) -> None:
    """Find silent burn training bugs (discarded optimizer steps, wrong-module grads, ...) in Rust source."""
    from burnside.lint.engine import lint_paths, select_rules

    try:
        rule_ids = select_rules(_split(select), _split(ignore))
        root_dir = root or Path.cwd()
        report = lint_paths(list(paths) if paths else [Path(".")], rule_ids, root=root_dir, jobs=jobs)
        if rustc is not None and "BS001" in rule_ids:
            from burnside.lint.rustc import merge_rustc, rustc_step_findings

            report.findings = merge_rustc(report.findings, rustc_step_findings(rustc, root_dir))
    except BurnsideError as exc:
        _fail(str(exc), exc.exit_code)

    if output_format is OutputFormat.text:
        from burnside.lint.text_output import render_text

        if output is None:
            render_text(report, Console(highlight=False, soft_wrap=True))
        else:
            console = Console(record=True, file=io.StringIO(), width=200, color_system=None, soft_wrap=True)
            render_text(report, console)
            write_atomically(output, console.export_text())
    else:
        if output_format is OutputFormat.json:
            from burnside.lint.json_output import render_json

            content = render_json(report)
        else:
            from burnside.lint.sarif_output import render_sarif

            content = render_sarif(report)
        if output is None:
            sys.stdout.write(content)
        else:
            write_atomically(output, content)
        for path, reason in report.skipped:
            Console(stderr=True, highlight=False).print(f"skipped {path}: {reason}", markup=False)
    _exit(1 if report.has_errors else 0)


def register(app: typer.Typer) -> None:
    app.command("lint")(lint)
