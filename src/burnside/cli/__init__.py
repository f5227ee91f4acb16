"""The `burnside` command line: parses arguments, calls the library, renders, picks the exit code.

Nothing outside this package imports it; every command lives in one module here. This module is
the console script's first code and stays light: `main` handles a stop signal from its first
moment, then imports the command line (click, rich, the commands: a tenth of a second), whose own
handlers take over (`burnside.cli.root.main`). A Ctrl-C in that tenth would otherwise end in
Python's KeyboardInterrupt traceback, and a SIGTERM in silence; until then nothing has been
written, so the process says what stopped it and leaves at once.
"""

from __future__ import annotations

import os

# The C module under `signal`: importing `signal` itself builds its enum classes (10 ms), time in which a
# stop would still end in a traceback.
import _signal

#: SIGINT, SIGTERM, SIGHUP (burnside.errors.STOPPING, without importing it first).
_STOPPING = (_signal.SIGINT, _signal.SIGTERM, _signal.SIGHUP)


#: burnside.errors.stopped_line's words for each, spelled here: the handler may run while that module is
#: half imported, and must import nothing.
_LINES = {_signal.SIGINT: b"interrupted\n", _signal.SIGTERM: b"stopped by SIGTERM\n",
          _signal.SIGHUP: b"stopped by SIGHUP\n"}


def _before_the_cli(signum: int, frame) -> None:
    os.write(2, _LINES[signum])
    os._exit(128 + signum)


def main() -> None:
    """The `burnside` console script."""
    for each in _STOPPING:
        _signal.signal(each, _before_the_cli)
    from burnside.cli.root import main as cli_main

    cli_main()


def __getattr__(name: str):
    if name == "app":  # the click group, imported when asked for (`from burnside.cli import app`)
        from burnside.cli.root import app

        return app
    raise AttributeError(f"module 'burnside.cli' has no attribute {name!r}")


__all__ = ["app", "main"]
