"""Every burnside-trace API that burnside's messages and fixes name (`Training::with_names`,
`InitFile::read(..)?.with_names(..)`, `init.buffer("bn.running_mean")`) exists in burnside-trace, on the type it is
named on, and is in the user's documents (README.md, rust/README.md, burnside-trace's README): a fix that names a
call the user cannot find, or that does not exist, is a dead end. Reads source files only: under a second."""

from __future__ import annotations

import ast
import re

from tests.docs.blocks import ROOT

TRACE_SRC = ROOT / "rust" / "burnside-trace" / "src"
DOCUMENTS = ["README.md", "rust/README.md", "rust/burnside-trace/README.md"]

#: The types a port uses, and the names the messages give their values.
TYPES = {"Training", "Inference", "TraceRecorder", "InitFile", "Step", "Batch", "Tap", "TorchNames", "OptimizerSpec",
         "ClipGradNorm", "PortArgs", "HostTensor"}
RECEIVERS = {"step": "Step", "batch": "Batch", "init": "InitFile", "recorder": "TraceRecorder", "tap": "Tap",
             "args": "PortArgs", "clip": "ClipGradNorm"}
#: burnside-trace's functions of its own, `burnside_trace::NAME(..)`.
FUNCTIONS = {"run_port", "load_pytorch_checkpoint", "load_pytorch_checkpoint_with", "step_done"}


def python_strings() -> list[tuple[str, str]]:
    """Every string of burnside's Python sources but the docstrings (what a user reads: messages, fixes,
    explanations), f-strings whole with each value as `X`, with where it is."""
    found = []
    for path in sorted((ROOT / "src" / "burnside").rglob("*.py")):
        tree = ast.parse(path.read_text(encoding="utf-8"))
        docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                      if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                      and node.body and isinstance(node.body[0], ast.Expr)
                      and isinstance(node.body[0].value, ast.Constant)}
        for node in ast.walk(tree):
            if id(node) in docstrings:
                continue
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found.append((f"{path.relative_to(ROOT)}:{node.lineno}", node.value))
            elif isinstance(node, ast.JoinedStr):  # an f-string whole, each value as `X`
                text = "".join(v.value if isinstance(v, ast.Constant) else "X" for v in node.values)
                found.append((f"{path.relative_to(ROOT)}:{node.lineno}", text))
    return found


_RUST_STRING = re.compile(r'"((?:[^"\\]|\\.)*)"', re.S)


def rust_strings() -> list[tuple[str, str]]:
    """The string literals of burnside-trace's sources outside its unit tests (what a port's user reads)."""
    found = []
    for path in sorted(TRACE_SRC.rglob("*.rs")):
        if path.name == "tests.rs":  # a module's unit tests in a file of their own
            continue
        text = path.read_text(encoding="utf-8")
        text = text.split("\n#[cfg(test)]\nmod tests", 1)[0]
        code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("//"))
        for match in _RUST_STRING.finditer(code):
            value = re.sub(r"\\\n\s*", "", match.group(1)).replace('\\"', '"')
            found.append((f"{path.relative_to(ROOT)}", value))
    return found


def _balanced(text: str, i: int) -> int:
    """The index after the parenthesis group opening at ``text[i]``."""
    depth = 0
    for j in range(i, len(text)):
        depth += {"(": 1, ")": -1}.get(text[j], 0)
        if depth == 0:
            return j + 1
    return len(text)


def named_apis(text: str) -> set[tuple[str, str]]:
    """(type, method) for each burnside-trace call ``text`` names: `Type::method`, a chain on it
    (`Type::new(..).with_x(..)?.with_y`), a call on a value named as the messages name them (`init.buffer(`, in
    backticks), and `burnside_trace::function` as (`burnside_trace`, function)."""
    found: set[tuple[str, str]] = set()
    for match in re.finditer(r"\b([A-Z][A-Za-z]+)::([a-z_][a-z0-9_]*)", text):
        kind, method = match.groups()
        if kind not in TYPES:
            continue
        found.add((kind, method))
        i = match.end()
        while i < len(text) and text[i] == "(":
            i = _balanced(text, i)
            chained = re.match(r"\??\.([a-z_][a-z0-9_]*)\(", text[i:])
            if not chained:
                break
            found.add((kind, chained.group(1)))
            i += chained.end() - 1
    for span in re.findall(r"`([^`]+)`", text):
        calls = re.findall(r"(?<![\w.])([a-z]+)\.([a-z_][a-z0-9_]*)\(", span)
        # a method named without its call: `step.record_input`
        calls += re.findall(r"^([a-z]+)\.([a-z_][a-z0-9_]*)$", span)
        for receiver, method in calls:
            if receiver in RECEIVERS:
                found.add((RECEIVERS[receiver], method))
    for function in re.findall(r"\bburnside_trace::([a-z_][a-z0-9_]*)", text):
        found.add(("burnside_trace", function))
    return found


def public_methods() -> dict[str, set[str]]:
    """Type -> the `pub fn`s of its `impl` blocks in burnside-trace."""
    methods: dict[str, set[str]] = {}
    for path in TRACE_SRC.rglob("*.rs"):
        text = path.read_text(encoding="utf-8")
        for match in re.finditer(r"^impl(?:<[^>]*>)?\s+(?:[\w:<>, ]+\s+for\s+)?([A-Z]\w*)(?:<[^>{]*>)?\s*\{", text,
                                 re.M):
            depth, j = 0, match.end() - 1
            for j in range(match.end() - 1, len(text)):
                depth += {"{": 1, "}": -1}.get(text[j], 0)
                if depth == 0:
                    break
            body = text[match.end():j]
            methods.setdefault(match.group(1), set()).update(re.findall(r"\bpub fn ([a-z_][a-z0-9_]*)", body))
    return methods


def exported_functions() -> set[str]:
    lib = (TRACE_SRC / "lib.rs").read_text()
    return {name for group in re.findall(r"pub use \w+::\{?([^;}]*)\}?;", lib)
            for name in re.findall(r"\b([a-z_][a-z0-9_]*)\b", group)}


def documented(kind: str, method: str, docs: str) -> bool:
    """Whether the documents show ``kind``'s ``method``: `Type::method`, called on a value as the messages name it
    (`step.int_input::<1>("y")`, `batch.record_input`), or in a chain on the type
    (`Training::new(spec).with_group(...)`). A function: `burnside_trace::name`."""
    if kind == "burnside_trace":
        return f"burnside_trace::{method}" in docs
    if f"{kind}::{method}" in docs:
        return True
    receivers = [receiver for receiver, k in RECEIVERS.items() if k == kind]
    if any(re.search(rf"(?<![\w.]){receiver}\.{method}\b", docs) for receiver in receivers):
        return True
    chain = rf"\b{kind}::\w+\((?:[^()\n]|\([^()\n]*\))*\)\??(?:\s*\.\w+(?:::<\d+>)?\((?:[^()\n]|\([^()\n]*\))*\)\??)*"
    return re.search(chain + rf"\s*\.{method}\b", docs) is not None


def test_the_apis_burnsides_messages_name_exist_and_are_documented():
    named: dict[tuple[str, str], str] = {}
    for where, text in python_strings() + rust_strings():
        for api in named_apis(text):
            named.setdefault(api, where)
    assert ("Training", "with_names") in named and ("InitFile", "buffer") in named, sorted(named)
    methods, functions = public_methods(), exported_functions()
    docs = "\n".join((ROOT / path).read_text() for path in DOCUMENTS)
    problems = []
    for (kind, method), where in sorted(named.items()):
        exists = method in functions if kind == "burnside_trace" else method in methods.get(kind, set())
        shown = f"burnside_trace::{method}" if kind == "burnside_trace" else f"{kind}::{method}"
        if not exists:
            problems.append(f"{where} names {shown}, which burnside-trace does not have")
        elif not documented(kind, method, docs):
            problems.append(f"{where} names {shown}, which {', '.join(DOCUMENTS)} never show")
    assert not problems, "\n".join(problems)
