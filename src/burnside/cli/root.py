"""The root command group: `--version`, the commands in pipeline order, and the one error path."""

from __future__ import annotations

import importlib
import importlib.abc
import os
import signal
import sys
import threading

import click

from burnside import __version__
from burnside.cli.command import BurnsideGroup
from burnside.errors import STOPPING, Interrupted, defer_stop, stopped_line, stops_deferred

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


#: Imports whose native modules run Python code while they initialise: torch's own, and triton's
#: nanobind modules, which torch.optim imports lazily (through torch._dynamo) at a first step. A stop
#: raised by the handler inside such code cannot unwind: it crosses C++ that aborts the process
#: ("terminate called after throwing an instance of 'nanobind::python_error'", exit -6, a core dump).
#: While one of these is imported, a stop waits and is raised when the import returns.
_NATIVE_IMPORTS = frozenset({"torch", "torch._dynamo", "triton"})


def _stop(signum: int, frame) -> None:
    # One stop: further signals while the run unwinds (a second Ctrl-C) must not cut its cleanup short.
    for each in _STOPPING:
        signal.signal(each, signal.SIG_IGN)
    if not defer_stop(signum):  # else raised when the import (or other `stops_deferred` block) returns
        raise Interrupted(signum)


class _DeferringLoader(importlib.abc.Loader):
    """A loader running another's `exec_module` with stops deferred till it returns."""

    def __init__(self, loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module) -> None:
        module.__loader__ = self._loader  # what the module and its resources see is its own loader
        with stops_deferred():
            self._loader.exec_module(module)

    def __getattr__(self, name: str):
        return getattr(self._loader, name)


class _DeferStopsInNativeImports(importlib.abc.MetaPathFinder):
    """Finds `_NATIVE_IMPORTS` as the rest of `sys.meta_path` does, with a `_DeferringLoader`.

    Written here because nothing in the standard library defers a signal handler's exception past an
    import: `signal.pthread_sigmask` blocks a signal in one thread only, and a signal taken by another
    thread (a progress display's, torch's workers) still runs the handler in the main thread.
    """

    def find_spec(self, name: str, path, target=None):
        if name not in _NATIVE_IMPORTS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(name, path, target)
            if spec is not None:
                if spec.loader is not None and hasattr(spec.loader, "exec_module"):
                    spec.loader = _DeferringLoader(spec.loader)
                return spec
        return None


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
    sys.meta_path.insert(0, _DeferStopsInNativeImports())
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
