"""The one error type burnside raises for anything a user can fix."""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


class BurnsideError(Exception):
    """A problem the user can act on; the message says what to do.

    The CLI prints it as one line and exits with ``exit_code``; it never
    shows a traceback for these.
    """

    exit_code = 2


class TraceError(BurnsideError):
    """A trace or init file that is missing, corrupt, truncated or of the wrong version."""


class BuildError(BurnsideError):
    """A Rust crate that failed to build, or a toolchain that is missing."""


class RunError(BurnsideError):
    """A program (burn binary, PyTorch side) that crashed or wrote no output."""


class Interrupted(BaseException):
    """A signal (Ctrl-C's SIGINT, SIGTERM, SIGHUP) asking the `burnside` command to stop.

    Raised by the console script's signal handlers (`burnside.cli.root.main`), never by the
    library; a BaseException, so `except Exception` does not swallow it and every `finally` and
    context manager on the way out runs: a half-written output's temporary file is removed, a
    running burn program is killed. `main` then prints one line and exits 128 + the signal's number.
    """

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


#: The signals that stop a `burnside` command (`Interrupted`).
STOPPING = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)


def stopped_line(signum: int) -> str:
    """What a command stopped by ``signum`` prints: `interrupted` for Ctrl-C, else `stopped by SIGTERM`."""
    return "interrupted" if signum == signal.SIGINT else f"stopped by {signal.Signals(signum).name}"


class _Deferral:
    """How many `stops_deferred` blocks are open (nested), and the stop that came meanwhile."""

    depth = 0
    pending: int | None = None


def defer_stop(signum: int) -> bool:
    """Called by the console script's handler: keep ``signum`` for when the open `stops_deferred` blocks
    end, and say so (False: none is open, so raise it now)."""
    if not _Deferral.depth:
        return False
    _Deferral.pending = signum
    return True


@contextlib.contextmanager
def stops_deferred() -> Iterator[None]:
    """A stop (`Interrupted`) that comes inside the block is raised when the block ends, not inside it.

    For code that a stop must not cut in two: a native import whose C++ cannot unwind a Python
    exception, a temporary file just created whose name is not yet where the cleanup looks for it.
    Only the console script's handler defers; under Python's own handling (a library caller) this
    changes nothing. A block that raises lets its exception through, the stop then being moot.
    """
    _Deferral.depth += 1
    signum = None
    try:
        yield
    finally:
        _Deferral.depth -= 1
        if not _Deferral.depth:  # the outermost block takes the stop, even when it lets another through
            signum, _Deferral.pending = _Deferral.pending, None
    if signum is not None:
        raise Interrupted(signum)
