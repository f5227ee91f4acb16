"""Run a built burn program with a timeout and read its machine-readable `JSON: {...}` line."""

from __future__ import annotations

import json
import os
import re
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from burnside.errors import RunError

if TYPE_CHECKING:
    from burnside.progress import StepProgress

_JSON_PREFIX = "JSON: "
#: What `burnside_trace::step_done` prints on stderr when `BURNSIDE_PROGRESS` is set.
_STEP_LINE = re.compile(r"burnside-progress: step (\d+)/(\d+)")


@dataclass
class BinaryRun:
    """One run: what it printed, the parsed JSON line (if any), how long it took."""

    name: str
    stdout: str
    stderr: str
    json: dict | None
    seconds: float

    @property
    def text(self) -> str:
        """What the program printed for people (stdout without the JSON line)."""
        return "\n".join(l for l in self.stdout.splitlines() if not l.startswith(_JSON_PREFIX))


#: Lines of a failed program's own report relayed at most (its last ones).
MAX_REPORT_LINES = 30
_PANIC = re.compile(r"thread '[^']*'(?: \(\d+\))? panicked at (?P<where>.+):$")


def _what_it_said(text: str) -> str:
    """What a failed program reported on stderr, for the error: a panic's place and message on one
    line; otherwise the program's own lines (the last MAX_REPORT_LINES), without Rust's notes on
    backtraces. A port's own report (a load that does not fit lists every missing tensor, then the
    fix) is what the user acts on, so it is relayed whole, not cut to its last line."""
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    for i, line in enumerate(lines):
        panic = _PANIC.match(line)
        if panic:
            message = []
            for more in lines[i + 1:]:
                if more.startswith(("stack backtrace:", "note: ")):
                    break
                message.append(more.strip())
            return f"panicked at {panic['where']}: {' '.join(message)}"
    said = [line for line in lines if not line.startswith("note: ")]
    if not said:
        return "(no output on stderr)"
    if len(said) == 1:
        return said[0]
    return "\n" + "\n".join("  " + line for line in said[-MAX_REPORT_LINES:])


def _failure(head: str, stderr: str) -> str:
    """``head: what it said`` on one line, or ``head:`` over the program's indented report."""
    said = _what_it_said(stderr)
    return f"{head}:{said}" if said.startswith("\n") else f"{head}: {said}"


def run_binary(path: Path, args: list[str] | None = None, *, timeout: float = 300,
               expect_file: Path | None = None, progress: StepProgress | None = None) -> BinaryRun:
    """Run ``path`` with ``args``; a non-zero exit, a timeout or a missing ``expect_file`` is a RunError.

    With ``progress``, the program is asked for its steps (`BURNSIDE_PROGRESS`) and ``progress``
    is told each `burnside-progress: step k/N` line as it comes; those lines are not in ``stderr``.
    """
    name = Path(path).name
    command = [str(path), *(args or [])]
    start = time.monotonic()
    try:
        if progress is None:
            proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        else:
            proc = _run_reporting(command, timeout, progress)
    except subprocess.TimeoutExpired as exc:
        raise RunError(f"{name} did not finish within {timeout:.0f}s") from exc
    except OSError as exc:
        raise RunError(f"cannot run {name}: {exc}") from exc
    seconds = time.monotonic() - start
    if proc.returncode != 0:
        raise RunError(_failure(f"{name} exited with status {proc.returncode}", proc.stderr))
    if expect_file is not None and not Path(expect_file).is_file():
        raise RunError(_failure(f"{name} exited cleanly but wrote no trace at {expect_file}", proc.stderr))
    parsed = None
    for line in proc.stdout.splitlines():
        if line.startswith(_JSON_PREFIX):
            try:
                parsed = json.loads(line[len(_JSON_PREFIX):])
            except json.JSONDecodeError:
                raise RunError(f"{name} printed a malformed JSON line: {line[:80]}") from None
    return BinaryRun(name, proc.stdout, proc.stderr, parsed, seconds)


def _run_reporting(command: list[str], timeout: float, progress: StepProgress) -> subprocess.CompletedProcess:
    """`subprocess.run` with stderr read line by line, step lines going to ``progress``."""
    kept: list[str] = []
    timed_out = threading.Event()
    with tempfile.TemporaryFile(mode="w+") as out:
        # stdout to a file: a program printing much on stdout cannot block on a full pipe
        with subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE, text=True,
                              env={**os.environ, "BURNSIDE_PROGRESS": "1"}) as proc:

            def stop() -> None:
                timed_out.set()
                proc.kill()

            timer = threading.Timer(timeout, stop)
            timer.start()
            try:
                assert proc.stderr is not None
                for line in proc.stderr:
                    step = _STEP_LINE.fullmatch(line.rstrip("\n"))
                    if step:
                        progress(int(step[1]), int(step[2]))
                    else:
                        kept.append(line)
                returncode = proc.wait()
            except BaseException:
                proc.kill()
                raise
            finally:
                timer.cancel()
        if timed_out.is_set():
            raise subprocess.TimeoutExpired(command, timeout)
        out.seek(0)
        return subprocess.CompletedProcess(command, returncode, out.read(), "".join(kept))


def expect_panic(path: Path, args: list[str] | None = None, *, timeout: float = 300) -> str:
    """Run ``path`` expecting a Rust panic; return the panic message (stderr, without backtrace).

    A clean exit is a RunError: the program was meant to be stopped by an assertion.
    """
    import os

    name = Path(path).name
    try:
        proc = subprocess.run([str(path), *(args or [])], capture_output=True, text=True, timeout=timeout,
                              env={**os.environ, "RUST_BACKTRACE": "0"})
    except subprocess.TimeoutExpired as exc:
        raise RunError(f"{name} did not finish within {timeout:.0f}s") from exc
    if proc.returncode == 0 or "panicked at" not in proc.stderr:
        raise RunError(_failure(f"{name} was expected to panic but exited with status {proc.returncode}",
                                proc.stderr))
    return "\n".join(l for l in proc.stderr.splitlines() if not l.startswith("note: run with `RUST_BACKTRACE"))
