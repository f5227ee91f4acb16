"""The import graph of `src/burnside` has no cycles (no module imports one that depends on it), and no import runs
up a floor of the house (`FLOORS`, below: each stage imports only the stages beneath it).

Every module is parsed with `ast` (nothing is imported). Each `import burnside.x`, `from burnside.x
import y` and relative import becomes an edge to a module: `y` counts as the module `burnside.x.y`
when that file exists, otherwise as a name of `burnside.x`. Imports inside functions are edges too:
they run later, but the module still depends on what they import. Importing `burnside.x.y` also runs
the package `burnside.x` (its `__init__.py`), but that is Python's loading order rather than a
dependency, so only the named module is an edge; a package's `__init__` that re-exports from its own
submodules does not make each submodule depend on its siblings.

Imports under `if TYPE_CHECKING:` never run; they are collected separately and left out of the cycle
check (a type named only in an annotation is not a dependency at run time), and a test below checks
that they still name modules that exist. The package root re-exports its public API lazily (the
`_PUBLIC` table of `burnside/__init__.py`, imported on first use through `__getattr__`), so
`from burnside import Trace` is an edge to the module that defines `Trace` (`burnside.trace`), and
`from burnside import __version__` an edge to the root itself.

Imports made by name count too where the name is in the source: `importlib.import_module("burnside.x")`,
`import_module(f"burnside.examples.{name}")` (an edge to every module of that package), and a table of
lazy imports such as the CLI's commands (a dict whose values all name burnside modules, `"burnside.cli.run:run"`).
A name computed from elsewhere (`import_module(module)` on a variable) is not seen.

A cycle is reported as a chain, `a -> b -> c -> a`, with the file and line of each import, one per
strongly connected component (and the component's other modules, when it holds several cycles).
"""

from __future__ import annotations

import ast
import subprocess
import sys
from dataclasses import dataclass, field
from pathlib import Path

import burnside

SRC = Path(burnside.__file__).resolve().parent
ROOT = "burnside"
PUBLIC: dict[str, str] = {}  # the root's lazy re-exports, read by graph()


def module_name(path: Path) -> str:
    parts = list(path.relative_to(SRC.parent).with_suffix("").parts)
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


@dataclass
class Module:
    name: str
    path: Path
    is_package: bool
    imports: dict[str, int] = field(default_factory=dict)  # module -> first line
    type_only: dict[str, int] = field(default_factory=dict)


def all_modules() -> dict[str, Module]:
    modules = {}
    for path in sorted(SRC.rglob("*.py")):
        if "templates" in path.relative_to(SRC).parts:
            continue  # copied into a user's project by `burnside new`, not part of the package
        name = module_name(path)
        modules[name] = Module(name, path, path.name == "__init__.py")
    return modules


def is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def targets_of(node: ast.Import | ast.ImportFrom, module: Module, modules: dict[str, Module]) -> list[str]:
    """The burnside modules one import statement depends on."""
    if isinstance(node, ast.Import):
        names = [alias.name for alias in node.names]
        return [nearest_module(n, modules) for n in names if n == ROOT or n.startswith(ROOT + ".")]
    if node.level:
        package = module.name if module.is_package else module.name.rpartition(".")[0]
        for _ in range(node.level - 1):
            package = package.rpartition(".")[0]
        base = f"{package}.{node.module}" if node.module else package
    else:
        base = node.module or ""
    if base != ROOT and not base.startswith(ROOT + "."):
        return []
    found = []
    for alias in node.names:
        submodule = f"{base}.{alias.name}"
        if submodule in modules:
            found.append(submodule)
        elif base == ROOT and alias.name in PUBLIC:
            found.append(PUBLIC[alias.name])
        else:
            found.append(nearest_module(base, modules))
    return found


def nearest_module(name: str, modules: dict[str, Module]) -> str:
    while name not in modules and "." in name:
        name = name.rpartition(".")[0]
    return name


def collect(module: Module, modules: dict[str, Module], source: str | None = None) -> None:
    """Fill ``module``'s run-time and type-only imports from its source (its file unless given)."""
    if source is None:
        source = module.path.read_text(encoding="utf-8")
    tree = ast.parse(source, filename=str(module.path))

    def visit(node: ast.AST, type_only: bool) -> None:
        if isinstance(node, ast.If) and is_type_checking(node.test):
            for child in node.body:
                visit(child, True)
            for child in node.orelse:
                visit(child, type_only)
            return
        found: list[str] = []
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            found = targets_of(node, module, modules)
        elif isinstance(node, ast.Call) and _is_import_module(node.func) and node.args:
            found = dynamic_targets(node.args[0], modules)
        elif isinstance(node, ast.Assign) and module.name != ROOT and isinstance(node.value, ast.Dict):
            found = lazy_table(node.value, modules)
        into = module.type_only if type_only else module.imports
        for target in found:
            if target != module.name:
                into.setdefault(target, node.lineno)
        for child in ast.iter_child_nodes(node):
            visit(child, type_only)

    visit(tree, False)


def _is_import_module(func: ast.expr) -> bool:
    return (isinstance(func, ast.Attribute) and func.attr == "import_module") or (
        isinstance(func, ast.Name) and func.id == "import_module")


def dynamic_targets(arg: ast.expr, modules: dict[str, Module]) -> list[str]:
    """`importlib.import_module("burnside.x")`: that module; `import_module(f"burnside.x.{name}")`: every
    module of the package `burnside.x` (the name is computed, so any of them may be the one)."""
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str) and arg.value in modules:
        return [arg.value]
    if isinstance(arg, ast.JoinedStr) and arg.values and isinstance(arg.values[0], ast.Constant):
        prefix = str(arg.values[0].value)
        if prefix.startswith(ROOT + ".") and prefix.endswith("."):
            return [name for name in modules if name.startswith(prefix)]
    return []


def lazy_table(table: ast.Dict, modules: dict[str, Module]) -> list[str]:
    """A dict whose values all name burnside modules (`"burnside.cli.run:run"`): a table of imports made on
    first use, like the CLI's commands; each is an edge."""
    values = [v.value.partition(":")[0] for v in table.values
              if isinstance(v, ast.Constant) and isinstance(v.value, str)]
    if table.values and len(values) == len(table.values) and all(v in modules for v in values):
        return values
    return []


def lazy_public(modules: dict[str, Module]) -> dict[str, str]:
    """The package root's `_PUBLIC` table: each lazily re-exported name and the module it comes from."""
    tree = ast.parse(modules[ROOT].path.read_text(encoding="utf-8"))
    for node in tree.body:
        if isinstance(node, ast.Assign) and any(isinstance(t, ast.Name) and t.id == "_PUBLIC" for t in node.targets):
            table = ast.literal_eval(node.value)  # a name, or (module, attribute) where the root renames
            return {name: where[0] if isinstance(where, tuple) else where for name, where in table.items()}
    return {}


def graph() -> dict[str, Module]:
    modules = all_modules()
    PUBLIC.update(lazy_public(modules))
    for module in modules.values():
        collect(module, modules)
    return modules


def cycles(modules: dict[str, Module]) -> list[list[str]]:
    """Every cycle of run-time imports, one per strongly connected component (Tarjan): a closed chain,
    then the component's modules the chain does not pass through."""
    edges = {name: sorted(m.imports) for name, m in modules.items()}
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []

    def strongconnect(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in edges.get(v, ()):
            if w not in edges:
                continue
            if w not in index:
                strongconnect(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                components.append(sorted(component))

    for v in sorted(edges):
        if v not in index:
            strongconnect(v)
    return [chain(component, edges) + [m for m in component if m not in chain(component, edges)]
            for component in sorted(components)]


def chain(component: list[str], edges: dict[str, list[str]]) -> list[str]:
    """One closed path through a strongly connected component, from its first module back to it."""
    members = set(component)
    start = component[0]
    # breadth-first from start to each member, then the shortest way back to start
    best: list[str] | None = None
    paths = {start: [start]}
    frontier = [start]
    while frontier:
        nxt = []
        for v in frontier:
            for w in edges[v]:
                if w not in members:
                    continue
                if w == start:
                    candidate = paths[v] + [start]
                    if best is None or len(candidate) < len(best):
                        best = candidate
                elif w not in paths:
                    paths[w] = paths[v] + [w]
                    nxt.append(w)
        frontier = nxt if best is None else []
    assert best is not None
    return best


def describe(cycle: list[str], modules: dict[str, Module]) -> str:
    """The chain, then each hop with the file and line of its import."""
    end = cycle.index(cycle[0], 1) + 1
    path, others = cycle[:end], cycle[end:]
    hops = [f"{a} -> {b} ({modules[a].path.relative_to(SRC.parent)}:{modules[a].imports[b]})"
            for a, b in zip(path, path[1:])]
    if others:
        hops.append(f"(in the same knot: {', '.join(others)})")
    return " -> ".join(path) + "\n      " + "\n      ".join(hops)


MODULES = graph()
CYCLES = cycles(MODULES)


def test_the_graph_sees_the_package() -> None:
    assert {"burnside", "burnside.trace", "burnside.lint.engine", "burnside.burn.cargo"} <= set(MODULES)
    assert "burnside.templates.port.model" not in MODULES  # a user's file, copied by `burnside new`
    assert all(target in MODULES for m in MODULES.values() for target in m.imports)
    # `targets` imports the A1 recorders inside functions: still edges
    assert {"burnside.examples.a1", "burnside.burn.a1"} <= set(MODULES["burnside.targets"].imports)
    # imports by name: the examples `targets` runs, the commands the CLI imports on first use
    assert "burnside.examples.cnn" in MODULES["burnside.targets"].imports
    assert {"burnside.cli.lint", "burnside.cli.explain"} <= set(MODULES["burnside.cli.root"].imports)


def test_every_kind_of_import_resolves_to_a_module() -> None:
    module = Module("burnside.burn.example", MODULES["burnside.burn.cargo"].path, is_package=False)
    collect(module, MODULES, source="""
from typing import TYPE_CHECKING
import numpy
import burnside.trace.names
from burnside.trace import open_trace, names
from burnside import Trace, __version__, errors
from . import freshness
from .locate import find_cargo
from ..lint import engine

if TYPE_CHECKING:
    from burnside.progress import Progress

def later():
    from burnside.rule import Severity
""")
    assert set(module.imports) == {
        "burnside.trace.names",  # `import a.b.c`, and `from a.b import c` where c is a module
        "burnside.trace",  # a name of a package
        "burnside",  # the root's own `__version__`
        "burnside.errors",  # `from burnside import module`
        "burnside.burn.freshness", "burnside.burn.locate", "burnside.lint.engine",  # relative
        "burnside.rule",  # inside a function
    }
    assert set(module.type_only) == {"burnside.progress"}


def test_no_import_cycles() -> None:
    """No module imports one that depends on it (run-time imports, function-level ones included)."""
    assert not CYCLES, "import cycles:\n  " + "\n  ".join(describe(c, MODULES) for c in CYCLES)


#: The floors of the house, bottom to top (docs/architecture.md): a module imports only its own floor and those
#: below. A module takes the floor of the longest prefix that names it; the root `burnside` names itself only (its
#: public API is imported lazily, on first use).
FLOORS: list[tuple[str, ...]] = [
    # the trace contract and the plain utilities every stage uses
    ("burnside", "burnside.errors", "burnside.input_file", "burnside.strict_json", "burnside.atomic",
     "burnside.progress", "burnside.rule", "burnside.trace"),
    # what burnside knows of each optimizer, read by every stage above
    ("burnside.optimizers",),
    # the PyTorch side's recorders, their public faces, and the models recorded with them
    ("burnside.recording", "burnside.torch", "burnside.reference", "burnside.examples",
     "burnside.conformance.case", "burnside.conformance.cases"),
    ("burnside.compare",),
    ("burnside.forensics",),
    ("burnside.catalogue", "burnside.diagnose"),
    ("burnside.report",),
    ("burnside.pipeline", "burnside.testing"),
    # the burn programs, and what runs them beside the pipeline
    ("burnside.burn", "burnside.lint", "burnside.targets"),
    ("burnside.conformance", "burnside.experiments", "burnside.pytest_plugin", "burnside.rule_registry"),
    ("burnside.cli",),
]


def floor_of(module: str) -> int | None:
    """The floor of ``module`` (an index of `FLOORS`), or None where no prefix names it."""
    best: tuple[int, int] | None = None  # (floor, prefix length)
    for index, prefixes in enumerate(FLOORS):
        for prefix in prefixes:
            named = module == prefix or (prefix != ROOT and module.startswith(prefix + "."))
            if named and (best is None or len(prefix) > best[1]):
                best = (index, len(prefix))
    return None if best is None else best[0]


def test_every_module_has_a_floor() -> None:
    """A new room of the package is placed on a floor here before it lands."""
    assert [m for m in MODULES if floor_of(m) is None] == []


def test_no_import_runs_up_a_floor() -> None:
    """No module imports one on a floor above its own (run-time imports, function-level ones included)."""
    upward = [f"{m.name} (floor {floor_of(m.name)}) -> {target} (floor {floor_of(target)}) "
              f"({m.path.relative_to(SRC.parent)}:{line})"
              for m in MODULES.values() for target, line in m.imports.items()
              if (floor_of(target) or 0) > (floor_of(m.name) or 0)]
    assert not upward, "imports running up a floor:\n  " + "\n  ".join(upward)


def test_type_checking_imports_name_modules_that_exist() -> None:
    missing = [(m.name, t) for m in MODULES.values() for t in m.type_only if t not in MODULES]
    assert not missing


def test_the_root_re_exports_resolve_to_modules_that_define_them() -> None:
    for name, module in PUBLIC.items():
        assert module in MODULES, (name, module)
    # the documented entry points, reachable from the root as from their modules
    assert {"record": "burnside.torch", "export_init": "burnside.torch", "record_reference": "burnside.reference",
            "assert_parity": "burnside.testing"}.items() <= PUBLIC.items()


def test_importing_the_root_imports_neither_numpy_nor_torch() -> None:
    """`burnside lint` and `--version` start without them: the root's re-exports are imported on first use."""
    code = "import sys, burnside; print(sorted({m.split('.')[0] for m in sys.modules} & {'numpy', 'torch'}))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
