"""The diagnosis rules, in the order they are reported: causes before the symptoms they explain.

Every module of the package is a rule; each declares where it stands with ``PRECEDENCE`` (lower first), and
`ordered` sorts by it.
"""

import pkgutil
from importlib import import_module
from types import ModuleType


def ordered(rules: tuple[ModuleType, ...]) -> tuple[ModuleType, ...]:
    """``rules`` in report order: by each rule's ``PRECEDENCE``, which every rule declares once and no two share."""
    return tuple(sorted(rules, key=lambda rule: rule.PRECEDENCE))


#: every module of this package is a rule (`dNNN_name.py`): a new rule is its file, nothing listed here
RULES = ordered(tuple(import_module(f"burnside.diagnose.rules.{module.name}")
                      for module in pkgutil.iter_modules(__path__)))
