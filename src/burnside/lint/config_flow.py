"""Following an optimizer config built by `XConfig::new()`: which setters it gets, and where it goes.

Two questions are asked of a config, both answered on the syntax tree, by name
resolution rather than by spelling (`burnside.lint.bindings.uses_of`,
shadowing respected), from the same pieces: the `let` a value is bound by and
the uses of that name, `cfg.field = ..` assignments counted as the setter
`with_field`, and the method chain on a value.

BS005 asks which methods a `MomentumConfig::new()` gets in its own function
(`local_configs`): along its builder chain (turbofish arguments skipped) and,
when the chain is bound with `let`, along the chain on every use of that name;
it is not followed any further.

BS004, BS006 and BS008 to BS010 ask: when an `AdamConfig` / `AdamWConfig` /
`RmsPropConfig` / `AdaGradConfig` / `MuonConfig` becomes an optimizer
(`.init()`, `.init::<B, M>()`, `.build()`), was the setter of the default
that differs (`.with_epsilon`, `.with_weight_decay`, ...) called on the way
(`default_left`)? That value is followed further:

* along a builder chain (`.with_*` setters collect, `.clone()` passes through,
  turbofish arguments anywhere in the chain are skipped);
* through `let` bindings to each use of the bound name, including
  `cfg.epsilon = 1e-8;` (and `+=`-style) field assignments, which count as setters;
* through the value of a block, an `if`/`else` or a `match` arm;
* out of the function, as an `Escape`: into a struct field (a struct literal
  `optimizer: cfg`, shorthand `Config { optimizer }`, an assignment
  `self.optimizer = cfg`, a derived setter `.with_optimizer(cfg)`), into a call
  argument (`TrainingConfig::new(model, cfg)`, `make_optim(cfg)`), or out as
  the function's return value.

Escapes are resolved across the files of one crate (`Crate.resolve`): a field into
every `X.field` read in the crate, provided some struct there declares that
field with the config's type; a constructor argument of a `#[derive(Config)]`
struct into the field at that position among its required fields; a call
argument into the callee's parameter; a return value into every call of the
function. What cannot be followed (a config put in a `Vec`, an `Option`, a
macro, a trait object, a field read through a destructuring `let`) is dropped
silently: the rules would rather miss a default than invent one.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from burnside.lint.bindings import uses_of
from burnside.lint.syntax import (
    SourceUnit,
    arguments_of,
    block_tail,
    callee,
    enclosing,
    method_call_on,
    method_name,
    parent_of,
    pieces,
    query_cursor,
    text,
)

if TYPE_CHECKING:
    from tree_sitter import Node

_TERMINALS = frozenset({"init", "build"})
_PASS_THROUGH = frozenset({"clone", "to_owned"})
_TRANSPARENT = frozenset({"parenthesized_expression", "reference_expression", "try_expression"})
_BRANCHES = frozenset({"if_expression", "else_clause", "match_arm", "match_block", "match_expression"})
# Following stops after this many hops through bindings, calls and fields.
_MAX_HOPS = 8


@dataclass(frozen=True)
class Escape:
    """A config value leaving the function it was followed in (picklable: crosses processes)."""

    kind: str  # "field", "call" or "return"
    name: str  # field name, or function name
    qualifier: str  # struct / type the call or field belongs to, when known
    position: int  # argument index for "call" (a method call's counted after `self`); -1 otherwise
    method: bool  # a `.name(..)` method call
    setters: frozenset[str]


@dataclass(frozen=True)
class Init:
    """A config turned into an optimizer, and the setters it carried."""

    path: str
    line: int
    column: int
    setters: frozenset[str]


@dataclass
class Flow:
    inits: list[Init] = field(default_factory=list)
    escapes: list[Escape] = field(default_factory=list)


@dataclass
class _ConfigOrigin:
    """One `XConfig::new()` call and everywhere its value was followed to in its own file."""

    config_type: str
    new_call: Node
    flow: Flow


def _index_in(parent: Node, node: Node) -> int:
    for i, child in enumerate(arguments_of(parent_of(parent))):
        if child == node:
            return i
    return -1


def _type_name(node: Node | None) -> str:
    if node is None:
        return ""
    return re.split(r"[<\s]", text(node).rsplit("::", 1)[-1].strip(), maxsplit=1)[0]


def _function_name(function: Node) -> str:
    name = function.child_by_field_name("name")
    return text(name) if name is not None else ""


def _impl_type(node: Node) -> str:
    impl = enclosing(node, frozenset({"impl_item"}))
    return _type_name(impl.child_by_field_name("type")) if impl is not None else ""


def _bound_uses(value: Node) -> list[Node] | None:
    """Where NAME is read after `let NAME = value;`; None when `value` is not bound to a name that way."""
    parent = parent_of(value)
    if parent is None or parent.type != "let_declaration" or parent.child_by_field_name("value") != value:
        return None
    pattern = parent.child_by_field_name("pattern")
    if pattern is None or pattern.type != "identifier":
        return None
    return uses_of(parent, text(pattern))


_ASSIGNMENTS = frozenset({"assignment_expression", "compound_assignment_expr"})
_PLAIN_ASSIGNMENT = frozenset({"assignment_expression"})


def _assigned_setters(uses: list[Node], assignments: frozenset[str] = _ASSIGNMENTS) -> frozenset[str]:
    """`with_epsilon` for `cfg.epsilon = 1e-8;` after the binding: it sets the field as surely as the setter would."""
    found = set()
    for use in uses:
        parent = parent_of(use)
        if parent is None or parent.type != "field_expression" or parent.child_by_field_name("value") != use:
            continue
        grand = parent_of(parent)
        assigned = grand is not None and grand.type in assignments
        if assigned and grand.child_by_field_name("left") == parent:
            name = parent.child_by_field_name("field")
            if name is not None:
                found.add(f"with_{text(name)}")
    return frozenset(found)


# Reading an optimizer's state (`&self`, or the optimizer given up for its record) is not a step.
_RECORD_READS = frozenset({"to_record", "into_record", "into_bytes"})
# Loading a saved state into a fresh optimizer gives back the same optimizer (burn's
# `ModuleOptimizer::load_record` / `from_bytes`, the latter a `Result`).
_STATE_LOADS = frozenset({"load_record", "from_bytes", "unwrap", "expect"})


def _never_steps(init: Node) -> bool:
    """True when the optimizer made by `init` can never take a step, so its settings cannot matter.

    That is an optimizer built only for its (empty) record,
    `AdamConfig::new().init().to_record()`, or bound by `let` and then only
    read for its record, also after loading a saved state into it
    (`MuonConfig::new().init().from_bytes(bytes).unwrap()`, then only
    `to_record()`: a save/load round trip). A shared borrow does not count:
    optimizers are `Clone`, and a callee handed `&optim` can step a clone; nor
    does a use in a macro, which can expand to anything.
    """
    node = init
    while True:
        parent = parent_of(node)
        if parent is not None and parent.type == "try_expression":
            node = parent
            continue
        after = method_call_on(node)
        if after is None or method_name(after) not in _STATE_LOADS:
            break
        node = after
    after = method_call_on(node)
    if after is not None:
        return method_name(after) in _RECORD_READS
    uses = _bound_uses(node)
    # An optimizer bound and never read is taken at its word (minimal examples read like that).
    if not uses:  # not bound by `let` (None), or never read ([])
        return False
    for use in uses:
        read = method_call_on(use)
        if read is None or method_name(read) not in _RECORD_READS:
            return False
    return True


def _follow(unit: SourceUnit, start: Node, setters: frozenset[str], flow: Flow, hops: int = 0) -> None:
    """Follow the value of `start` forward within its function, recording inits and escapes."""
    node = start
    while hops <= _MAX_HOPS:
        parent = parent_of(node)
        if parent is None:
            return
        if parent.type in _TRANSPARENT:
            node = parent
            continue
        call = method_call_on(node)
        if call is not None:
            followed = _through_call(unit, call, setters, flow)
            if followed is None:
                return
            node, setters = followed
            continue
        if parent.type == "let_declaration" and parent.child_by_field_name("value") == node:
            _follow_binding(unit, node, setters, flow, hops)
            return
        if not _carries(parent, node):
            escape = _escape(parent, node, setters)
            if escape is not None:
                flow.escapes.append(escape)
            return
        node = parent


def _through_call(unit: SourceUnit, call: Node, setters: frozenset[str], flow: Flow):
    """A method called on the value: an init is recorded (None, the end), a clone or setter passes the value on
    (the call and the setters then set), anything else ends the path (None)."""
    name = method_name(call) or ""
    if name in _TERMINALS:
        if not _never_steps(call):
            flow.inits.append(Init(unit.path, unit.line(call), call.start_point.column + 1, setters))
        return None
    if name in _PASS_THROUGH:
        return call, setters
    if name.startswith("with_"):
        return call, setters | {name}
    return None


def _follow_binding(unit: SourceUnit, value: Node, setters: frozenset[str], flow: Flow, hops: int) -> None:
    """A value bound by `let`: follow each use of the binding (not one inside a macro), with the fields assigned
    through it as setters."""
    uses = _bound_uses(value)
    if uses is None:
        return
    assigned = _assigned_setters(uses)
    for use in uses:
        if parent_of(use) is not None and parent_of(use).type == "token_tree":
            continue
        _follow(unit, use, setters | assigned, flow, hops + 1)


def _carries(parent: Node, node: Node) -> bool:
    """Whether `parent`'s value is `node`'s within the same function: a branch of an `if` or `match`, or a block's
    tail that is not a function's or closure's body."""
    if parent.type == "block":
        owner = parent_of(parent)
        return block_tail(parent) == node and (owner is None or owner.type not in ("function_item",
                                                                                     "closure_expression"))
    return parent.type in _BRANCHES


def _escape(parent: Node, node: Node, setters: frozenset[str]) -> Escape | None:
    """Where the value leaves its function, when `parent` takes it out: into a struct's field, a call's argument,
    a function's return value (None when it goes nowhere followed)."""
    kind = parent.type
    if kind == "field_initializer" and parent.child_by_field_name("value") == node:
        name_node = parent.child_by_field_name("field")
        if name_node is None:
            return None
        return Escape("field", text(name_node), _literal_type(parent), -1, False, setters)
    if kind == "shorthand_field_initializer":
        return Escape("field", text(node), _literal_type(parent), -1, False, setters)
    if kind == "arguments":
        return _argument_escape(parent, node, setters)
    if kind == "block" and block_tail(parent) == node:
        owner = parent_of(parent)
        if owner is not None and owner.type == "function_item":
            return Escape("return", _function_name(owner), _impl_type(owner), -1, False, setters)
        return None
    if kind == "return_expression":
        function = enclosing(parent, frozenset({"function_item", "closure_expression"}))
        if function is not None and function.type == "function_item":
            return Escape("return", _function_name(function), _impl_type(function), -1, False, setters)
        return None
    if kind == "assignment_expression" and parent.child_by_field_name("right") == node:
        left = parent.child_by_field_name("left")
        name_node = left.child_by_field_name("field") if left is not None and left.type == "field_expression" else None
        return Escape("field", text(name_node), "", -1, False, setters) if name_node is not None else None
    return None


def _literal_type(initializer: Node) -> str:
    """The type named by the struct literal a field initializer is in ("" when none)."""
    literal = enclosing(initializer, frozenset({"struct_expression"}))
    return _type_name(literal.child_by_field_name("name")) if literal is not None else ""


def _argument_escape(arguments: Node, node: Node, setters: frozenset[str]) -> Escape | None:
    """The value as an argument of a call: a one-argument `with_*` setter's field, else the called method or
    function's parameter at its position (a constructor of `Some`, `Ok`, `Box` is not followed)."""
    call = parent_of(arguments)
    if call is None or call.type != "call_expression":
        return None
    position = _index_in(arguments, node)
    function = callee(call)
    if function is None or position < 0:
        return None
    if function.type == "field_expression":
        name = method_name(call) or ""
        if name.startswith("with_") and len(arguments_of(call)) == 1:
            return Escape("field", name[len("with_"):], "", -1, False, setters)
        return Escape("call", name, "", position, True, setters)
    if function.type == "identifier":
        return Escape("call", text(function), "", position, False, setters)
    if function.type == "scoped_identifier":
        name_node = function.child_by_field_name("name")
        qualifier = _type_name(function.child_by_field_name("path"))
        if qualifier == "Self":
            qualifier = _impl_type(call)
        if name_node is not None and text(name_node) not in ("Some", "Ok", "Box", "new_with"):
            return Escape("call", text(name_node), qualifier, position, False, setters)
    return None


def _new_calls(unit: SourceUnit, types: frozenset[str]):
    """(type, call) for every `T::new(..)` in the unit with `T` in `types`, in source order."""
    for call in unit.nodes("scoped_call"):
        function = call.child_by_field_name("function")
        if function is None or function.type != "scoped_identifier":
            continue
        name = function.child_by_field_name("name")
        if name is None or text(name) != "new":
            continue
        type_name = _type_name(function.child_by_field_name("path"))
        if type_name in types:
            yield type_name, call


def _config_origins(unit: SourceUnit, types: frozenset[str]) -> list[_ConfigOrigin]:
    """Every `T::new()` for `T` in `types`, followed through its own file (computed once per file)."""
    memo = unit.memo.setdefault("config_origins", {})
    origins = []
    for type_name, call in _new_calls(unit, types):
        key = call.start_byte
        origin = memo.get(key)
        if origin is None:
            flow = Flow()
            _follow(unit, call, frozenset(), flow)
            origin = _ConfigOrigin(type_name, call, flow)
            memo[key] = origin
        origins.append(origin)
    return origins


def _builder_chain(start: Node) -> tuple[Node, list[str]]:
    """The outermost call of the method chain on `start`, and the methods called along it."""
    methods: list[str] = []
    outer = start
    while True:
        call = method_call_on(outer)
        if call is None:
            return outer, methods
        methods.append(method_name(call) or "")
        outer = call


@dataclass
class LocalConfig:
    """One `T::new()` and the methods it gets in its own function, not followed any further."""

    config_type: str
    new_call: Node
    # The outermost call of the builder chain on `new_call` (`new_call` itself when there is none).
    outermost: Node
    # Methods along that chain and along the chain on each use of the `let` it is bound by, plus
    # `with_FIELD` for each `NAME.FIELD = ..` assignment to that binding.
    methods: frozenset[str]


def local_configs(unit: SourceUnit, types: frozenset[str]) -> list[LocalConfig]:
    """Every `T::new()` for `T` in `types`, with the methods it gets along its chain and its `let` binding."""
    configs = []
    for type_name, call in _new_calls(unit, types):
        outer, methods = _builder_chain(call)
        uses = _bound_uses(outer) or []
        for use in uses:
            methods.extend(_builder_chain(use)[1])
        found = frozenset(methods) | _assigned_setters(uses, _PLAIN_ASSIGNMENT)
        configs.append(LocalConfig(type_name, call, outer, found))
    return configs


# --- crate-wide resolution ----------------------------------------------------------------

_FIELD_DECL_QUERY = """
(struct_item name: (type_identifier) @struct
  body: (field_declaration_list (field_declaration name: (field_identifier) @field type: (_) @type) @decl))
"""


def crate_root(path: str, memo: dict[str, str]) -> str:
    """The nearest directory above `path` holding a Cargo.toml, or "" when there is none."""
    directory = os.path.dirname(os.path.abspath(path))
    seen = []
    result = ""
    while True:
        if directory in memo:
            result = memo[directory]
            break
        seen.append(directory)
        if os.path.isfile(os.path.join(directory, "Cargo.toml")):
            result = directory
            break
        up = os.path.dirname(directory)
        if up == directory:
            break
        directory = up
    for d in seen:
        memo[d] = result
    return result


def _called_name(call: Node) -> str | None:
    """The name a call calls: `f(..)`, `T::f(..)`, `x.f(..)`; None for anything else (`(g)(..)`)."""
    function = callee(call)
    if function is None:
        return None
    if function.type == "identifier":
        return text(function)
    if function.type == "scoped_identifier":
        name_node = function.child_by_field_name("name")
        return text(name_node) if name_node is not None else ""
    if function.type == "field_expression":
        return method_name(call) or ""
    return None


class Crate:
    """The linted files of one crate, parsed on demand, for following configs across files."""

    def __init__(self, files: list[tuple[str, str]], sources: dict[str, bytes] | None = None) -> None:
        self.files = files  # (real path, display path)
        self._bytes: dict[str, bytes] = dict(sources or {})
        self._units: dict[tuple[str, int], SourceUnit] = {}
        self._sinks: dict[tuple, list[tuple[SourceUnit, Node, frozenset[str]]]] = {}
        self._holding: dict[tuple[bytes, bytes], list[tuple[str, str]]] = {}
        # Per unit and query, its matches grouped by name: one query run per unit
        # however many escapes ask for a name (a crate's `new` is asked for often).
        self._index: dict[tuple[str, int], dict[str, list]] = {}

    def _source(self, real: str) -> bytes:
        if real not in self._bytes:
            try:
                with open(real, "rb") as handle:
                    self._bytes[real] = handle.read()
            except OSError:
                self._bytes[real] = b""
        return self._bytes[real]

    def _units_with(self, token: bytes, also: bytes = b""):
        """Parsed units (pieces, for large files) that contain `token`, in files that also contain `also`."""
        pattern = re.compile(re.escape(token))
        holding = self._holding.get((token, also))
        if holding is None:
            holding = [
                (real, shown)
                for real, shown in self.files
                if token in self._source(real) and also in self._source(real)
            ]
            self._holding[(token, also)] = holding
        for real, shown in holding:
            source = self._source(real)
            for line, start, piece in pieces(source, pattern):
                unit = self._units.get((real, start))
                if unit is None:
                    unit = SourceUnit.parse(shown, piece, line)
                    self._units[(real, start)] = unit
                yield unit

    def _matches(self, unit: SourceUnit, key: str, query: str, name_of) -> dict[str, list]:
        """`query`'s matches in `unit`, in tree order, grouped by `name_of(match)` (computed once per unit)."""
        index_key = (key, id(unit))
        index = self._index.get(index_key)
        if index is None:
            index = {}
            for _, match in query_cursor(query).matches(unit.tree.root_node):
                index.setdefault(name_of(match), []).append(match)
            self._index[index_key] = index
        return index

    def _field_types(self, name: str, config_type: str) -> list[tuple[str, str]]:
        """(struct, field type text) for struct fields called `name` in files naming the type."""
        found = []
        for unit in self._units_with(name.encode(), config_type.encode()):
            for match in self._matches(unit, "fields", _FIELD_DECL_QUERY, lambda m: text(m["field"][0])).get(name, []):
                found.append((text(match["struct"][0]), text(match["type"][0])))
        return found

    def _required_fields(self, struct: str) -> list[str] | None:
        """The fields a `#[derive(Config)]` struct's `new` takes, in order; None if not such a struct."""
        for unit in self._units_with(struct.encode()):
            for node in unit.tree.root_node.named_children:
                item = node
                if item.type != "struct_item" or _type_name(item.child_by_field_name("name")) != struct:
                    continue
                attributes = []
                sibling = item.prev_named_sibling
                while sibling is not None and sibling.type in ("attribute_item", "line_comment", "block_comment"):
                    attributes.append(text(sibling))
                    sibling = sibling.prev_named_sibling
                if not any(re.search(r"derive\s*\([^)]*\bConfig\b", a) for a in attributes):
                    return None
                body = item.child_by_field_name("body")
                if body is None:
                    return None
                required = []
                pending_attrs: list[str] = []
                for child in body.named_children:
                    if child.type == "attribute_item":
                        pending_attrs.append(text(child))
                        continue
                    if child.type != "field_declaration":
                        continue
                    type_text = text(child.child_by_field_name("type")) if child.child_by_field_name("type") else ""
                    has_default = any("default" in a and "config" in a for a in pending_attrs)
                    pending_attrs = []
                    if has_default or type_text.startswith("Option<"):
                        continue
                    name = child.child_by_field_name("name")
                    if name is not None:
                        required.append(text(name))
                return required
        return None

    def _functions(self, name: str, qualifier: str):
        """`fn name` items in the crate, with their units; of `impl qualifier` (or free) when a qualifier is given."""
        for unit in self._units_with(f"fn {name}".encode(), qualifier.encode()):
            functions = self._matches(
                unit, "functions", "(function_item name: (identifier) @name) @fn", lambda m: text(m["name"][0])
            )
            for match in functions.get(name, []):
                function = match["fn"][0]
                if qualifier and _impl_type(function) not in (qualifier, ""):
                    continue
                yield unit, function

    def resolve(self, escape: Escape, config_type: str, flow: Flow, hops: int, seen: set) -> None:
        """Follow an escape into the crate's other functions and files, adding to `flow`."""
        key = (escape.kind, escape.name, escape.qualifier, escape.position, escape.method)
        if hops > _MAX_HOPS or (key, escape.setters) in seen:
            return
        seen.add((key, escape.setters))
        sub = Flow()
        if escape.kind == "field":
            self._into_field(escape, config_type, sub, hops)
        elif escape.kind == "call":
            self._into_call(escape, sub, hops)
        elif escape.kind == "return":
            for unit in self._units_with(escape.name.encode()):
                calls = self._matches(unit, "calls", "(call_expression) @call", lambda m: _called_name(m["call"][0]))
                for match in calls.get(escape.name, []):
                    _follow(unit, match["call"][0], escape.setters, sub, hops + 1)
        flow.inits.extend(sub.inits)
        for nested in sub.escapes:
            self.resolve(nested, config_type, flow, hops + 1, seen)

    def _into_field(self, escape: Escape, config_type: str, sub: Flow, hops: int) -> None:
        """A config stored in a field: follow every read of a field of that name, where a struct declares it of the
        config's type (when the struct is known, a literal's or a derived constructor's, its own declaration
        decides)."""
        declared = self._field_types(escape.name, config_type)
        if not any(config_type in type_text and escape.qualifier in ("", struct) for struct, type_text in declared):
            return
        for unit in self._units_with(b"." + escape.name.encode()):
            reads = self._matches(
                unit, "field_reads", "(field_expression field: (field_identifier) @f) @e", lambda m: text(m["f"][0])
            )
            for match in reads.get(escape.name, []):
                read = match["e"][0]
                parent = parent_of(read)
                if (parent is not None and parent.type == "assignment_expression"
                        and parent.child_by_field_name("left") == read):
                    continue
                _follow(unit, read, escape.setters, sub, hops + 1)

    def _into_call(self, escape: Escape, sub: Flow, hops: int) -> None:
        """A config passed to a function or method: follow the uses of its parameter in every function of that name;
        when none is found and the call is a `T::new` of a `#[derive(Config)]` struct, into its required field at
        that position."""
        found = False
        for unit, function in self._functions(escape.name, escape.qualifier):
            param = _parameter_at(function, escape.position, escape.method)
            if param is None:
                continue
            found = True
            uses = uses_of(param, text(param.child_by_field_name("pattern")))
            assigned = _assigned_setters(uses)
            for use in uses:
                if parent_of(use) is not None and parent_of(use).type == "token_tree":
                    continue
                _follow(unit, use, escape.setters | assigned, sub, hops + 1)
        if not found and escape.name == "new" and escape.qualifier:
            required = self._required_fields(escape.qualifier)
            if required is not None and escape.position < len(required):
                sub.escapes.append(
                    Escape("field", required[escape.position], escape.qualifier, -1, False, escape.setters)
                )


def _parameter_at(function: Node, position: int, method: bool) -> Node | None:
    """The parameter of `function` a call's argument at `position` binds, when it binds a plain name (`self` not
    counted for a method call; a function taking `self` is no plain call's)."""
    parameters = function.child_by_field_name("parameters")
    if parameters is None:
        return None
    params = [p for p in parameters.named_children if p.type in ("parameter", "self_parameter")]
    if method and params and params[0].type == "self_parameter":
        params = params[1:]
    elif not method and params and params[0].type == "self_parameter":
        return None
    if position >= len(params):
        return None
    param = params[position]
    pattern = param.child_by_field_name("pattern")
    if param.type != "parameter" or pattern is None or pattern.type != "identifier":
        return None
    return param


@dataclass(frozen=True)
class PendingConfig:
    """A config whose inits in its own file all set the field, but which also leaves the file."""

    config_type: str
    setter: str
    escapes: tuple[Escape, ...]


def default_left(unit: SourceUnit, types: frozenset[str], setter: str, message: str, help: str):
    """Hits for configs of `types` that reach an init without `setter`.

    Inits found in the file itself are judged here; a config that also leaves
    the file carries its escapes on the hit for the engine's crate-wide pass.
    """
    from burnside.lint.finding import Hit

    for origin in _config_origins(unit, types):
        kind = origin.config_type
        missing = [i for i in origin.flow.inits if setter not in i.setters]
        if missing:
            first = missing[0]
            note = ""
            if first.line != unit.line(origin.new_call):
                note = f"; turned into an optimizer at line {first.line}"
            yield Hit(node=origin.new_call, message=message.format(type=kind) + note, help=help)
        elif origin.flow.escapes:
            yield Hit(
                node=origin.new_call,
                message=message.format(type=kind),
                help=help,
                pending=PendingConfig(kind, setter, tuple(origin.flow.escapes)),
            )
