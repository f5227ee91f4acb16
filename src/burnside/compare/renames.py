"""The port's start tensors named as PyTorch's, from what the port loaded (`param_renames`).

A port written by someone else names its tensors its own way: residual blocks in an enum
(`layer1.0.Basic.conv1.weight`), fields renamed by the loader's `KeyRemapper` (`mha.query` for HF's
`attention.self.query`), burn's attention packed as PyTorch's `in_proj_weight` where the checkpoint
keeps separate projections. Such a port holds the checkpoint's tensors all the same; this module
names each of B's start tensors after the checkpoint tensor it holds, and `burnside.compare.aligned` has every
stage that names parameters (gradients, optimizer state, parameters after) follow. `Holders` says which of A's
tensors a tensor of B holds (a loading fault's evidence).
"""

from __future__ import annotations

import difflib
import re
from dataclasses import dataclass, field

import numpy as np
import xxhash

from burnside.trace import Trace, parse_name
from burnside.trace.statistics import Statistics

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


def _start_key(trace: Trace, name: str) -> tuple[tuple, bool]:
    """A start tensor's identity by its bytes (dtype, shape, xxh3-128: the key `_hash` gives its array, so that a
    tensor held in full and one held as statistics compare) and whether it is a constant (every element equal:
    read off the statistics as a largest magnitude equal to the mean's)."""
    stats = trace.statistics_of(name)
    constant = stats.n > 0 and stats.nonfinite == 0 and stats.max_abs == abs(stats.mean)
    return (stats.dtype, stats.shape, stats.xxh3), constant


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
            for path, full in start_names(self._a).items():
                key, constant = _start_key(self._a, full)
                if not constant:
                    self._by_hash.setdefault(key, []).append(path)
        parsed = parse_name(name)
        key = (b_value.dtype, b_value.shape, b_value.xxh3) if isinstance(b_value, Statistics) \
            else _hash(b_value, dtype)
        found = [p for p in self._by_hash.get(key, []) if parsed is None or p != parsed.rest]
        return found[0] if len(found) == 1 else None


def start_names(trace: Trace) -> dict[str, str]:
    """path -> full name of step 0's parameters and buffers."""
    out = {}
    for name in trace.held_names:
        parsed = parse_name(name)
        if parsed is not None and parsed.step == 0 and parsed.stage in ("params_before", "buffers") and parsed.rest:
            out.setdefault(parsed.rest, name)
    return out


def module_of(path: str) -> str:
    """The module path of a tensor path (`layer1.0.conv1` of `layer1.0.conv1.weight`; "" at the top)."""
    return path.rsplit(".", 1)[0] if "." in path else ""


def _leaf(path: str) -> str:
    return path.rsplit(".", 1)[-1]


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
    a_start, b_start = start_names(a), start_names(b)
    only_a = [p for p in a_start if p not in b_start]
    only_b = [p for p in b_start if p not in a_start]
    if not only_a or not only_b:
        return Renames()
    by_hash: dict[tuple, list[str]] = {}
    constant_a: set[str] = set()
    for path in only_a:
        key, constant = _start_key(a, a_start[path])
        by_hash.setdefault(key, []).append(path)
        if constant:
            constant_a.add(path)
    pieces = [piece for path in only_b for piece in _pieces(b, path, b_start[path], by_hash)]
    matching = _Matching(only_a)
    matching.by_bytes(pieces, by_hash, constant_a)
    matching.by_module(pieces)
    matching.by_order(pieces, by_hash)
    return matching.renames()


#: One of B's start tensors to name, or one slice of a packed one: (its path, (slice, slices) or None, its key).
_Piece = tuple[str, "tuple[int, int] | None", tuple]


def _pieces(b: Trace, path: str, name: str, by_hash: dict[tuple, list[str]]) -> list[_Piece]:
    """B's tensor at ``path`` (trace name ``name``) as one piece, or a packed one as its slices when each slice
    holds the bytes of one of A's tensors (held in full: statistics have no slices)."""
    key, _ = _start_key(b, name)
    if _PACKED.search(path) and name in b and len(key[1]) >= 1 and key not in by_hash:
        array = b.array(name)
        for count in (3, 4):
            if array.shape[0] % count == 0:
                keys = [_hash(p, key[0]) for p in np.split(array, count, axis=0)]
                if all(k in by_hash for k in keys):
                    return [(path, (i, count), k) for i, k in enumerate(keys)]
    return [(path, None, key)]


class _Matching:
    """A's names chosen for B's pieces, in three passes: unique bytes, the module, then the order."""

    def __init__(self, only_a: list[str]) -> None:
        self.only_a = only_a
        self.taken: set[str] = set()
        self.chosen: dict[tuple[str, tuple[int, int] | None], Renamed] = {}
        #: B's module -> A's, from the tensors named by their bytes
        self.module_map: dict[str, str] = {}

    def by_bytes(self, pieces: list[_Piece], by_hash: dict[tuple, list[str]], constant_a: set[str]) -> None:
        """1. unique, non-constant bytes."""
        for path, part, key in pieces:
            found = [p for p in by_hash.get(key, []) if p not in constant_a]
            if len(found) != 1:
                continue
            b_name = _role_name(path, part)
            vetoed = _contradicted(b_name, found[0], set(self.only_a))
            if vetoed is not None:
                # a loading fault (a loader's mapping that swaps query and key): B's tensor keeps the name
                # its own path gives it, so the comparison names what it holds instead
                if vetoed not in self.taken:
                    self._choose(path, part, vetoed, "name")
                    self.module_map.setdefault(module_of(b_name), module_of(vetoed))
                continue
            if found[0] in self.taken:
                continue
            self._choose(path, part, found[0], "bytes")
            self.module_map.setdefault(module_of(b_name), module_of(found[0]))

    def by_module(self, pieces: list[_Piece]) -> None:
        """2. the rest by the module their siblings place them in (a bias beside its weight, a fault by its name)."""
        only_a_set = set(self.only_a)
        for path, part, _ in pieces:
            if (path, part) in self.chosen:
                continue
            b_name = _role_name(path, part)
            module = self.module_map.get(module_of(b_name))
            if module is None:
                continue
            for leaf in _leaf_names(_leaf(b_name)):
                candidate = f"{module}.{leaf}" if module else leaf
                if candidate in only_a_set and candidate not in self.taken:
                    self._choose(path, part, candidate, "module")
                    break

    def by_order(self, pieces: list[_Piece], by_hash: dict[tuple, list[str]]) -> None:
        """3. the rest among A's tensors of the same bytes, by name, then in order."""
        for path, part, key in pieces:
            if (path, part) in self.chosen:
                continue
            found = [p for p in by_hash.get(key, []) if p not in self.taken]
            if not found:
                continue
            b_name = _role_name(path, part)
            canonical = ".".join(_leaf_names(s)[0] for s in b_name.split(".") if not _VARIANT.match(s))
            best = max(found, key=lambda p: (p == canonical, _similarity(b_name, p), -self.only_a.index(p)))
            if _similarity(b_name, best) == 0.0 and len(found) > 1:
                best = found[0]
            self._choose(path, part, best, "order")

    def _choose(self, path: str, part: tuple[int, int] | None, a_name: str, how: str) -> None:
        self.chosen[(path, part)] = Renamed(a_name, path, part, how)
        self.taken.add(a_name)

    def renames(self) -> Renames:
        """The choices by B's path; a packed tensor not every slice of which is named is left as it is."""
        renames = Renames()
        for (path, _), renamed in self.chosen.items():
            renames.by_b.setdefault(path, []).append(renamed)
        for path in list(renames.by_b):
            parts = renames.by_b[path]
            whole = [r for r in parts if r.part is None]
            if not whole and len(parts) != parts[0].part[1]:
                del renames.by_b[path]
        return renames


def _role_name(path: str, part: tuple[int, int] | None) -> str:
    """B's name for a tensor or a slice of a packed one (`attn.in_proj_weight` slice 0: `attn.query.weight`)."""
    if part is None:
        return path
    module, leaf = module_of(path), _leaf(path)
    if leaf.startswith("in_proj_") and part[1] == 3:
        kind = leaf.removeprefix("in_proj_")
        return f"{module}.{_QKV[part[0]]}.{kind}" if module else f"{_QKV[part[0]]}.{kind}"
    return f"{path}#{part[0]}"


def _leaf_names(leaf: str) -> tuple[str, ...]:
    return {"gamma": ("weight",), "beta": ("bias",)}.get(leaf, (leaf,))


def _contradicted(b_name: str, a_name: str, only_a: set[str]) -> str | None:
    """A's tensor B's name says it holds, where B holds the bytes of a sibling of that tensor (query and key
    swapped by a loader): None when the names do not contradict the bytes."""
    b_module, a_module = module_of(b_name), module_of(a_name)
    b_role, a_role = _leaf(b_module), _leaf(a_module)
    if b_role == a_role:
        return None
    role = next((r for r, names in _QKV_SYNONYMS.items() if b_role in names), None)
    if role is None:
        return None
    parent = module_of(a_module)
    for synonym in _QKV_SYNONYMS[role]:
        sibling = f"{parent}.{synonym}.{_leaf(a_name)}" if parent else f"{synonym}.{_leaf(a_name)}"
        if sibling in only_a and sibling != a_name:
            return sibling
    return None


def rename_rest(rest: str, renames: Renames) -> list[tuple[str, tuple[int, int] | None]]:
    """A's names for a tensor path of B (a parameter, or `{slot}.{param}` of optimizer state)."""
    found = renames.a_names(rest)
    if found:
        return [(r.a, r.part) for r in found]
    head, _, tail = rest.partition(".")
    found = renames.a_names(tail) if tail else []
    if found:
        return [(f"{head}.{r.a}", r.part) for r in found]
    return []
