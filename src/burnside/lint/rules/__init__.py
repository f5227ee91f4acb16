"""The rule registry: one module per rule, keyed by its stable ID.

Each rule module defines `ID`, `NAME`, `SEVERITY`, `TITLE`, a docstring in
four sections (What it does / Why is this bad? / Example / Use instead),
`TOKENS` (what a file must hold for the rule to find anything: the engine's
prefilter is built from them, `burnside.lint.prefilter`) and
`check(unit) -> Iterable[Hit]`.
"""

from __future__ import annotations

import pkgutil
from importlib import import_module
from types import ModuleType

#: every module of this package is a rule (`bsNNN_name.py`), keyed by its ID in ID order: a new rule is its file
RULES: dict[str, ModuleType] = {
    module.ID: module
    for module in sorted((import_module(f"burnside.lint.rules.{info.name}") for info in pkgutil.iter_modules(__path__)),
                         key=lambda module: module.ID)
}
