"""Which rows of an embedding's weight each side looked up: the ids, read back from the lookup's output.

An embedding's output is rows of its weight, bit for bit. At a first divergence that is an `Embedding`'s output
(both sides hold the same weight: the comparison found their parameters equal), each row of B's output is found
among the weight's rows, which gives the ids B fed it; A's are what A recorded feeding it (`layer_inputs`: the ids
PyTorch looked up, HF's position ids a [1, T] arange), or A's output read back the same way. Then what B's ids are
in A's terms: A's shifted by a constant (position ids counted from 1 where A's start at 0), another of A's recorded
id tensors (the token type ids fed as positions, the batch's ids where A looks up positions), or A's clipped to
a bound. Rows that are no row of the weight (a lookup that also scales or adds) measure nothing.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from burnside.compare.layers.layer_fit import FLOATS, params_step
from burnside.trace import Trace, parse_name

KINDS = ("Embedding",)
#: Output rows read back at most (the first ones, leading axes flattened).
ROWS = 4096
INTS = ("I64", "I32", "I16", "I8", "U8", "U16", "U32", "U64")


@dataclass
class Lookup:
    """The ids each side's embedding at the first divergence looked up, and what B's are in A's terms."""

    module: str
    step: int
    a_ids: np.ndarray  # A's ids, shaped as B's output rows ([..., T])
    b_ids: np.ndarray
    a_source: str  # where A's ids were read: `step0.layer_inputs.{module}`, or `output` (read back from it)
    how: str  # `offset`, `input` (another recorded id tensor), `clipped`, `other`
    offset: int = 0  # B's ids minus A's (`offset`)
    other: str = ""  # the recorded id tensor B's ids are (`input`): `step0.inputs.token_type_ids`
    bound: int = 0  # the bound B's ids are clipped at (`clipped`)
    rows: int = 0  # the weight's rows

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"module": self.module, "step": self.step, "a_ids": shown(self.a_ids), "b_ids": shown(self.b_ids),
                "a_source": self.a_source, "how": self.how, "offset": self.offset, "other": self.other,
                "bound": self.bound, "rows": self.rows}


def shown(ids: np.ndarray) -> str:
    """Ids as a person reads them: `0..11` for a run counting up by one (in each row alike), else the first few."""
    flat = ids.reshape(-1, ids.shape[-1]) if ids.ndim else ids.reshape(1, 1)
    first = flat[0]
    if first.size > 1 and np.all(np.diff(first) == 1) and np.all(flat == first):
        return f"{int(first[0])}..{int(first[-1])}"
    values = [int(v) for v in ids.reshape(-1)[:8]]
    return "[" + ", ".join(map(str, values)) + (", ...]" if ids.size > 8 else "]")


def _read_back(output: np.ndarray, weight: np.ndarray, hint: np.ndarray | None = None) -> np.ndarray | None:
    """The weight's row index of each row of ``output`` ([rows, dim]), bit for bit; of two equal rows of the weight
    the one ``hint`` names where it is one of them, else the first. None when a row is none of the weight's."""
    by_bytes: dict[bytes, list[int]] = {}
    weight = np.ascontiguousarray(weight)
    for i in range(weight.shape[0]):
        by_bytes.setdefault(weight[i].tobytes(), []).append(i)
    ids = np.empty(output.shape[0], dtype=np.int64)
    output = np.ascontiguousarray(output.astype(weight.dtype, copy=False))
    for r in range(output.shape[0]):
        found = by_bytes.get(output[r].tobytes())
        if not found:
            return None
        ids[r] = int(hint[r]) if hint is not None and int(hint[r]) in found else found[0]
    return ids


def measure_lookup(a: Trace, b: Trace, first: str) -> Lookup | None:
    """The ids each side's `Embedding` at ``first`` looked up, or None: not an embedding's output, its weight not
    recorded, a row of either side's output no row of it, or both looked up the same ids."""
    parsed = parse_name(first)
    modules = a.metadata.get("modules")
    if parsed is None or parsed.stage != "activations" or not isinstance(modules, dict):
        return None
    module, k = parsed.rest, parsed.step
    if modules.get(module.split("#", 1)[0]) not in KINDS or first not in a or first not in b:
        return None
    owner = module.split("#", 1)[0]
    weight = None
    for trace in (b, a):
        name = f"step{params_step(trace, k)}.params_before.{owner}.weight"
        if name in trace and trace.info(name).dtype in FLOATS and len(trace.info(name).shape) == 2:
            weight = np.asarray(trace.values(name))
            break
    if weight is None:
        return None
    dim = weight.shape[1]
    a_shape, b_shape = a.info(first).shape, b.info(first).shape
    if not a_shape or not b_shape or a_shape[-1] != dim or b_shape[-1] != dim or math.prod(b_shape) // dim > ROWS:
        return None
    rows_shape = tuple(b_shape[:-1])
    a_ids, a_source = _a_ids(a, k, module, weight, rows_shape)
    if a_ids is None:
        return None
    b_out = np.asarray(b.values(first)).reshape(-1, dim)
    b_ids = _read_back(b_out, weight, a_ids.reshape(-1))
    if b_ids is None:
        return None
    b_ids = b_ids.reshape(rows_shape)
    if np.array_equal(a_ids, b_ids):
        return None
    found = Lookup(module, k, a_ids, b_ids, a_source, "other", rows=weight.shape[0])
    delta = b_ids - a_ids
    if np.all(delta == delta.reshape(-1)[0]):
        found.how, found.offset = "offset", int(delta.reshape(-1)[0])
        return found
    for name in _id_tensors(a, k, module):
        if _alike(np.asarray(a.values(name)), b_ids):
            found.how, found.other = "input", name
            return found
    apart = b_ids != a_ids
    bound = b_ids[apart]
    if bound.size and np.all(bound == bound[0]):
        c = int(bound[0])
        if np.all(a_ids[apart] > c) and np.all(a_ids[~apart] <= c) or np.all(a_ids[apart] < c) and \
                np.all(a_ids[~apart] >= c):
            found.how, found.bound = "clipped", c
    return found


def _a_ids(a: Trace, k: int, module: str, weight: np.ndarray,
           rows_shape: tuple[int, ...]) -> tuple[np.ndarray | None, str]:
    """A's ids, shaped as B's rows: what A recorded feeding the module (checked against A's output), or A's output
    read back."""
    output = np.asarray(a.values(f"step{k}.activations.{module}"))
    a_rows = output.reshape(-1, weight.shape[1])
    recorded = f"step{k}.layer_inputs.{module}"
    if recorded in a and a.info(recorded).dtype in INTS:
        ids = np.asarray(a.values(recorded)).astype(np.int64)
        if ids.size == a_rows.shape[0] and np.all((ids >= 0) & (ids < weight.shape[0])) and \
                np.array_equal(weight[ids.reshape(-1)], a_rows.astype(weight.dtype, copy=False)):
            shaped = _broadcast(ids.reshape(output.shape[:-1]), rows_shape)
            if shaped is not None:
                return shaped, recorded
    ids = _read_back(a_rows, weight)
    if ids is None:
        return None, ""
    return _broadcast(ids.reshape(output.shape[:-1]), rows_shape), "output"


def _broadcast(ids: np.ndarray, shape: tuple[int, ...]) -> np.ndarray | None:
    """``ids`` as ``shape`` (HF's [1, T] position ids for a [B, T] lookup), or None when they do not broadcast."""
    try:
        return np.broadcast_to(ids.astype(np.int64), shape).copy()
    except ValueError:
        return None


def _alike(values: np.ndarray, ids: np.ndarray) -> bool:
    """Whether ``values`` are ``ids`` where the two broadcast together (the batch's [B, T] token types, each row
    alike, and a [1, T] lookup of them)."""
    try:
        left, right = np.broadcast_arrays(values.astype(np.int64), ids)
    except ValueError:
        return False
    return bool(np.array_equal(left, right))


def _id_tensors(a: Trace, k: int, module: str) -> list[str]:
    """A's integer tensors recorded at step ``k`` other than the module's own input: the batch's inputs first, then
    what A's other modules were fed."""
    own = f"step{k}.layer_inputs.{module}"
    names = [n for n in a.names if n.startswith((f"step{k}.inputs.", f"step{k}.layer_inputs."))
             and n != own and a.info(n).dtype in INTS]
    names.sort(key=lambda n: ".inputs." not in n)
    return names
