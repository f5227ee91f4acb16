"""rustc-style text rendering of findings, with rich colours on a terminal."""

from __future__ import annotations

from rich.console import Console
from rich.text import Text

from burnside.lint.engine import LintReport
from burnside.lint.finding import Finding, Severity

_STYLE = {Severity.ERROR: "bold red", Severity.WARNING: "bold yellow", Severity.INFO: "bold cyan"}


def _finding(console: Console, finding: Finding) -> None:
    style = _STYLE[finding.severity]
    head = Text()
    head.append(f"{finding.severity.value}[{finding.rule}]", style=style)
    head.append(f": {finding.message}", style="bold")
    console.print(head)
    width = max(len(str(finding.line)), 2)
    gutter = " " * width
    location = Text(f"{gutter}--> ", style="bold blue")
    location.append(f"{finding.path}:{finding.line}:{finding.column}")
    if finding.source != "burnside":
        location.append(f" (via {finding.source})", style="dim")
    console.print(location)
    if finding.snippet:
        console.print(Text(f"{gutter} |", style="bold blue"))
        line = Text(f"{finding.line:>{width}} | ", style="bold blue")
        line.append(finding.snippet)
        console.print(line)
        start = finding.column - 1
        if finding.end_line == finding.line:
            span = max(finding.end_column - finding.column, 1)
        else:
            span = max(len(finding.snippet.rstrip()) - start, 1)
        carets = Text(f"{gutter} | ", style="bold blue")
        # Keep tabs so the carets line up under tab-indented code.
        carets.append("".join(c if c == "\t" else " " for c in finding.snippet[:start]))
        carets.append("^" * span, style=style)
        console.print(carets)
    help_line = Text(f"{gutter} = ", style="bold blue")
    help_line.append("help", style="bold")
    help_line.append(f": {finding.help}")
    console.print(help_line)
    console.print()


def render_text(report: LintReport, console: Console) -> None:
    for finding in report.findings:
        _finding(console, finding)
    for path, reason in report.skipped:
        console.print(Text(f"skipped {path}: {reason}", style="yellow"))
    console.print(
        Text(
            f"{report.count(Severity.ERROR)} errors, {report.count(Severity.WARNING)} warnings, "
            f"{report.count(Severity.INFO)} infos in {report.files_seen} files",
            style="bold",
        )
    )
