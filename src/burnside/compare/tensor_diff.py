"""Element-wise comparison of two arrays: absolute error, ULP distance, non-finite handling.

The arrays may be memory-mapped and larger than memory: they are walked in chunks,
two chunks at a time on two threads (numpy releases the GIL), and only chunks whose
bits differ are examined further.
"""

from __future__ import annotations

import os
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np

from burnside.compare.tolerance import Tolerance
from burnside.trace.dtypes import FLOATS

CHUNK = 1 << 19  # elements per chunk: keeps temporaries ~ 30 MiB per thread
_WORKERS = min(2, os.cpu_count() or 1)
_pool: ThreadPoolExecutor | None = None

# dtype -> (signed integer view of the bits, wider integer for distances, minimum of the view)
_BITS = {
    "F64": (np.int64, np.int64, np.iinfo(np.int64).min),
    "F32": (np.int32, np.int64, np.iinfo(np.int32).min),
    "F16": (np.int16, np.int32, np.iinfo(np.int16).min),
    "BF16": (np.int16, np.int32, np.iinfo(np.int16).min),
}


@dataclass(frozen=True)
class ElementStats:
    """What the comparison of two same-shaped tensors found."""

    n: int
    differing: int  # elements whose bits differ (both-NaN counts as equal)
    max_abs: float
    max_ulps: int | None  # None for integer/bool tensors
    worst_index: int | None  # flat index of the worst element, None if identical
    out_of_tol: int
    nonfinite_a_only: int
    nonfinite_b_only: int

    @property
    def identical(self) -> bool:
        """Bit-identical (NaNs at the same places count as equal)."""
        return self.differing == 0


@dataclass
class _Partial:
    differing: int = 0
    max_abs: float = 0.0
    max_ulps: int = 0
    worst: int | None = None
    out: int = 0
    nf_a: int = 0
    nf_b: int = 0

    def merge(self, other: _Partial) -> None:
        self.differing += other.differing
        self.out += other.out
        self.nf_a += other.nf_a
        self.nf_b += other.nf_b
        self.max_ulps = max(self.max_ulps, other.max_ulps)
        if other.worst is not None and (self.worst is None or other.max_abs > self.max_abs):
            self.max_abs, self.worst = other.max_abs, other.worst


def diff_arrays(a: np.ndarray, b: np.ndarray, dtype: str, tol: Tolerance) -> ElementStats:
    """Compare two arrays of the same shape and safetensors dtype (BF16 as raw uint16 bits)."""
    a = a.reshape(-1)
    b = b.reshape(-1)
    n = a.size
    kernel = _float_chunk if dtype in FLOATS else _exact_chunk
    starts = range(0, n, CHUNK)
    total = _Partial()
    if n <= 2 * CHUNK or _WORKERS < 2:
        for start in starts:
            total.merge(kernel(a[start:start + CHUNK], b[start:start + CHUNK], dtype, tol, start))
    else:
        for part in _executor().map(lambda s: kernel(a[s:s + CHUNK], b[s:s + CHUNK], dtype, tol, s), starts):
            total.merge(part)
    return ElementStats(
        n=n,
        differing=total.differing,
        max_abs=total.max_abs,
        max_ulps=total.max_ulps if dtype in FLOATS else None,
        worst_index=total.worst,
        out_of_tol=total.out,
        nonfinite_a_only=total.nf_a,
        nonfinite_b_only=total.nf_b,
    )


def _executor() -> ThreadPoolExecutor:
    global _pool
    if _pool is None:
        _pool = ThreadPoolExecutor(max_workers=_WORKERS, thread_name_prefix="burnside-compare")
    return _pool


def _exact_chunk(a: np.ndarray, b: np.ndarray, dtype: str, tol: Tolerance, offset: int) -> _Partial:
    idx = np.flatnonzero(a != b)
    if idx.size == 0:
        return _Partial()
    diff = np.abs(a[idx].astype(np.float64) - b[idx].astype(np.float64))
    worst = int(np.argmax(diff))
    return _Partial(differing=idx.size, max_abs=float(diff[worst]), worst=offset + int(idx[worst]), out=idx.size)


def _float_chunk(a: np.ndarray, b: np.ndarray, dtype: str, tol: Tolerance, offset: int) -> _Partial:
    view, wide, minimum = _BITS[dtype]
    ia = a.view(view)
    ib = b.view(view)
    neq = ia != ib
    idx = np.flatnonzero(neq)
    if idx.size == 0:
        return _Partial()
    ia, ib = ia[idx], ib[idx]
    af = ia.view(a.dtype).astype(np.float64) if dtype != "BF16" else _bf16_values(ia)
    bf = ib.view(b.dtype).astype(np.float64) if dtype != "BF16" else _bf16_values(ib)
    diff = np.abs(af - bf)
    finite = np.isfinite(diff)
    if finite.all():
        return _finite_stats(af, bf, diff, ia, ib, wide, minimum, idx, tol, offset, idx.size)
    # Slow path: some element is NaN or infinite on at least one side.
    nan_a, nan_b = np.isnan(af), np.isnan(bf)
    fin_a, fin_b = np.isfinite(af), np.isfinite(bf)
    both_nan = nan_a & nan_b
    nf_a = int(np.count_nonzero(~fin_a & fin_b))
    nf_b = int(np.count_nonzero(fin_a & ~fin_b))
    clash = int(np.count_nonzero(~fin_a & ~fin_b & ~both_nan & (af != bf)))  # +inf vs -inf, NaN vs inf
    keep = fin_a & fin_b
    part = _Partial()
    if keep.any():
        sel = np.flatnonzero(keep)
        part = _finite_stats(af[sel], bf[sel], diff[sel], ia[sel], ib[sel], wide, minimum, idx[sel], tol, offset, 0)
    part.differing = int(idx.size - np.count_nonzero(both_nan))
    part.out += nf_a + nf_b + clash
    part.nf_a, part.nf_b = nf_a, nf_b
    if part.worst is None and part.differing:
        bad = np.flatnonzero(~keep & ~both_nan)
        part.max_abs, part.worst = float("inf"), offset + int(idx[bad[0]])
    return part


def _finite_stats(af, bf, diff, ia, ib, wide, minimum, idx, tol: Tolerance, offset: int, differing: int) -> _Partial:
    ulps = _ulp_distance(ia, ib, wide, minimum)
    bound = tol.atol + tol.rtol * np.abs(bf) if tol.rtol else tol.atol
    bad = diff > bound
    if tol.ulps is not None:
        bad &= ulps > tol.ulps
    worst = int(np.argmax(diff))
    return _Partial(
        differing=differing,
        max_abs=float(diff[worst]),
        max_ulps=int(ulps.max()),
        worst=offset + int(idx[worst]),
        out=int(np.count_nonzero(bad)),
    )


def _ulp_distance(ia: np.ndarray, ib: np.ndarray, wide, minimum: int) -> np.ndarray:
    """Distance in representable values: bits mapped to a monotone integer line (-0 == +0)."""
    ka = ia.astype(wide)
    kb = ib.astype(wide)
    ka = np.where(ka < 0, minimum - ka, ka)
    kb = np.where(kb < 0, minimum - kb, kb)
    if ia.dtype == np.int64:
        # f64: the difference of two keys can exceed int64, but never uint64: subtract modulo 2**64.
        d = ka.view(np.uint64) - kb.view(np.uint64)
        return np.where(ka >= kb, d, np.uint64(0) - d)
    return np.abs(ka - kb)


def _bf16_values(bits: np.ndarray) -> np.ndarray:
    return (bits.view(np.uint16).astype(np.uint32) << 16).view(np.float32).astype(np.float64)
