"""The one error type burnside raises for anything a user can fix."""

from __future__ import annotations


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
