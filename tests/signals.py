"""SIGINT as a terminal gives it, for the tests that send it.

A shell starts a background job (`python -m pytest &`, `nohup python -m pytest &` from a script) with SIGINT
ignored, and Python then installs no handler of its own (no KeyboardInterrupt); a program started from there
inherits the ignore, since an ignored signal stays ignored across exec, and a SIGINT sent to it does nothing.
So a test that sends SIGINT sets the disposition it needs instead of assuming a terminal's: a child it starts
gets SIGINT's default action (`default_sigint`), and a test that signals this process or a program the library
under test starts has Python's own handler for the while (`python_sigint`).
"""

from __future__ import annotations

import contextlib
import signal
from collections.abc import Iterator


def default_sigint() -> None:
    """For `subprocess.Popen(preexec_fn=...)`: the child starts with SIGINT's default action, as from a terminal
    (a handler the child installs then takes over, as burnside's console script does)."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


@contextlib.contextmanager
def python_sigint() -> Iterator[None]:
    """Python's own SIGINT handler (KeyboardInterrupt) in this process for the duration, as an interpreter started
    from a terminal has it; a program this process starts meanwhile starts with SIGINT's default action (exec
    resets a handled signal). The disposition before is restored after."""
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous if previous is not None else signal.SIG_DFL)
