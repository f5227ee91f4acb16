"""burnside's own burn programs (rust/): build them once per process and run one by name."""

from __future__ import annotations

from rich.console import Console

from burnside.burn.binary import BinaryRun, run_binary
from burnside.burn.cargo import CargoRun, build_workspace

_built: CargoRun | None = None


def built_programs(console: Console | None = None) -> CargoRun:
    """The workspace build (cargo is asked once per process; it is a no-op when nothing changed)."""
    global _built
    if _built is None:
        _built = build_workspace(console)
    return _built


def run_program(name: str, args: list[str] | None = None, console: Console | None = None) -> BinaryRun:
    """Build (if needed) and run burnside's program ``name`` (`moves`, `discard`, `othergrads`, ...)."""
    return run_binary(built_programs(console).executables[name], args)
