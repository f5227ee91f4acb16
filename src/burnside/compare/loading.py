"""The loading check of a forward trace: how each start tensor the port holds differs from PyTorch's.

A forward trace starts from the parameters and buffers the model holds as loaded
(`step0.params_before.*`, `step0.buffers.*`). An inference port loads them from the PyTorch
checkpoint, so each must be bit-identical to PyTorch's; one that is not is named here with its
fault, read from the two tensors while compare has them mapped (no second read):

- transposed: B holds A's values with the axes swapped (a Linear weight left in [in, out]);
- gates in another order: a GRU's [3H, ...] (r, z, n) or an LSTM's [4H, ...] (i, f, g, o) weight
  whose row blocks are A's blocks permuted;
- running statistics fresh: a running_mean of zeros / running_var of ones where A's are not;
- not loaded: values unrelated to A's (a constant, or uncorrelated: a fresh initialisation);
- dtype narrowed: a narrower dtype than A's, or A's values rounded to f16 / bf16;
- only in A / only in B: a tensor one side's model does not hold;
- shape: another shape (a layer built with other sizes); altered: close to A's, not equal.

The diagnosis rule D014 reports them; the table lists them in place of the generic start lines.
"""

from __future__ import annotations

import itertools
import math
import re
from dataclasses import dataclass

import numpy as np

from burnside.compare.rounding import CHUNK
from burnside.trace import parse_name
from burnside.trace.statistics import Statistics, lower_bound

#: Fault kinds, in the order the report explains them.
KINDS = ("only_in_a", "only_in_b", "shape", "transposed", "gate_order", "other_tensor", "fresh_stats",
         "dtype_narrowed", "not_loaded", "altered")

#: Gate blocks of PyTorch's stacked recurrent weights, by the module's class (and by the block count).
GATES = {"GRU": ("r", "z", "n"), "GRUCell": ("r", "z", "n"), "LSTM": ("i", "f", "g", "o"),
         "LSTMCell": ("i", "f", "g", "o")}
_GATES_BY_COUNT = {3: ("r", "z", "n"), 4: ("i", "f", "g", "o")}

#: Width in bytes of each float dtype: a narrower one on B rounds A's values.
_WIDTH = {"F64": 8, "F32": 4, "F16": 2, "BF16": 2}

#: Beyond this relative difference and below this |correlation|, B's values are not A's at all.
UNRELATED_RELATIVE = 0.5
UNRELATED_CORRELATION = 0.5

_NOT_LOADED_FIX = ("not loaded from the checkpoint: burn-store skips a tensor whose name it cannot match; check the "
                   "port's name mapping or remapping (PytorchStore::with_key_remapping), and load without "
                   "allow_partial(true) so a tensor it cannot match is an error, not a fresh initialisation")


#: PyTorch's packed tensors: one tensor holds several of burn's (q, k, v; a recurrent layer's gates)
_PACKED = re.compile(r"(^|\.)(in_proj_weight|in_proj_bias|weight_ih_l\d+|weight_hh_l\d+|bias_ih_l\d+|bias_hh_l\d+)"
                     r"(_reverse)?$")


def _not_loaded_fix(name: str) -> str:
    """The fix of a tensor the port did not load; a packed one needs a loader that cuts it, no remapping can."""
    parsed = parse_name(name)
    if parsed is not None and _PACKED.search(parsed.rest):
        return ("not loaded from the checkpoint: it is one of PyTorch's packed tensors (an nn.MultiheadAttention's "
                "in_proj, an nn.LSTM's or nn.GRU's stacked gates), which burn-store's PytorchStore cannot cut into "
                "burn's layers and no name remapping can: load the checkpoint with "
                "`burnside_trace::load_pytorch_checkpoint(model, path)`, which cuts them, and without "
                "allow_partial(true), so a tensor that cannot be matched is an error, not a fresh initialisation")
    return _NOT_LOADED_FIX


@dataclass(frozen=True)
class LoadingFault:
    """One start tensor (parameter or buffer) the port does not hold as the checkpoint has it."""

    name: str  # the trace name, `step0.params_before.fc.weight`
    kind: str  # one of KINDS
    evidence: str  # what the two tensors show, with numbers
    fix: str

    @property
    def tensor(self) -> str:
        """The parameter or buffer path (`fc.weight`)."""
        parsed = parse_name(self.name)
        return parsed.rest if parsed is not None else self.name

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"name": self.name, "tensor": self.tensor, "kind": self.kind, "evidence": self.evidence,
                "fix": self.fix}


def is_loaded_start(name: str) -> bool:
    """Whether ``name`` is a tensor a forward trace's model holds as loaded: step 0's parameters and buffers."""
    parsed = parse_name(name)
    return parsed is not None and parsed.step == 0 and parsed.stage in ("params_before", "buffers")


def _bits(x: np.ndarray) -> np.ndarray:
    """The raw bits, so NaNs and -0.0 compare as stored."""
    x = np.ascontiguousarray(x)
    return x.view({8: np.uint64, 4: np.uint32, 2: np.uint16, 1: np.uint8}[x.dtype.itemsize])


def _values(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":
        return (np.ascontiguousarray(x).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return x


def _shape(shape: tuple[int, ...]) -> str:
    return str(list(shape))


def shape_fault(name: str, a: np.ndarray, b: np.ndarray) -> LoadingFault:
    """B's tensor has another shape: its axes permuted with A's values (transposed), or another layer size."""
    if a.ndim == b.ndim and a.ndim >= 2 and a.dtype == b.dtype:
        for perm in itertools.permutations(range(a.ndim)):
            if perm == tuple(range(a.ndim)) or tuple(a.shape[i] for i in perm) != b.shape:
                continue
            if np.array_equal(_bits(np.transpose(a, perm)), _bits(b)):
                return _transposed(name, a.shape, b.shape, perm)
    return LoadingFault(
        name, "shape", f"B holds shape {_shape(b.shape)}, A {_shape(a.shape)}",
        "build the port's layer with the checkpoint's sizes (features, channels, kernel, hidden size): a tensor of "
        "another shape cannot be the checkpoint's")


def _transposed(name: str, shape_a, shape_b, perm) -> LoadingFault:
    axes = "transposed" if len(perm) == 2 else f"its axes permuted {list(perm)}"
    return LoadingFault(
        name, "transposed", f"B holds A's values {axes} (A {_shape(shape_a)}, B {_shape(shape_b)})",
        "load through burn-store's PytorchStore (its PyTorchToBurnAdapter transposes a Linear weight from PyTorch's "
        "[out, in] to burn's [in, out]) instead of copying the array as stored, and record the weight in PyTorch's "
        "layout (the burnside-trace recorder does)")


def widened_start(a: np.ndarray, dtype_a: str, dtype_b: str) -> np.ndarray | None:
    """A's half-precision tensor (BF16, F16) widened exactly to B's wider float dtype (F32, F64): what a port that
    loads a half checkpoint into a wider model holds (every bf16 and f16 value is an f32 value); None for any other
    pair of dtypes."""
    if dtype_a not in ("BF16", "F16") or dtype_b not in ("F32", "F64"):
        return None
    return _values(np.ascontiguousarray(a), dtype_a).astype(np.float32 if dtype_b == "F32" else np.float64)


def kept_half_fault(name: str, a: np.ndarray, b: np.ndarray, dtype_a: str, dtype_b: str) -> LoadingFault | None:
    """B holds a half tensor (BF16, F16) whose values are exactly A's wider ones: a half checkpoint loaded as it is
    stored into the port's wider model (burn-store keeps a tensor's stored dtype), not rounded; None otherwise."""
    widened = widened_start(b, dtype_b, dtype_a)
    if widened is None or not np.array_equal(_bits(widened), _bits(np.ascontiguousarray(a))):
        return None
    return LoadingFault(
        name, "dtype_narrowed", f"B holds it as {dtype_b}, A as {dtype_a}: the same values, not converted",
        f"the checkpoint stores it as {dtype_b} and burn-store loads a tensor in its stored dtype: cast it to the "
        f"model's {dtype_a} as it loads, PyTorchToBurnAdapter.chain(FloatCastAdapter::to(DType::{dtype_a})) (exact: "
        f"every {dtype_b} value is an {dtype_a} value)")


def dtype_fault(name: str, dtype_a: str, dtype_b: str) -> LoadingFault:
    """B's tensor has another dtype than A's."""
    narrower = dtype_a in _WIDTH and dtype_b in _WIDTH and _WIDTH[dtype_b] < _WIDTH[dtype_a]
    if narrower or (dtype_a == "F32" and dtype_b == "BF16"):
        return _narrowed(name, f"B holds it as {dtype_b}, A as {dtype_a}", dtype_b)
    return LoadingFault(name, "altered", f"B holds it as {dtype_b}, A as {dtype_a}",
                        f"load it as the checkpoint stores it ({dtype_a})")


def _narrowed(name: str, evidence: str, dtype: str) -> LoadingFault:
    return LoadingFault(
        name, "dtype_narrowed", evidence,
        f"load and run the weights in the checkpoint's dtype: {'an' if dtype.startswith('F') else 'a'} {dtype} load "
        "(a FloatCastAdapter, a half-precision "
        "device or a cast after loading) rounds every weight; judge a half-precision port against a PyTorch run in "
        "the same dtype")


def value_fault(name: str, a: np.ndarray, b: np.ndarray, dtype: str, modules: object,
                holder: str | None = None) -> LoadingFault:
    """Same shape and dtype, some bits differ: say what B holds instead of A's values. ``holder``: A's other
    start tensor whose bytes B's are (a loader's mapping that sends the checkpoint's `key` to `query`)."""
    parsed = parse_name(name)
    leaf = parsed.rest.rsplit(".", 1)[-1] if parsed is not None else name
    av, bv = _values(a, dtype), _values(b, dtype)
    if holder is not None and parsed is not None:
        return LoadingFault(
            name, "other_tensor", f"B's {parsed.rest} holds the checkpoint's {holder}, bit for bit",
            f"load the checkpoint's {parsed.rest} into this tensor, not {holder}: the loader's name mapping (a "
            f"burn-store KeyRemapper pattern, a with_key_remapping rule, a hand-written table) sends {holder} here; "
            "correct the pattern that maps it")
    if parsed is not None and parsed.stage == "buffers" and leaf in ("running_mean", "running_var"):
        fresh = 0.0 if leaf == "running_mean" else 1.0
        if _all_equal(bv, fresh) and not _all_equal(av, fresh):
            module = parsed.rest.rsplit(".", 1)[0]
            return LoadingFault(
                name, "fresh_stats",
                f"B's {leaf} is all {fresh:g}, a fresh BatchNorm's, where A's is not (A's ranges "
                f"{_range(av)})",
                f"load {module}'s running_mean and running_var from the checkpoint: burn's BatchNorm keeps them as "
                "state the PytorchStore loads when the port's module is named as PyTorch's; a port that loads only "
                "the parameters (or that names the layer otherwise) runs on the fresh 0/1 statistics")
    if a.ndim == 2 and a.shape[0] == a.shape[1] and a.shape[0] > 1 and np.array_equal(_bits(a.T), _bits(b)):
        return _transposed(name, a.shape, b.shape, (1, 0))
    if a.ndim == 2 and a.shape[0] != a.shape[1] and min(a.shape) > 1 \
            and np.array_equal(_bits(a.reshape(a.shape[::-1]).T), _bits(b)):
        # A Linear weight [out, in] read in file order into burn's [in, out]: the shape fits, the values do not
        return LoadingFault(
            name, "transposed",
            f"B holds A's values in their stored order reshaped to {_shape(a.shape[::-1])} (burn's [in, out]) where "
            f"they needed a transpose (A {_shape(a.shape)})",
            "transpose a PyTorch Linear weight from [out, in] into burn's [in, out] (`.transpose()`, or load it with "
            "burn-store's PytorchStore, whose PyTorchToBurnAdapter does), not reshape it: a reshape keeps the shape "
            "valid and scrambles the weight")
    gates = gate_fault(name, a, b, modules)
    if gates is not None:
        return gates
    if dtype in ("F32", "F64"):
        for narrow in ("F16", "BF16"):
            if np.array_equal(_bits(_round_to(av, narrow)), _bits(bv)):
                return _narrowed(name, f"B holds A's values rounded to {narrow.lower()} (stored as {dtype})", narrow)
    if av.dtype.kind != "f":
        return LoadingFault(name, "not_loaded", f"{int(np.count_nonzero(a != b))} of {a.size} elements differ",
                            _NOT_LOADED_FIX)
    relative, correlation, constant = _relation(av, bv)
    if constant is not None and not _all_equal(av, constant):
        return LoadingFault(name, "not_loaded", f"B holds {constant:g} everywhere (an initialiser's value); A's "
                            f"values range {_range(av)}", _not_loaded_fix(name))
    if relative > UNRELATED_RELATIVE and (correlation is None or abs(correlation) < UNRELATED_CORRELATION):
        corr = "undefined" if correlation is None else f"{correlation:.2f}"
        return LoadingFault(
            name, "not_loaded", f"B's values are unrelated to A's (relative difference {relative:.3g}, correlation "
            f"{corr}): B looks freshly initialised", _not_loaded_fix(name))
    differing = int(np.count_nonzero(_bits(a) != _bits(b)))
    return LoadingFault(
        name, "altered", f"{differing} of {a.size} elements differ (relative difference {relative:.3g}"
        + (f", correlation {correlation:.4f}" if correlation is not None else "") + ")",
        "load the tensor as the checkpoint stores it and leave it as loaded: a conversion through another dtype, a "
        "recomputed or fused weight, or an in-place update before the forward changes it")


#: What a fault found from statistics cannot say, and how to see it.
_STATISTICS_ONLY = ("recorded as statistics (record_forward(..., statistics=False) records the parameters in full, and "
                    "the comparison then names which elements differ and how)")


def statistics_fault(name: str, a: Statistics, b: Statistics, holder: str | None = None) -> LoadingFault:
    """A start tensor held as statistics on a side whose bytes are not A's (another hash): what its statistics
    show. ``holder``: A's other start tensor whose bytes (dtype, shape, hash) B's are. The lower bound on
    max|A - B| (`lower_bound`) says how far apart; equal mean, norm and largest magnitude with another hash are
    A's values in another order (transposed, gates or heads reordered), which statistics cannot tell apart."""
    parsed = parse_name(name)
    tensor = parsed.rest if parsed is not None else name
    if holder is not None:
        return LoadingFault(
            name, "other_tensor",
            f"B's {tensor} holds the checkpoint's {holder}, bit for bit (by the hash of its bytes)",
            f"load the checkpoint's {tensor} into this tensor, not {holder}: the loader's name mapping (a burn-store "
            f"KeyRemapper pattern, a with_key_remapping rule, a hand-written table) sends {holder} here; correct the "
            "pattern that maps it")
    same_values = same_value_statistics(a, b)
    if same_values and a.shape != b.shape:
        return LoadingFault(
            name, "transposed", f"B holds shape {_shape(b.shape)} with A's mean, norm and largest magnitude (A "
            f"{_shape(a.shape)}): most likely A's values with the axes swapped ({_STATISTICS_ONLY})",
            "load through burn-store's PytorchStore (its PyTorchToBurnAdapter transposes a Linear weight from "
            "PyTorch's [out, in] to burn's [in, out]) instead of copying the array as stored, and record the weight in "
            "PyTorch's layout (the burnside-trace recorder does)")
    if same_values:
        return LoadingFault(
            name, "altered", f"B holds the same mean ({a.mean:.6g}), norm ({a.norm:.6g}) and largest magnitude "
            f"({a.max_abs:.6g}) as A in other bytes: most likely A's values in another order ({_STATISTICS_ONLY})",
            "load the tensor in the checkpoint's layout: a transpose of a square weight, gates, heads or q/k/v in "
            "another order keep its values and move them")
    bound = lower_bound(a, b)
    figures = (f"A: mean {a.mean:.6g}, norm {a.norm:.6g}, largest magnitude {a.max_abs:.6g}; B: mean {b.mean:.6g}, "
               f"norm {b.norm:.6g}, largest magnitude {b.max_abs:.6g}")
    if b.n and b.nonfinite == 0 and b.max_abs == abs(b.mean) and not (a.nonfinite == 0 and a.max_abs == abs(a.mean)):
        return LoadingFault(name, "not_loaded", f"B holds {b.mean:g} everywhere (an initialiser's value), by its "
                            f"statistics; {figures}", _not_loaded_fix(name))
    return LoadingFault(
        name, "altered", f"B's bytes are not A's: max|A - B| is at least {bound:.3g} by their statistics ({figures}; "
        f"{_STATISTICS_ONLY})",
        "load the tensor as the checkpoint stores it and leave it as loaded: a conversion through another dtype, a "
        "recomputed or fused weight, or an in-place update before the forward changes it")


#: Two sums in float64 of the same float32 values in another order agree to far better than this, relative to the
#: tensor's root mean square; one element moved by one float32 ulp moves the mean by more (1/n of an ulp of it).
_SAME_SUMS = 1e-12


def same_value_statistics(a: Statistics, b: Statistics) -> bool:
    """Whether two tensors' statistics are those of the same values, perhaps in another order: the same count,
    largest magnitude and non-finite count, and mean and norm equal but for the rounding of float64 sums taken in
    another order (`_SAME_SUMS`)."""
    if a.n != b.n or a.max_abs != b.max_abs or a.nonfinite != b.nonfinite or a.nonfinite:
        return False
    rms = a.norm / math.sqrt(max(a.n, 1))
    return abs(a.norm - b.norm) <= _SAME_SUMS * a.norm and abs(a.mean - b.mean) <= _SAME_SUMS * rms


def gate_fault(name: str, a: np.ndarray, b: np.ndarray, modules: object) -> LoadingFault | None:
    """B's tensor holds A's gate (or q,k,v) row blocks in another order: the fault naming the order, else None.
    Also asked of a training trace's initial parameters: a port that loads the init file's LSTM, GRU or
    attention weights into its gates in another order starts from A's values, permuted."""
    parsed = parse_name(name)
    gates = _gate_order(parsed, a, b, modules)
    if gates is None:
        return None
    found, names, kind = gates
    if kind == "MultiheadAttention":
        return LoadingFault(
            name, "gate_order",
            f"B holds A's 3 row blocks of {a.shape[0] // 3} in the order {','.join(found)} where PyTorch's "
            "MultiheadAttention stacks q,k,v (query, key, value)",
            "cut PyTorch's in_proj_weight [3E, E] and in_proj_bias [3E] into burn's MultiHeadAttention query, "
            "key and value in that order (rows 0..E query, E..2E key, 2E..3E value), or load the checkpoint with "
            "`burnside_trace::load_pytorch_checkpoint`, which does")
    return LoadingFault(
        name, "gate_order",
        f"B holds A's {len(names)} row blocks of {a.shape[0] // len(names)} in the gate order "
        f"{','.join(found)} where PyTorch's {kind} stacks {','.join(names)}",
        f"split PyTorch's stacked [{len(names)}H, ...] tensor into burn's gates in PyTorch's order, "
        f"{_GATE_WORDS[len(names)]} (rows 0..H are {names[0]}, H..2H {names[1]}, and so on), and record them "
        "stacked back in that order")


_GATE_WORDS = {3: "GRU: reset r, update z, new n", 4: "LSTM: input i, forget f, cell g, output o"}


def _gate_order(parsed, a: np.ndarray, b: np.ndarray, modules: object) -> tuple[tuple, tuple, str] | None:
    """B's row blocks as a permutation of A's gate blocks: (the order found, PyTorch's order, the class)."""
    if parsed is None or a.ndim < 1 or a.shape[0] < 3:
        return None
    leaf = parsed.rest.rsplit(".", 1)[-1]
    module = parsed.rest.rsplit(".", 1)[0] if "." in parsed.rest else ""
    kind = modules.get(module) if isinstance(modules, dict) else None
    if leaf in ("in_proj_weight", "in_proj_bias"):
        # nn.MultiheadAttention stacks query, key and value as three row blocks
        candidates = [(("q", "k", "v"), "MultiheadAttention")]
    elif kind in GATES:
        candidates = [(GATES[kind], kind)]
    elif leaf.startswith(("weight_ih", "weight_hh", "bias_ih", "bias_hh")):
        candidates = [(names, "GRU" if len(names) == 3 else "LSTM") for names in _GATES_BY_COUNT.values()]
    else:
        return None
    for names, cls in candidates:
        g = len(names)
        if a.shape[0] % g:
            continue
        blocks_a = [_bits(x).tobytes() for x in np.split(np.asarray(a), g, axis=0)]
        blocks_b = [_bits(x).tobytes() for x in np.split(np.asarray(b), g, axis=0)]
        if len(set(blocks_a)) < g or sorted(blocks_a) != sorted(blocks_b):
            continue
        order = tuple(names[blocks_a.index(block)] for block in blocks_b)
        if order != names:
            return order, names, cls
    return None


def _round_to(x: np.ndarray, dtype: str) -> np.ndarray:
    """``x`` rounded to f16 or bf16 (to nearest, ties to even) and widened back to its own dtype."""
    if dtype == "F16":
        return x.astype(np.float16).astype(x.dtype)
    f = np.ascontiguousarray(x, dtype=np.float32)
    u = f.view(np.uint32).astype(np.uint64)
    rounded = ((u + 0x7FFF + ((u >> 16) & 1)) & 0xFFFF0000).astype(np.uint32)
    return rounded.view(np.float32).astype(x.dtype)


def _all_equal(x: np.ndarray, value: float) -> bool:
    flat = x.reshape(-1)
    return all(bool(np.all(flat[s:s + CHUNK] == value)) for s in range(0, flat.size, CHUNK))


def _range(x: np.ndarray) -> str:
    flat = x.reshape(-1)
    with np.errstate(all="ignore"):
        return f"{float(np.min(flat)):.3g} to {float(np.max(flat)):.3g}" if flat.size else "empty"


def _relation(a: np.ndarray, b: np.ndarray) -> tuple[float, float | None, float | None]:
    """||b - a|| / ||a||, the correlation of the two (None when either is constant), and B's value
    when B is one constant. In float64, chunk by chunk."""
    fa, fb = a.reshape(-1), b.reshape(-1)
    n = fa.size
    sa = sb = saa = sbb = sab = sdd = 0.0
    first = float(fb[0]) if n else 0.0
    constant = True
    with np.errstate(all="ignore"):
        for s in range(0, n, CHUNK):
            x = fa[s:s + CHUNK].astype(np.float64)
            y = fb[s:s + CHUNK].astype(np.float64)
            sa += float(x.sum())
            sb += float(y.sum())
            saa += float(x @ x)
            sbb += float(y @ y)
            sab += float(x @ y)
            d = y - x
            sdd += float(d @ d)
            constant = constant and bool(np.all(y == first))
        relative = math.sqrt(sdd) / math.sqrt(saa) if saa > 0 else math.inf
        var_a, var_b = saa - sa * sa / n if n else 0.0, sbb - sb * sb / n if n else 0.0
        cov = sab - sa * sb / n if n else 0.0
        correlation = cov / math.sqrt(var_a * var_b) if var_a > 0 and var_b > 0 else None
    if correlation is not None and not math.isfinite(correlation):
        correlation = None
    return relative, correlation, first if constant and n > 1 else None


def tied_fault(name: str, first: str, a: np.ndarray | None, b: np.ndarray | None) -> LoadingFault:
    """B holds ``name`` as a parameter of its own where PyTorch ties it to ``first`` (one tensor under two names,
    metadata `tied`), and its values are not ``first``'s: the checkpoint holds the tensor once, under ``first``, so
    burn-store found nothing for ``name`` and kept its initialisation. ``a``/``b``: A's ``first`` and B's ``name``
    when both are held in full."""
    parsed = parse_name(name)
    tensor = parsed.rest if parsed is not None else name
    module, weight = first.rsplit(".", 1) if "." in first else ("", first)
    head = tensor.rsplit(".", 1)[0]
    evidence = (f"PyTorch ties {tensor} to {first} (one tensor under two names, metadata 'tied'; a checkpoint holds "
                f"it once, under {first}), and B's {tensor} is not that tensor")
    kind = "altered"
    if a is not None and b is not None and a.shape == b.shape:
        relative, correlation, _ = _relation(a.reshape(-1), b.reshape(-1))
        corr = "undefined" if correlation is None else f"{correlation:.2f}"
        evidence += f" (relative difference {relative:.3g}, correlation {corr})"
        if relative > UNRELATED_RELATIVE and (correlation is None or abs(correlation) < UNRELATED_CORRELATION):
            kind = "not_loaded"
            evidence += ": burn-store found no " + tensor + " in the checkpoint and kept its initialisation"
    fix = (f"tie it as PyTorch does (`tie_word_embeddings`): after loading, give {head} the embedding's weight, "
           f"`model.{head}.weight = Param::from_tensor(model.{module}.{weight}.val().transpose())` (burn's Linear "
           "weight is [d_model, vocab], its Embedding's [vocab, d_model]), or compute the head from the embedding "
           f"itself, `x.matmul(self.{module}.{weight}.val().transpose().unsqueeze())`; load the rest without "
           "allow_partial(true), so a tensor burn-store cannot match is an error")
    return LoadingFault(name, kind, evidence, fix)


def only_fault(name: str, side: str, renamed: str | None = None, shaped_like: str | None = None) -> LoadingFault:
    """A start tensor only one side's model holds; ``renamed``: the other side's tensor of the same values under
    another name; ``shaped_like``: the other side's only unmatched tensor of the same shape (other values)."""
    parsed = parse_name(name)
    what = "buffer" if parsed is not None and parsed.stage == "buffers" else "parameter"
    tensor = parsed.rest if parsed is not None else name
    if side == "a":
        evidence = f"nothing in the port holds the {what} {tensor}"
        if renamed is not None:
            evidence += f"; B holds the same values as {renamed}"
            fix = (f"name it {tensor} as PyTorch does (B calls it {renamed}): the port's module field or burn-store's "
                   "remapping (PytorchStore::with_key_remapping), and the recorder writes PyTorch's names")
        elif shaped_like is not None:
            evidence += (f"; B holds a tensor {shaped_like} of the same shape that A has not, with other values: the "
                         "same tensor named otherwise, which burn-store then could not load")
            fix = (f"name the port's field {tensor} as PyTorch does (B calls it {shaped_like}), or map the name with "
                   "burn-store's remapping (PytorchStore::with_key_remapping); and load without allow_partial(true), "
                   "so a tensor burn-store cannot match is an error, not a fresh initialisation")
        else:
            fix = (f"give the port's model PyTorch's {what} {tensor} (the layer it belongs to, with PyTorch's name), "
                   "so burn-store loads it from the checkpoint")
        return LoadingFault(name, "only_in_a", evidence, fix)
    evidence = f"the port holds a {what} {tensor} that PyTorch's model has not"
    if renamed is not None:
        evidence += f"; it holds the values of A's {renamed}"
        fix = f"name it {renamed} as PyTorch does (burn-store's remapping, and the recorder's name)"
    elif shaped_like is not None:
        evidence += f"; A's {shaped_like}, which B has not, has its shape: the same tensor named otherwise"
        fix = f"name it {shaped_like} as PyTorch does (the port's field, or burn-store's remapping), so it is loaded"
    else:
        fix = "build the port's model as PyTorch's (no extra layer), or record the tensor under PyTorch's name"
    return LoadingFault(name, "only_in_b", evidence, fix)
