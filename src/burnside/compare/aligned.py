"""The port's trace named as PyTorch's: names from what the port loaded, layers from its captured graph.

A port written by someone else names its tensors its own way: residual blocks in an enum
(`layer1.0.Basic.conv1.weight`), fields renamed by the loader's `KeyRemapper` (`mha.query` for HF's
`attention.self.query`), burn's attention packed as PyTorch's `in_proj_weight` where the checkpoint
keeps separate projections. Such a port holds the checkpoint's tensors all the same; this module
names each of B's start tensors after the checkpoint tensor it holds (`param_renames`), and every
stage that names parameters (gradients, optimizer state, parameters after) follows.

A port recorded without taps (`Inference` under graph capture, burnside-trace's `capture`) records
every operation of its forward pass and the graph (metadata `captured`); `captured_layers` says
which of those outputs is the output of each PyTorch module: a module that holds parameters by
the last operation reading them (or its descendants'), the others (activations, pools, a block's
residual tail, containers) by the operation between those anchors whose output is closest to
PyTorch's. The rows are then the same `activations.*` and `layer_inputs.*` a tap gives.

`align(a, b)` is B with both applied, as a `Trace` whose tensors are B's, under A's names.
"""

from __future__ import annotations

import difflib
import json
import math
import re
from dataclasses import dataclass, field

import numpy as np
import xxhash

from burnside.trace import Trace, TensorInfo, parse_name
from burnside.trace.statistics import Statistics, lower_bound

#: PyTorch's packed tensors a burn recorder writes stacked (an attention's q/k/v, a recurrent layer's gates),
#: with the numbers of slices they may hold.
_PACKED = re.compile(r"(^|\.)(in_proj_weight|in_proj_bias|weight_ih_l\d+|weight_hh_l\d+|bias_ih_l\d+|bias_hh_l\d+)"
                     r"(_reverse)?$")
#: The names burn and PyTorch give the slices of an attention's packed projection, in order.
_QKV = ("query", "key", "value")
_QKV_SYNONYMS = {"query": ("query", "q", "q_proj", "to_q"), "key": ("key", "k", "k_proj", "to_k"),
                 "value": ("value", "v", "v_proj", "to_v")}
#: A path segment that names an enum variant (burn's `ResidualBlock::Basic`), which burn-store leaves out.
_VARIANT = re.compile(r"^[A-Z][A-Za-z0-9]*$")
_INDEX = re.compile(r"^\d+$")
#: A captured operation's output (`step{k}.captured.{n}`), named as a module's by `captured_layers`.
_CAPTURED = re.compile(r"^step\d+\.captured\.\d+$")


@dataclass(frozen=True)
class Renamed:
    """A's name for one of B's start tensors, and where it is in B's trace."""

    a: str  # A's tensor path, `layer1.0.conv1.weight`
    b: str  # B's tensor path, `layer1.0.Basic.conv1.weight`
    part: tuple[int, int] | None = None  # (index, of): a slice of B's packed tensor along axis 0
    how: str = "bytes"  # bytes | module | order


@dataclass
class Renames:
    """Every start tensor of B that A names otherwise (`param_renames`)."""

    by_b: dict[str, list[Renamed]] = field(default_factory=dict)  # B path -> its A names (several: packed)

    def a_names(self, b_path: str) -> list[Renamed]:
        return self.by_b.get(b_path, [])

    def __bool__(self) -> bool:
        return bool(self.by_b)


def _hash(array: np.ndarray, dtype: str) -> tuple:
    """An array's identity by its bytes, as `_start_key` gives a tensor's: (its safetensors ``dtype``, shape, xxh3)."""
    array = np.ascontiguousarray(array)
    return (dtype, array.shape, xxhash.xxh3_128_hexdigest(array.tobytes()))


def _held(trace: Trace, name: str) -> bool:
    """Whether ``trace`` holds ``name`` in full or as statistics only."""
    return name in trace or name in trace.statistics


def _shape(trace: Trace, name: str) -> tuple[int, ...]:
    """The shape of a tensor held in full or as statistics."""
    stats = trace.statistics.get(name)
    return stats.shape if stats is not None else trace.info(name).shape


def _dtype(trace: Trace, name: str) -> str:
    stats = trace.statistics.get(name)
    return stats.dtype if stats is not None else trace.info(name).dtype


def _start_key(trace: Trace, name: str) -> tuple[tuple, bool]:
    """A start tensor's identity by its bytes (dtype, shape, xxh3-128: the key `_hash` gives its array, so that a
    tensor held in full and one held as statistics compare) and whether it is a constant (every element equal:
    read off the statistics as a largest magnitude equal to the mean's)."""
    stats = trace.statistics_of(name)
    constant = stats.n > 0 and stats.nonfinite == 0 and stats.max_abs == abs(stats.mean)
    return (stats.dtype, stats.shape, stats.xxh3), constant


def _values_distance(a: Trace, a_name: str, b: Trace, b_name: str) -> float:
    """How far B's tensor is from A's, relative to A's size: from the values when both are held in full, else a
    lower bound from their statistics (0 for bit-identical bytes) over A's largest magnitude."""
    if a_name in a and b_name in b:
        return _distance(a.values(a_name), b.values(b_name))
    sa, sb = a.statistics_of(a_name), b.statistics_of(b_name)
    sb = Statistics(sa.dtype, sa.shape, sb.mean, sb.norm, sb.max_abs, sb.nonfinite, sb.xxh3 if sb.dtype == sa.dtype
                    else "")
    bound = lower_bound(sa, sb)
    return bound / (sa.max_abs or 1.0) if not math.isnan(bound) else math.inf


class Holders:
    """A's step-0 parameters and buffers by their bytes, read once when first asked: which of A's tensors a
    tensor of B holds (a loader that maps the checkpoint's `key` to `query`)."""

    def __init__(self, a: Trace) -> None:
        self._a = a
        self._by_hash: dict[tuple, list[str]] | None = None

    def of(self, name: str, b_value: np.ndarray | Statistics, dtype: str = "") -> str | None:
        """A's other start tensor (its path) whose bytes B's ``name`` holds (its array of safetensors ``dtype``, or
        its statistics when B holds it as statistics only), if exactly one does and it is no constant; None
        otherwise."""
        if self._by_hash is None:
            self._by_hash = {}
            for path, full in _start_names(self._a).items():
                key, constant = _start_key(self._a, full)
                if not constant:
                    self._by_hash.setdefault(key, []).append(path)
        parsed = parse_name(name)
        key = (b_value.dtype, b_value.shape, b_value.xxh3) if isinstance(b_value, Statistics) \
            else _hash(b_value, dtype)
        found = [p for p in self._by_hash.get(key, []) if parsed is None or p != parsed.rest]
        return found[0] if len(found) == 1 else None


def _start_names(trace: Trace) -> dict[str, str]:
    """path -> full name of step 0's parameters and buffers."""
    out = {}
    for name in trace.held_names:
        parsed = parse_name(name)
        if parsed is not None and parsed.step == 0 and parsed.stage in ("params_before", "buffers") and parsed.rest:
            out.setdefault(parsed.rest, name)
    return out


def _module(path: str) -> str:
    return path.rsplit(".", 1)[0] if "." in path else ""


def _leaf(path: str) -> str:
    return path.rsplit(".", 1)[-1]


def _constant(array: np.ndarray) -> bool:
    flat = array.reshape(-1)
    return flat.size > 0 and bool(np.all(flat == flat[0]))


def _similarity(b: str, a: str) -> float:
    """How alike two paths are: index segments must agree, enum variants are left out (burn-store's rule)."""
    bs = [s for s in b.split(".") if not _VARIANT.match(s)]
    as_ = a.split(".")
    if [s for s in bs if _INDEX.match(s)] != [s for s in as_ if _INDEX.match(s)]:
        return 0.0
    return difflib.SequenceMatcher(None, ".".join(bs), a).ratio()


def param_renames(a: Trace, b: Trace) -> Renames:
    """A's name for each of B's step-0 parameters and buffers that A does not hold under B's name.

    B's tensor is named after the one A holds with the same bytes (B records PyTorch's layout); a packed
    tensor slice by slice. Where several of A's tensors hold the same bytes (constants: zeros, ones), the
    module the port's other tensors place it in decides, then the order. A match that contradicts the
    names (B's `query` holding A's `key` while A has a `query` beside it) is a loading fault, not a
    rename: B's tensor keeps the name its own says, so the comparison names the fault.
    """
    a_start, b_start = _start_names(a), _start_names(b)
    only_a = [p for p in a_start if p not in b_start]
    only_b = [p for p in b_start if p not in a_start]
    renames = Renames()
    if not only_a or not only_b:
        return renames
    by_hash: dict[tuple, list[str]] = {}
    constant_a: set[str] = set()
    for path in only_a:
        key, constant = _start_key(a, a_start[path])
        by_hash.setdefault(key, []).append(path)
        if constant:
            constant_a.add(path)
    # B's tensors, a packed one as its slices (held in full: statistics have no slices)
    pieces: list[tuple[str, tuple[int, int] | None, tuple]] = []
    for path in only_b:
        key, _ = _start_key(b, b_start[path])
        if _PACKED.search(path) and b_start[path] in b and len(key[1]) >= 1 and key not in by_hash:
            array = b.array(b_start[path])
            for count in (3, 4):
                if array.shape[0] % count == 0:
                    parts = np.split(array, count, axis=0)
                    keys = [_hash(p, key[0]) for p in parts]
                    if all(k in by_hash for k in keys):
                        pieces += [(path, (i, count), k) for i, k in enumerate(keys)]
                        break
            else:
                pieces.append((path, None, key))
            continue
        pieces.append((path, None, key))
    taken: set[str] = set()
    chosen: dict[tuple[str, tuple[int, int] | None], Renamed] = {}
    # 1. unique, non-constant bytes
    module_map: dict[str, str] = {}
    for path, part, key in pieces:
        found = [p for p in by_hash.get(key, []) if p not in constant_a]
        if len(found) == 1:
            b_name = _role_name(path, part)
            vetoed = _contradicted(b_name, found[0], set(only_a))
            if vetoed is not None:
                # a loading fault (a loader's mapping that swaps query and key): B's tensor keeps the name
                # its own path gives it, so the comparison names what it holds instead
                if vetoed not in taken:
                    chosen[(path, part)] = Renamed(vetoed, path, part, "name")
                    taken.add(vetoed)
                    module_map.setdefault(_module(b_name), _module(vetoed))
                continue
            if found[0] in taken:
                continue
            chosen[(path, part)] = Renamed(found[0], path, part, "bytes")
            taken.add(found[0])
            module_map.setdefault(_module(b_name), _module(found[0]))
    # 2. the rest by the module their siblings place them in (a bias beside its weight, a fault by its name)
    only_a_set = set(only_a)
    for path, part, key in pieces:
        if (path, part) in chosen:
            continue
        b_name = _role_name(path, part)
        module = module_map.get(_module(b_name))
        if module is None:
            continue
        for leaf in _leaf_names(_leaf(b_name)):
            candidate = f"{module}.{leaf}" if module else leaf
            if candidate in only_a_set and candidate not in taken:
                chosen[(path, part)] = Renamed(candidate, path, part, "module")
                taken.add(candidate)
                break
    # 3. the rest among A's tensors of the same bytes, by name, then in order
    for path, part, key in pieces:
        if (path, part) in chosen:
            continue
        found = [p for p in by_hash.get(key, []) if p not in taken]
        if not found:
            continue
        b_name = _role_name(path, part)
        canonical = ".".join(_leaf_names(s)[0] for s in b_name.split(".") if not _VARIANT.match(s))
        best = max(found, key=lambda p: (p == canonical, _similarity(b_name, p), -only_a.index(p)))
        if _similarity(b_name, best) == 0.0 and len(found) > 1:
            best = found[0]
        chosen[(path, part)] = Renamed(best, path, part, "order")
        taken.add(best)
    for (path, _), renamed in chosen.items():
        renames.by_b.setdefault(path, []).append(renamed)
    for path in list(renames.by_b):
        parts = renames.by_b[path]
        whole = [r for r in parts if r.part is None]
        if not whole and len(parts) != parts[0].part[1]:
            del renames.by_b[path]  # a packed tensor not every slice of which is named: left as it is
    return renames


def _role_name(path: str, part: tuple[int, int] | None) -> str:
    """B's name for a tensor or a slice of a packed one (`attn.in_proj_weight` slice 0: `attn.query.weight`)."""
    if part is None:
        return path
    module, leaf = _module(path), _leaf(path)
    if leaf.startswith("in_proj_") and part[1] == 3:
        kind = leaf.removeprefix("in_proj_")
        return f"{module}.{_QKV[part[0]]}.{kind}" if module else f"{_QKV[part[0]]}.{kind}"
    return f"{path}#{part[0]}"


def _leaf_names(leaf: str) -> tuple[str, ...]:
    return {"gamma": ("weight",), "beta": ("bias",)}.get(leaf, (leaf,))


def _contradicted(b_name: str, a_name: str, only_a: set[str]) -> str | None:
    """A's tensor B's name says it holds, where B holds the bytes of a sibling of that tensor (query and key
    swapped by a loader): None when the names do not contradict the bytes."""
    b_module, a_module = _module(b_name), _module(a_name)
    b_role, a_role = _leaf(b_module), _leaf(a_module)
    if b_role == a_role:
        return None
    role = next((r for r, names in _QKV_SYNONYMS.items() if b_role in names), None)
    if role is None:
        return None
    parent = _module(a_module)
    for synonym in _QKV_SYNONYMS[role]:
        sibling = f"{parent}.{synonym}.{_leaf(a_name)}" if parent else f"{synonym}.{_leaf(a_name)}"
        if sibling in only_a and sibling != a_name:
            return sibling
    return None


# ---- layers of a captured forward pass ---------------------------------------------------------------------

#: PyTorch module classes whose output is the last operation that reads their parameters.
_LAYER_CLASSES = re.compile(
    r"^(Linear|LazyLinear|Bilinear|Conv[123]d|ConvTranspose[123]d|BatchNorm[123]d|SyncBatchNorm|LayerNorm|GroupNorm|"
    r"RMSNorm|LlamaRMSNorm|InstanceNorm[123]d|LocalResponseNorm|Embedding|EmbeddingBag|PReLU|Conv1D)$")


#: Layers whose first operation reading a parameter reads the layer's input beside it (the product of the input
#: with the weight), so that operation's other operand is the layer's input.
_READS_INPUT_FIRST = re.compile(r"^(Linear|LazyLinear|Conv[123]d|ConvTranspose[123]d|Conv1D)$")


#: burn-ir's operation kinds that compute what a parameterless PyTorch module of a class does, by class.
_OP_KINDS = {
    "ReLU": ("Relu",), "ReLU6": ("Clamp", "Relu"), "GELU": ("Gelu",), "SiLU": ("Silu",), "Sigmoid": ("Sigmoid",),
    "Tanh": ("Tanh",), "LeakyReLU": ("LeakyRelu",), "Softmax": ("Softmax",), "LogSoftmax": ("LogSoftmax",),
    "Hardswish": ("HardSwish",), "Hardsigmoid": ("HardSigmoid",), "Mish": ("Mish",), "Softplus": ("Softplus",),
    "MaxPool1d": ("MaxPool1d",), "MaxPool2d": ("MaxPool2d",), "AvgPool1d": ("AvgPool1d",),
    "AvgPool2d": ("AvgPool2d",), "AdaptiveAvgPool1d": ("AdaptiveAvgPool1d",),
    "AdaptiveAvgPool2d": ("AdaptiveAvgPool2d",), "AdaptiveMaxPool2d": ("AdaptiveMaxPool2d",),
    "Flatten": ("Reshape",), "Upsample": ("Interpolate",),
}


@dataclass(frozen=True)
class Op:
    """One recorded operation of a captured forward pass."""

    n: int  # its place: the tensor `step{k}.captured.{n}`
    kind: str
    id: int  # the tensor it makes
    shape: tuple[int, ...]
    reads: tuple[int, ...]  # the tensors it reads
    params: tuple[str, ...]  # B's names of the parameters it reads (a packed one with `#i`)
    settings: str


def _ops(graph: dict) -> list[Op]:
    params = graph.get("params") or {}
    ops = []
    for op in graph.get("ops") or []:
        names = []
        for read in op.get("reads") or []:
            entry = params.get(str(read.get("id")))
            if entry is not None:
                name, part = entry[0], entry[2]
                names.append(f"{name}#{part[0]}" if part else name)
        ops.append(Op(int(op["n"]), str(op["kind"]), int(op["id"]), tuple(op["shape"]),
                      tuple(int(r["id"]) for r in op.get("reads") or []), tuple(names), str(op.get("settings", ""))))
    return ops


def unread_params(a: Trace, graph: dict, renames: Renames) -> list[str]:
    """A's parameters (A's names) the port holds and its captured forward pass never reads: a layer left out of
    the port's forward. Buffers are left out (a constant the port computes inline), and so is a crashed graph."""
    if graph.get("crashed"):
        return []
    a_params = set(a.params) or {p for p in _start_names(a) if not p.endswith(("running_mean", "running_var"))}
    held = {p for p in (_a_name_of(entry[0] + (f"#{entry[2][0]}" if entry[2] else ""), renames, a_params)
                        for entry in (graph.get("params") or {}).values()) if p is not None}
    read = {p for op in _ops(graph) for name in op.params if (p := _a_name_of(name, renames, a_params)) is not None}
    return [p for p in a.params if p in held and p not in read]


def _a_name_of(b_param: str, renames: Renames, a_params: set[str]) -> str | None:
    """A's name of a parameter B's graph reads (`attn.in_proj_weight#0` is the slice A may hold as `attn.q.weight`)."""
    base, _, index = b_param.partition("#")
    found = renames.a_names(base)
    if found:
        if index:
            for r in found:
                if r.part is not None and r.part[0] == int(index):
                    return r.a
        return found[0].a
    return base if base in a_params else None


def _distance(a: np.ndarray, b: np.ndarray) -> float:
    a = np.asarray(a, dtype=np.float64).reshape(-1)
    b = np.asarray(b, dtype=np.float64).reshape(-1)
    scale = float(np.linalg.norm(a)) or 1.0
    return float(np.linalg.norm(a - b)) / scale


def captured_layers(a: Trace, b: Trace, step: int, graph: dict,
                    renames: Renames) -> tuple[dict[str, str], dict[str, str]]:
    """Which of B's `step{k}.captured.{n}` is the output (and input) of each of A's modules at batch ``step``.

    Returns {A's `activations.` name: B's captured name} and {A's `layer_inputs.` name: B's name}.
    """
    ops = _ops(graph)
    if not ops:
        return {}, {}
    by_id = {op.id: op for op in ops}
    by_n = {op.n: op for op in ops}
    a_params = set(_start_names(a))
    classes = a.metadata.get("modules") or {}
    order = [m for m in (a.metadata.get("activations") or [])]
    # the A module (and its ancestors) each op's parameters belong to
    owner: dict[int, set[str]] = {}
    for op in ops:
        for name in op.params:
            a_name = _a_name_of(name, renames, a_params)
            if a_name is None:
                continue
            module = _module(a_name)
            owner.setdefault(op.n, set()).add(module)
    last_reading: dict[str, int] = {}
    first_reading: dict[str, int] = {}
    for op in ops:
        for module in owner.get(op.n, ()):
            parts = module.split(".") if module else [""]
            for i in range(len(parts), 0, -1):
                prefix = ".".join(parts[:i])
                last_reading[prefix] = op.n
                first_reading.setdefault(prefix, op.n)
    out: dict[str, str] = {}
    inputs: dict[str, str] = {}

    def name_of(n: int) -> str:
        return f"step{step}.captured.{n}"

    # anchors: modules with parameters of their own whose class is a layer burn has a twin of
    anchors: dict[str, int] = {}
    for module in order:
        base = module.split("#")[0]
        if "#" in module or base not in last_reading:
            continue
        cls = str(classes.get(base, ""))
        if _LAYER_CLASSES.match(cls) or not cls:
            anchors[module] = last_reading[base]
    # every A activation in execution order: an anchor at its operation (another framework may run independent
    # branches in another order: a block's downsample before its convolutions), the others by value among the
    # operations after the module placed before them and before the next anchor
    positions = [anchors.get(m) for m in order]
    previous = 0
    unread_modules = {_module(p) for p in unread_params(a, graph, renames)}
    for i, module in enumerate(order):
        a_name = f"step{step}.activations.{module}"
        if not _held(a, a_name):
            continue
        if positions[i] is not None:
            out[a_name] = name_of(positions[i])
            previous = positions[i]
            continue
        if module.split("#")[0] in unread_modules:
            continue  # a layer the port never runs: nothing of B's stands for it
        upper = next((p for p in positions[i + 1:] if p is not None), len(ops))
        low, high = (previous, upper) if upper > previous else (previous, len(ops))
        shape = _shape(a, a_name)
        n_elements = int(np.prod(shape)) if shape else 1
        window = [op for op in ops if low <= op.n < high]
        kinds = _OP_KINDS.get(str(classes.get(module.split("#")[0], "")), ())
        same_kind = [op for op in window if op.kind in kinds]
        candidates = [op for op in (same_kind or window) if int(np.prod(op.shape or (1,))) == n_elements]
        if not candidates and same_kind and len(same_kind[0].shape) == len(shape):
            # the module's own operation, of another size (a pooling's padding): compared as a shape that parts
            out[a_name] = name_of(same_kind[0].n)
            previous = same_kind[0].n
            continue
        if not candidates:
            continue
        candidates = [op for op in candidates if _held(b, name_of(op.n))]
        if not candidates:
            continue
        best = min(candidates, key=lambda op: (_values_distance(a, a_name, b, name_of(op.n)), -op.n))
        out[a_name] = name_of(best.n)
        previous = best.n
    # what each anchored layer read: the tensor its first operation reads beside its parameters, for a layer whose
    # first operation is its product with the input (a Linear's matmul, a convolution); a norm's first operation
    # reading a parameter multiplies the already normalised input by its weight, so its input is not attributed
    for module in anchors:
        a_name = f"step{step}.layer_inputs.{module}"
        base = module.split("#")[0]
        if not _held(a, a_name) or not _READS_INPUT_FIRST.match(str(classes.get(base, ""))):
            continue
        first = first_reading.get(base)
        if first is None:
            continue
        n_elements = int(np.prod(_shape(a, a_name) or (1,)))
        for read in by_n[first].reads:
            if read in by_id and int(np.prod(by_id[read].shape or (1,))) == n_elements:
                inputs[a_name] = name_of(by_id[read].n)
                break
    return out, inputs


# ---- B under A's names -------------------------------------------------------------------------------------------

def _rename_rest(rest: str, renames: Renames) -> list[tuple[str, tuple[int, int] | None]]:
    """A's names for a tensor path of B (a parameter, or `{slot}.{param}` of optimizer state)."""
    found = renames.a_names(rest)
    if found:
        return [(r.a, r.part) for r in found]
    head, _, tail = rest.partition(".")
    found = renames.a_names(tail) if tail else []
    if found:
        return [(f"{head}.{r.a}", r.part) for r in found]
    return []


def align(a: Trace, b: Trace) -> Trace:
    """B under A's names: its start tensors (and every stage naming parameters) named from what the port
    loaded, and the layers of a captured forward pass as `activations.*` / `layer_inputs.*`. B itself when
    nothing needs a name."""
    renames = param_renames(a, b)
    graphs = b.metadata.get("captured")
    if isinstance(graphs, str):
        try:
            graphs = json.loads(graphs)
        except ValueError:
            graphs = None
    if not renames and not isinstance(graphs, list):
        return b
    source: dict[str, tuple[str, tuple[int, int] | None, tuple[int, ...] | None]] = {}
    infos: dict[str, TensorInfo] = {}
    for name in b.names:
        if _CAPTURED.match(name):
            continue
        parsed = parse_name(name)
        new = _rename_rest(parsed.rest, renames) if parsed is not None and parsed.rest else []
        if not new:
            source[name] = (name, None, None)
            infos[name] = b.info(name)
            continue
        info = b.info(name)
        prefix = name[: len(name) - len(parsed.rest)]
        for a_rest, part in new:
            shape = info.shape
            if part is not None:
                shape = (shape[0] // part[1], *shape[1:])
            source[prefix + a_rest] = (name, part, None)
            infos[prefix + a_rest] = TensorInfo(info.dtype, shape)
    captured_names: list[str] = []
    captured_statistics: dict[str, Statistics] = {}  # A's name -> B's statistics of the captured operation
    kinds: dict[str, str] = {}  # each captured activation's operation kind in B's graph
    differs = _batches(b.metadata.get("captured_differs"))
    autodiff = _autodiff_measure(a, b, graphs, differs) if differs and isinstance(graphs, list) else ""
    if isinstance(graphs, list):
        for step, graph in enumerate(graphs):
            if not isinstance(graph, dict) or step in differs:
                continue  # the forward pass without autodiff is not what the port computed on its device
            layers, layer_inputs = captured_layers(a, b, step, graph, renames)
            op_kinds = {f"step{step}.captured.{op.n}": op.kind for op in _ops(graph)}
            for a_name, b_name in [*layers.items(), *layer_inputs.items()]:
                if a_name in source or a_name in b.statistics or not _held(b, b_name):
                    continue  # a tap wins
                shape = _shape(a, a_name)
                b_shape = _shape(b, b_name)
                if b_name in b.statistics:
                    # its bytes are a reshape's: the statistics stand for A's shape where the sizes agree
                    held = b.statistics[b_name]
                    if held.n != int(np.prod(shape or (1,))):
                        if _broadcast_of(shape, b_shape):
                            continue  # a broadcast row: statistics have no rows
                        shape = b_shape
                    captured_statistics[a_name] = Statistics(held.dtype, tuple(shape), held.mean, held.norm,
                                                             held.max_abs, held.nonfinite, held.xxh3)
                    captured_names.append(a_name)
                    kinds[a_name] = op_kinds.get(b_name, "")
                    continue
                if int(np.prod(shape or (1,))) != b.info(b_name).n:
                    if _broadcast_of(shape, b_shape):
                        # PyTorch computes it once and broadcasts it (HF's position embeddings, [1, T, d]); the
                        # port for each row: its first row along those axes stands for it
                        source[a_name] = (b_name, ("first", tuple(i for i, (x, y) in enumerate(zip(shape, b_shape))
                                                                  if x == 1 and y != 1)), shape)
                        infos[a_name] = TensorInfo(b.info(b_name).dtype, shape)
                        captured_names.append(a_name)
                        continue
                    shape = b_shape  # a layer of another size: compared as a shape that parts
                source[a_name] = (b_name, None, shape)
                infos[a_name] = TensorInfo(b.info(b_name).dtype, shape)
                captured_names.append(a_name)
                kinds[a_name] = op_kinds.get(b_name, "")

    def array(name: str) -> np.ndarray:
        original, part, shape = source[name]
        data = b.array(original)
        if part is not None and part[0] == "first":
            data = data[tuple(slice(0, 1) if i in part[1] else slice(None) for i in range(data.ndim))]
        elif part is not None:
            data = np.split(data, part[1], axis=0)[part[0]]
        if shape is not None:
            data = data.reshape(shape)
        return data

    def release(name: str) -> None:
        b.release(source[name][0])

    metadata = dict(b.metadata)
    metadata.pop("captured", None)
    param_names = []
    for p in b.params:
        found = renames.a_names(p)
        param_names += [r.a for r in found] if found else [p]
    metadata["params"] = param_names
    activations = [n for n in (a.metadata.get("activations") or [])
                   if any(x.endswith(f".activations.{n}") for x in captured_names)]
    metadata["activations"] = list(dict.fromkeys([*(b.metadata.get("activations") or []), *activations]))
    if autodiff:
        metadata["autodiff_differs"] = autodiff
    if isinstance(graphs, list) and graphs and isinstance(graphs[0], dict) and 0 not in differs:
        unread = unread_params(a, graphs[0], renames)
        if unread:
            metadata["captured_unread"] = unread
    metadata["renamed_from"] = {r.a: r.b + (f"#{r.part[0]}" if r.part else "") for found in renames.by_b.values()
                                for r in found}
    if kinds:
        metadata["captured_kinds"] = kinds
    if captured_names:
        metadata["captured_layers"] = sorted({n.split(".", 2)[2] for n in captured_names})
    statistics = dict(captured_statistics)
    for name, stats in b.statistics.items():
        if _CAPTURED.match(name):
            continue  # an operation's output: named as A's module above, or none of A's
        parsed = parse_name(name)
        new = _rename_rest(parsed.rest, renames) if parsed is not None and parsed.rest else []
        if len(new) == 1 and new[0][1] is None:
            statistics[name[: len(name) - len(parsed.rest)] + new[0][0]] = stats
        else:
            statistics[name] = stats
    return Trace(b.path, metadata, infos, array, release, None, statistics)


def _broadcast_of(shape: tuple[int, ...], b_shape: tuple[int, ...]) -> bool:
    """Whether a tensor of ``shape`` broadcasts to ``b_shape`` along axes of size 1 (and only those)."""
    return len(shape) == len(b_shape) and shape != b_shape and all(x in (1, y) for x, y in zip(shape, b_shape))


def _batches(value: object) -> set[int]:
    """The batches metadata `captured_differs` lists (`0,1`)."""
    if not isinstance(value, str):
        return set()
    return {int(v) for v in value.split(",") if v.strip().isdigit()}


def _autodiff_measure(a: Trace, b: Trace, graphs: list, differs: set[int]) -> str:
    """What the forward pass without autodiff, captured beside a port's forward on an autodiff device, shows:
    one sentence when it gives A's output where the port's own forward does not, "" otherwise."""
    for step in sorted(differs):
        graph = graphs[step] if step < len(graphs) else None
        if not isinstance(graph, dict) or graph.get("output") is None:
            continue
        op = next((o for o in _ops(graph) if o.id == int(graph["output"])), None)
        outputs = [n for n in a.names if n.startswith(f"step{step}.outputs.")]
        if op is None or len(outputs) != 1 or outputs[0] not in b:
            continue
        captured = f"step{step}.captured.{op.n}"
        if captured not in b or outputs[0] not in a or b.info(captured).n != a.info(outputs[0]).n:
            continue
        expected = a.values(outputs[0])
        without, on_device = _distance(expected, b.values(captured)), _distance(expected, b.values(outputs[0]))
        if without <= 1e-5 and on_device > 100 * max(without, 1e-7):
            return (f"batch {step}: B's forward pass without autodiff gives A's output (relative error {without:.2g}) "
                    f"where on its autodiff device it does not ({on_device:.2g})")
    return ""
