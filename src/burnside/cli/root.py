"""The root command group: `--version`, the commands in pipeline order, and the one error path."""

from __future__ import annotations

import importlib
import os
import signal
import sys
import threading

import click

from burnside import __version__
from burnside.cli.command import BurnsideGroup
from burnside.errors import STOPPING, Interrupted, stopped_line

# Where each command lives, in pipeline order. A command's module is imported
# when that command runs (or `--help` lists them all): `burnside lint` and
# `burnside explain` need neither numpy nor the cargo and trace machinery the
# others import, and importing all of it cost 0.7 s at every start.
_COMMANDS = {
    "new": "burnside.cli.new:new",
    "run": "burnside.cli.run:run",
    "check": "burnside.cli.check:check",
    "compare": "burnside.cli.compare:compare",
    "report": "burnside.cli.compare:report",
    "convert": "burnside.cli.compare:convert",
    "lint": "burnside.cli.lint:lint",
    "explain": "burnside.cli.explain:explain",
    "experiments": "burnside.cli.experiments:experiments",
    "conformance": "burnside.cli.conformance:conformance",
}


class _LazyGroup(BurnsideGroup):
    """A group that imports a command's module only when the command is asked for."""

    def list_commands(self, ctx: click.Context) -> list[str]:
        return [*_COMMANDS, *sorted(set(self.commands) - set(_COMMANDS))]  # pipeline order, as `--help` shows

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name not in self.commands and name in _COMMANDS:
            module, attribute = _COMMANDS[name].split(":")
            self.add_command(getattr(importlib.import_module(module), attribute), name)
        return self.commands.get(name)


@click.group(cls=_LazyGroup, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="burnside", message="%(prog)s %(version)s")
def app() -> None:
    """Prove a burn port of a PyTorch training loop trains the same; name the silent failures."""


#: The signals that stop a run: each unwinds it (no partial output, no burn program left running).
_STOPPING = STOPPING


def _stop(signum: int, frame) -> None:
    # One stop: further signals while the run unwinds (a second Ctrl-C) must not cut its cleanup short.
    for each in _STOPPING:
        signal.signal(each, signal.SIG_IGN)
    raise Interrupted(signum)


def _unraisable(hook_args) -> None:
    """A stop that landed in a finalizer (a weakref callback during garbage collection): send it again.

    Python swallows an exception raised inside `__del__` or a weakref callback ("Exception ignored
    in ...") and carries on, so the run would finish as if never stopped. The signal is sent again,
    to be raised at the next ordinary line of the run: from another thread, a moment later, since a
    signal sent from here would be raised inside this hook and swallowed too.
    """
    stopped = hook_args.exc_value
    if isinstance(stopped, Interrupted):
        signal.signal(stopped.signum, _stop)
        again = threading.Timer(0.01, os.kill, (os.getpid(), stopped.signum))
        again.daemon = True
        again.start()
        return
    sys.__unraisablehook__(hook_args)


def main() -> None:
    """Console-script entry point.

    Ctrl-C, SIGTERM and SIGHUP stop any command at any point with one line (`interrupted`,
    `stopped by SIGTERM`) and exit 128 + the signal's number (130, 143): the signal raises
    `Interrupted` where the run is, so every output being written is dropped (atomic writes) and a
    running burn program is killed and its temporary files removed. Only the console script
    installs this; a library caller keeps Python's own handling.
    """
    for each in _STOPPING:
        signal.signal(each, _stop)
    sys.unraisablehook = _unraisable
    try:
        try:
            app(prog_name="burnside")
        except SystemExit:
            # the command has finished and said so: a signal now (while Python shuts down) changes nothing
            for each in _STOPPING:
                signal.signal(each, signal.SIG_IGN)
            raise
    except Interrupted as stopped:
        _exit_stopped(stopped.signum)


def _exit_stopped(signum: int) -> None:
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            pass
    os.write(2, f"{stopped_line(signum)}\n".encode())
    # os._exit: the run has unwound; what is left at exit (worker threads of a comparison still on
    # their queued chunks) must not keep a stopped command alive, nor print anything more.
    os._exit(128 + signum)
