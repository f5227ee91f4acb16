"""The port's trace named as PyTorch's: names from what the port loaded, layers from its captured graph.

A port written by someone else names its tensors its own way; `burnside.compare.renames.param_renames` names each
of B's start tensors after the checkpoint tensor it holds, and here every stage that names parameters (gradients,
optimizer state, parameters after) follows.

A port recorded without taps (`Inference` under graph capture, burnside-trace's `capture`) records
every operation of its forward pass and the graph (metadata `captured`); `captured_layers` says
which of those outputs is the output of each PyTorch module: a module that holds parameters by
the last operation reading them (or its descendants'), the others (activations, pools, a block's
residual tail, containers) by the operation between those anchors whose output is closest to
PyTorch's. The rows are then the same `activations.*` and `layer_inputs.*` a tap gives.

`align(a, b)` is B with both applied, as a `Trace` whose tensors are B's, under A's names.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from burnside.compare.renames import Renames, module_of, param_renames, rename_rest, start_names
from burnside.trace import Trace, TensorInfo, parse_name
from burnside.trace.statistics import Statistics, lower_bound

#: A captured operation's output (`step{k}.captured.{n}`), named as a module's by `captured_layers`.
_CAPTURED = re.compile(r"^step\d+\.captured\.\d+$")


def _held(trace: Trace, name: str) -> bool:
    """Whether ``trace`` holds ``name`` in full or as statistics only."""
    return name in trace or name in trace.statistics


def _shape(trace: Trace, name: str) -> tuple[int, ...]:
    """The shape of a tensor held in full or as statistics."""
    stats = trace.statistics.get(name)
    return stats.shape if stats is not None else trace.info(name).shape


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
    a_params = set(a.params) or {p for p in start_names(a) if not p.endswith(("running_mean", "running_var"))}
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
    classes = a.metadata.get("modules") or {}
    order = [m for m in (a.metadata.get("activations") or [])]
    first_reading, last_reading = _readings(ops, renames, set(start_names(a)))

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
    unread_modules = {module_of(p) for p in unread_params(a, graph, renames)}
    out: dict[str, str] = {}
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
        kinds = _OP_KINDS.get(str(classes.get(module.split("#")[0], "")), ())
        found = _by_value(a, b, a_name, [op for op in ops if low <= op.n < high], kinds, name_of)
        if found is not None:
            out[a_name] = name_of(found)
            previous = found
    return out, _layer_inputs(a, ops, step, anchors, first_reading, classes)


def _readings(ops: list[Op], renames: Renames, a_params: set[str]) -> tuple[dict[str, int], dict[str, int]]:
    """The first and the last operation that reads a parameter of each of A's modules (and its ancestors)."""
    # the A module (and its ancestors) each op's parameters belong to
    owner: dict[int, set[str]] = {}
    for op in ops:
        for name in op.params:
            a_name = _a_name_of(name, renames, a_params)
            if a_name is not None:
                owner.setdefault(op.n, set()).add(module_of(a_name))
    last_reading: dict[str, int] = {}
    first_reading: dict[str, int] = {}
    for op in ops:
        for module in owner.get(op.n, ()):
            parts = module.split(".") if module else [""]
            for i in range(len(parts), 0, -1):
                prefix = ".".join(parts[:i])
                last_reading[prefix] = op.n
                first_reading.setdefault(prefix, op.n)
    return first_reading, last_reading


def _by_value(a: Trace, b: Trace, a_name: str, window: list[Op], kinds: tuple,
              name_of: Callable[[int], str]) -> int | None:
    """The operation of ``window`` whose output is A's ``a_name``: of the module's kinds (``kinds``) where any is
    there, of its number of elements, nearest in value; the module's own operation of another size (a pooling's
    padding: compared as a shape that parts) when none has its size; None when nothing stands for it."""
    shape = _shape(a, a_name)
    n_elements = int(np.prod(shape)) if shape else 1
    same_kind = [op for op in window if op.kind in kinds]
    candidates = [op for op in (same_kind or window) if int(np.prod(op.shape or (1,))) == n_elements]
    if not candidates and same_kind and len(same_kind[0].shape) == len(shape):
        return same_kind[0].n
    candidates = [op for op in candidates if _held(b, name_of(op.n))]
    if not candidates:
        return None
    return min(candidates, key=lambda op: (_values_distance(a, a_name, b, name_of(op.n)), -op.n)).n


def _layer_inputs(a: Trace, ops: list[Op], step: int, anchors: dict[str, int], first_reading: dict[str, int],
                  classes: dict) -> dict[str, str]:
    """What each anchored layer read: the tensor its first operation reads beside its parameters, for a layer whose
    first operation is its product with the input (a Linear's matmul, a convolution); a norm's first operation
    reading a parameter multiplies the already normalised input by its weight, so its input is not attributed."""
    by_id = {op.id: op for op in ops}
    by_n = {op.n: op for op in ops}
    inputs: dict[str, str] = {}
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
                inputs[a_name] = f"step{step}.captured.{by_id[read].n}"
                break
    return inputs


# ---- B under A's names -------------------------------------------------------------------------------------------

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
    view = _View(b)
    view.rename(renames)
    differs = _batches(b.metadata.get("captured_differs"))
    autodiff = _autodiff_measure(a, b, graphs, differs) if differs and isinstance(graphs, list) else ""
    if isinstance(graphs, list):
        for step, graph in enumerate(graphs):
            if not isinstance(graph, dict) or step in differs:
                continue  # the forward pass without autodiff is not what the port computed on its device
            layers, layer_inputs = captured_layers(a, b, step, graph, renames)
            op_kinds = {f"step{step}.captured.{op.n}": op.kind for op in _ops(graph)}
            for a_name, b_name in [*layers.items(), *layer_inputs.items()]:
                if a_name in view.source or a_name in b.statistics or not _held(b, b_name):
                    continue  # a tap wins
                view.capture(a_name, b_name, _shape(a, a_name), op_kinds.get(b_name, ""))
    unread = unread_params(a, graphs[0], renames) \
        if isinstance(graphs, list) and graphs and isinstance(graphs[0], dict) and 0 not in differs else []
    metadata = _aligned_metadata(a, b, renames, view, autodiff, unread)
    return Trace(b.path, metadata, view.infos, view.array, view.release, None, _aligned_statistics(b, renames, view))


class _View:
    """B's tensors under A's names: where each comes from in B's trace (a tensor, a slice of a packed one, the
    first row of a broadcast one, a captured operation's output reshaped), and the captured ones."""

    def __init__(self, b: Trace) -> None:
        self.b = b
        #: A's name -> (B's name, a slice or broadcast axes or None, the shape to read it as or None)
        self.source: dict[str, tuple[str, tuple | None, tuple[int, ...] | None]] = {}
        self.infos: dict[str, TensorInfo] = {}
        self.captured_names: list[str] = []
        self.captured_statistics: dict[str, Statistics] = {}  # A's name -> B's statistics of the captured operation
        self.kinds: dict[str, str] = {}  # each captured activation's operation kind in B's graph

    def rename(self, renames: Renames) -> None:
        """Each of B's tensors held in full (not a captured operation's) under A's name for it, or its own."""
        b = self.b
        for name in b.names:
            if _CAPTURED.match(name):
                continue
            parsed = parse_name(name)
            new = rename_rest(parsed.rest, renames) if parsed is not None and parsed.rest else []
            if not new:
                self.source[name] = (name, None, None)
                self.infos[name] = b.info(name)
                continue
            info = b.info(name)
            prefix = name[: len(name) - len(parsed.rest)]
            for a_rest, part in new:
                shape = info.shape
                if part is not None:
                    shape = (shape[0] // part[1], *shape[1:])
                self.source[prefix + a_rest] = (name, part, None)
                self.infos[prefix + a_rest] = TensorInfo(info.dtype, shape)

    def capture(self, a_name: str, b_name: str, shape: tuple[int, ...], kind: str) -> None:
        """B's captured operation ``b_name`` (of operation kind ``kind``) as A's ``a_name`` (of ``shape``)."""
        b = self.b
        b_shape = _shape(b, b_name)
        if b_name in b.statistics:
            # its bytes are a reshape's: the statistics stand for A's shape where the sizes agree
            held = b.statistics[b_name]
            if held.n != int(np.prod(shape or (1,))):
                if _broadcast_of(shape, b_shape):
                    return  # a broadcast row: statistics have no rows
                shape = b_shape
            self.captured_statistics[a_name] = Statistics(held.dtype, tuple(shape), held.mean, held.norm,
                                                          held.max_abs, held.nonfinite, held.xxh3)
            self.captured_names.append(a_name)
            self.kinds[a_name] = kind
            return
        if int(np.prod(shape or (1,))) != b.info(b_name).n:
            if _broadcast_of(shape, b_shape):
                # PyTorch computes it once and broadcasts it (HF's position embeddings, [1, T, d]); the
                # port for each row: its first row along those axes stands for it
                self.source[a_name] = (b_name, ("first", tuple(i for i, (x, y) in enumerate(zip(shape, b_shape))
                                                               if x == 1 and y != 1)), shape)
                self.infos[a_name] = TensorInfo(b.info(b_name).dtype, shape)
                self.captured_names.append(a_name)
                return
            shape = b_shape  # a layer of another size: compared as a shape that parts
        self.source[a_name] = (b_name, None, shape)
        self.infos[a_name] = TensorInfo(b.info(b_name).dtype, shape)
        self.captured_names.append(a_name)
        self.kinds[a_name] = kind

    def array(self, name: str) -> np.ndarray:
        original, part, shape = self.source[name]
        data = self.b.array(original)
        if part is not None and part[0] == "first":
            data = data[tuple(slice(0, 1) if i in part[1] else slice(None) for i in range(data.ndim))]
        elif part is not None:
            data = np.split(data, part[1], axis=0)[part[0]]
        if shape is not None:
            data = data.reshape(shape)
        return data

    def release(self, name: str) -> None:
        self.b.release(self.source[name][0])


def _aligned_metadata(a: Trace, b: Trace, renames: Renames, view: _View, autodiff: str, unread: list[str]) -> dict:
    """B's metadata under A's names: its parameters, the activations its captured forward pass gave, what its
    forward without autodiff shows (``autodiff``), the parameters it never reads (``unread``), what was renamed
    from what, and the captured layers with their operation kinds."""
    metadata = dict(b.metadata)
    metadata.pop("captured", None)
    param_names = []
    for p in b.params:
        found = renames.a_names(p)
        param_names += [r.a for r in found] if found else [p]
    metadata["params"] = param_names
    activations = [n for n in (a.metadata.get("activations") or [])
                   if any(x.endswith(f".activations.{n}") for x in view.captured_names)]
    metadata["activations"] = list(dict.fromkeys([*(b.metadata.get("activations") or []), *activations]))
    if autodiff:
        metadata["autodiff_differs"] = autodiff
    if unread:
        metadata["captured_unread"] = unread
    metadata["renamed_from"] = {r.a: r.b + (f"#{r.part[0]}" if r.part else "") for found in renames.by_b.values()
                                for r in found}
    if view.kinds:
        metadata["captured_kinds"] = view.kinds
    if view.captured_names:
        metadata["captured_layers"] = sorted({n.split(".", 2)[2] for n in view.captured_names})
    return metadata


def _aligned_statistics(b: Trace, renames: Renames, view: _View) -> dict[str, Statistics]:
    """B's statistics-only tensors under A's names, and the captured operations' held as statistics."""
    statistics = dict(view.captured_statistics)
    for name, stats in b.statistics.items():
        if _CAPTURED.match(name):
            continue  # an operation's output: named as A's module above, or none of A's
        parsed = parse_name(name)
        new = rename_rest(parsed.rest, renames) if parsed is not None and parsed.rest else []
        if len(new) == 1 and new[0][1] is None:
            statistics[name[: len(name) - len(parsed.rest)] + new[0][0]] = stats
        else:
            statistics[name] = stats
    return statistics


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
