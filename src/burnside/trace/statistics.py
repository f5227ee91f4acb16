"""A tensor recorded as statistics only (trace format version 3): what both recorders compute and what compare
judges from them.

A trace of a large model need not hold every tensor of every step: a tensor may be recorded as its statistics
(metadata ``statistics``, docs/trace-format.md "Version 3: statistics"), computed over its values in float64:
the mean, the L2 norm, the largest magnitude, the count of non-finite values, and the 128-bit xxh3 hash of its
bytes as the file would store them (little-endian, row-major). Equal hashes (with equal dtype and shape) are
bit-identical tensors. Different statistics bound how far apart two tensors are: each of
``|max|a| - max|b||``, ``|mean a - mean b|`` and ``|‖a‖ - ‖b‖| / sqrt(n)`` is at most ``max|a - b|``
(triangle inequalities), so the largest of them (`lower_bound`) proves a difference beyond a tolerance; it never
proves two tensors within one.

The hash is xxh3-128 (the `xxhash` package; the burn recorder's `xxhash-rust` crate computes the same digest):
``xxh3_128_hexdigest`` of the bytes, 32 lower-case hex digits.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np
import xxhash

from burnside.errors import TraceError
from burnside.trace.dtypes import bf16_to_f32

#: Elements per chunk: statistics of a tensor of any size in bounded memory.
CHUNK = 1 << 20

_FIELDS = ("dtype", "shape", "mean", "norm", "max_abs", "nonfinite", "xxh3")


@dataclass(frozen=True)
class Statistics:
    """One tensor's statistics (no data)."""

    dtype: str  # safetensors dtype name, as the tensor would be stored
    shape: tuple[int, ...]
    mean: float  # NaN when a value is not finite
    norm: float  # sqrt(sum x^2), float64; NaN when a value is not finite
    max_abs: float  # NaN when a value is NaN
    nonfinite: int  # values that are NaN or infinite
    xxh3: str  # xxh3-128 of the stored bytes, 32 hex digits

    @property
    def n(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)

    def same_bits(self, other: Statistics) -> bool:
        """Bit-identical: same dtype, shape and hash of the bytes."""
        return self.dtype == other.dtype and self.shape == other.shape and self.xxh3 == other.xxh3

    def to_json(self) -> dict:
        """The metadata form (non-finite floats as the strings "nan", "inf", "-inf")."""
        return {"dtype": self.dtype, "shape": list(self.shape), "mean": _number_out(self.mean),
                "norm": _number_out(self.norm), "max_abs": _number_out(self.max_abs), "nonfinite": self.nonfinite,
                "xxh3": self.xxh3}

    @classmethod
    def from_json(cls, name: str, value: object, where: str) -> Statistics:
        """Read one entry of metadata ``statistics``; TraceError (one line, naming ``name`` and ``where``) if it
        is not one."""
        def bad(why: str) -> TraceError:
            return TraceError(f"{where}: corrupt trace (statistics of {name}: {why}); re-record it")

        if not isinstance(value, Mapping) or set(value) != set(_FIELDS):
            raise bad(f"expected an object with exactly {', '.join(_FIELDS)}")
        shape = value["shape"]
        if not isinstance(shape, list) or not all(isinstance(d, int) and not isinstance(d, bool) and d >= 0
                                                  for d in shape):
            raise bad("shape is not a list of sizes")
        xxh3 = value["xxh3"]
        if not isinstance(xxh3, str) or len(xxh3) != 32 or any(c not in "0123456789abcdef" for c in xxh3):
            raise bad("xxh3 is not 32 lower-case hex digits")
        nonfinite = value["nonfinite"]
        if not isinstance(nonfinite, int) or isinstance(nonfinite, bool) or not 0 <= nonfinite <= math.prod(shape):
            raise bad("nonfinite is not a count of the tensor's elements")
        if not isinstance(value["dtype"], str):
            raise bad("dtype is not a name")
        try:
            numbers = [_number_in(value[k]) for k in ("mean", "norm", "max_abs")]
        except ValueError:
            raise bad("mean, norm and max_abs must be numbers (or \"nan\", \"inf\", \"-inf\")") from None
        return cls(value["dtype"], tuple(shape), *numbers, nonfinite, xxh3)


def statistics_of(array: np.ndarray, dtype: str) -> Statistics:
    """The statistics of ``array`` stored as safetensors ``dtype`` (``BF16``: raw uint16 bits), in chunks."""
    flat = np.ascontiguousarray(array).reshape(-1)
    digest = xxhash.xxh3_128()
    total, squares, peak, nonfinite = 0.0, 0.0, 0.0, 0
    for start in range(0, flat.size, CHUNK):
        chunk = flat[start:start + CHUNK]
        digest.update(memoryview(chunk.astype(chunk.dtype.newbyteorder("<"), copy=False)))  # the bytes, no copy
        values = bf16_to_f32(chunk) if dtype == "BF16" else chunk
        wide = values.astype(np.float64)
        total += float(wide.sum())
        squares += float(np.einsum("i,i->", wide, wide))  # one pass, no temporary (and no BLAS threads)
        if values.size:
            # exact in the stored dtype; NaN when a value is NaN, and then it stays NaN
            largest = float(max(values.max(), -values.min())) if values.dtype.kind == "f" else float(
                np.abs(wide).max())
            peak = largest if math.isnan(largest) or math.isnan(peak) else max(peak, largest)
        if not (math.isfinite(total) and math.isfinite(squares)):
            # a finite sum of squares in float64 (each square of a finite float32 below 1.2e77) is every value
            # finite: count only where it is not
            nonfinite += int(values.size - np.count_nonzero(np.isfinite(values)))
    n = flat.size
    mean = total / n if n else 0.0
    norm = math.sqrt(squares) if math.isfinite(squares) else float("nan")
    if nonfinite:
        mean, norm = float("nan"), float("nan")
    return Statistics(dtype, tuple(int(d) for d in array.shape), mean, norm, peak, nonfinite, digest.hexdigest())


def lower_bound(a: Statistics, b: Statistics) -> float:
    """A lower bound of max|a - b| over the elements: 0 for bit-identical tensors, inf when only one holds
    non-finite values or their counts differ, NaN when both hold some (nothing can be said)."""
    if a.same_bits(b):
        return 0.0
    if a.nonfinite or b.nonfinite:
        return float("nan") if a.nonfinite == b.nonfinite else float("inf")
    n = max(a.n, 1)
    return max(abs(a.max_abs - b.max_abs), abs(a.mean - b.mean), abs(a.norm - b.norm) / math.sqrt(n))


def _number_out(value: float) -> float | str:
    if math.isfinite(value):
        return value
    return "nan" if math.isnan(value) else ("inf" if value > 0 else "-inf")


def _number_in(value: object) -> float:
    if isinstance(value, bool):
        raise ValueError
    if isinstance(value, (int, float)):
        return float(value)
    if value in ("nan", "inf", "-inf"):
        return float(value)
    raise ValueError
