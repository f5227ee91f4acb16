"""The `burnside` command line: parses arguments, calls the library, renders, picks the exit code.

Nothing outside this package imports it; every command lives in one module here.
"""

from burnside.cli.app import app, main

__all__ = ["app", "main"]
