"""What the report reads back from the traces: one tensor's distribution of differences, and the
float64 reference's loss per step. The one place after compare that opens traces again (both sides
and the reference, by the paths the comparison keeps); the diagnosis rules never do. Bounded in
memory: a tensor is read in chunks of its mapping."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from burnside.trace import open_trace, parse_name
from burnside.trace.dtypes import bf16_to_f32

#: log10 |A - B| bins: a quarter decade each, wide enough for any float64 difference.
EDGES = np.arange(-330.0, 310.25, 0.25)
#: Elements per chunk: 8 MiB of float64 scratch per side.
CHUNK = 1 << 20


@dataclass
class Histogram:
    """Counts of log10 |A - B| over one tensor's elements, plus the exact zeros and one-sided non-finites."""

    name: str
    n: int
    counts: np.ndarray  # per bin of EDGES
    zeros: int = 0
    nonfinite: int = 0

    def trimmed(self) -> tuple[np.ndarray, np.ndarray]:
        """The bin edges and counts from the first to the last non-empty bin."""
        filled = np.flatnonzero(self.counts)
        if filled.size == 0:
            return EDGES[:1], self.counts[:0]
        lo, hi = int(filled[0]), int(filled[-1]) + 1
        return EDGES[lo:hi + 1], self.counts[lo:hi]


def _floats(trace, name: str, start: int, stop: int) -> np.ndarray:
    flat = trace.array(name).reshape(-1)[start:stop]
    if trace.info(name).dtype == "BF16":
        flat = bf16_to_f32(flat)
    return np.asarray(flat, dtype=np.float64)


def difference_histogram(path_a: Path, path_b: Path, name: str) -> Histogram:
    """The distribution of |A - B| over tensor ``name`` of two traces, read chunk by chunk."""
    a, b = open_trace(path_a), open_trace(path_b)
    n = a.info(name).n
    histogram = Histogram(name, n, np.zeros(EDGES.size - 1, dtype=np.int64))
    for start in range(0, n, CHUNK):
        stop = min(n, start + CHUNK)
        x, y = _floats(a, name, start, stop), _floats(b, name, start, stop)
        finite_x, finite_y = np.isfinite(x), np.isfinite(y)
        histogram.nonfinite += int(np.count_nonzero(finite_x != finite_y))
        both = finite_x & finite_y
        diff = np.abs(x[both] - y[both])
        nonzero = diff[diff > 0]
        histogram.zeros += int(diff.size - nonzero.size)
        histogram.counts += np.histogram(np.log10(nonzero), bins=EDGES)[0]
    a.release(name)
    b.release(name)
    return histogram


def reference_losses(path: Path) -> dict[int, float]:
    """step -> the float64 reference's loss before that step."""
    trace = open_trace(path)
    losses = {}
    for name in trace.names:
        parsed = parse_name(name)
        if parsed is not None and parsed.stage == "loss":
            values = trace.values(name)
            if values.size == 1:
                losses[parsed.step] = float(values.reshape(-1)[0])
    return losses
