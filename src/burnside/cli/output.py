"""How the comparing commands print a result and pick the exit code."""

from __future__ import annotations

import contextlib
import fcntl
import io
import os
import stat
import sys
from pathlib import Path

import click
from rich.text import Text

from burnside.atomic import NO_ROOM, no_room_message, write_atomic
from burnside.cli.console import stderr, stdout
from burnside.compare import Comparison
from burnside.diagnose import Diagnosis
from burnside.errors import BurnsideError
from burnside.report import comparison_json, comparison_junit, plot_drift, render, write_html_report
from burnside.report.distribution import reference_losses


def finish(comparison: Comparison, diagnoses: list[Diagnosis], *, as_json: bool, plot: Path | None,
           junit: Path | None = None, report: Path | None = None) -> None:
    """Print the table and diagnoses (or JSON), write the plot, JUnit XML and HTML report if asked,
    exit 0 (OK) or 1."""
    if as_json:
        print_json(comparison_json(comparison, diagnoses) + "\n")
    else:
        render(comparison, diagnoses, stdout)
    if plot is not None:
        losses = reference_losses(comparison.reference) if comparison.reference is not None else None
        plot_drift(comparison, plot, losses)
        stderr.print(Text(f"plot: {plot}", style="dim"))
    if junit is not None:
        write_atomic(junit, comparison_junit(comparison, diagnoses))
        stderr.print(Text(f"junit: {junit}", style="dim"))
    if report is not None:
        write_report(comparison, diagnoses, report)
    raise click.exceptions.Exit(0 if comparison.passed else 1)


def print_json(text: str) -> None:
    """Print ``text`` on stdout; when stdout is a file with no room for it (`--json > out.json` on a full
    disk or past `ulimit -f`), one line naming the file and the bytes needed, and the file cut back to
    what it held before (no half a JSON document)."""
    stream = sys.stdout
    try:
        stream.flush()
        fd = stream.fileno()
    except (OSError, ValueError, io.UnsupportedOperation):  # not a real file (click's CliRunner): as before
        click.echo(text, nl=False)
        return
    # Written to the descriptor, not through the stream: after a short write Python's buffered stream
    # can drop the rest on its flush without an error (a file-size limit reached mid-write).
    data = text.encode(stream.encoding or "utf-8", errors="replace")
    start = _regular_file_offset(fd)
    view = memoryview(data)
    try:
        while view:
            view = view[os.write(fd, view):]
    except OSError as exc:
        if exc.errno not in NO_ROOM:
            raise
        where, directory = "stdout", Path(".")
        with contextlib.suppress(OSError):
            name = os.readlink(f"/proc/self/fd/{fd}")
            where, directory = f"stdout ({name})", Path(name).parent
        outcome = "the output is incomplete"  # a pipe or a terminal cannot be cut back
        if start is not None:
            with contextlib.suppress(OSError):
                os.ftruncate(fd, start)
                outcome = "nothing was written"
        raise BurnsideError(no_room_message(where, exc, len(data), outcome=outcome, directory=directory)) from None


def _regular_file_offset(fd: int) -> int | None:
    """Where a write to ``fd`` starts, when it is a regular file (else None)."""
    try:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        if fcntl.fcntl(fd, fcntl.F_GETFL) & os.O_APPEND:  # `>>`: the write goes at the end
            return info.st_size
        return os.lseek(fd, 0, os.SEEK_CUR)
    except OSError:
        return None


def write_report(comparison: Comparison, diagnoses: list[Diagnosis], path: Path) -> None:
    """Write the HTML report, with a status line while the plots are drawn."""
    with stderr.status("writing the HTML report (plots)…"):
        write_html_report(comparison, diagnoses, path)
    stderr.print(Text(f"report: {path}", style="dim"))
