"""What an inference port's outputs are judged by, beside the element-wise tolerance: relative error,
cosine similarity and, for a classifier's [batch, classes] output, top-1 agreement.

Computed for a forward trace's `outputs.*` tensors in compare's one pass, on the arrays it has
mapped, in float64 chunk by chunk (a multi-GB output never sits in memory twice).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from burnside.compare.rounding import CHUNK

#: Rows of a [batch, classes] output taken per chunk for the argmax.
_ROW_ELEMENTS = CHUNK


@dataclass(frozen=True)
class OutputMetrics:
    """One output tensor's agreement as a whole."""

    relative_error: float  # ||B - A|| / ||A|| (inf when A is all zero and B is not, 0 when both are)
    cosine: float  # A . B / (||A|| ||B||); 1 when both are all zero, NaN when only one is
    top1: float | None = None  # share of rows whose argmax agrees ([batch, classes] outputs), else None
    rows: int = 0  # rows the top-1 agreement counts over
    top1_agree: int = 0
    #: the argmax of the last row on each side (A's, B's): the token a language model's step chooses
    last: tuple[int, int] | None = None

    def describe(self) -> str:
        """`rel=1.2e-07 cos=1.0000000 top1=100% (64/64)`, as the table prints it."""
        text = f"rel={self.relative_error:.2e} cos={self.cosine:.7f}"
        if self.top1 is not None:
            text += f" top1={self.top1:.1%} ({self.top1_agree}/{self.rows})"
        return text

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"relative_error": self.relative_error, "cosine": self.cosine, "top1_agreement": self.top1,
                "top1_rows": self.rows if self.top1 is not None else None,
                "top1_agree": self.top1_agree if self.top1 is not None else None}


def _work(x: np.ndarray, dtype: str) -> np.ndarray:
    if dtype == "BF16":
        return (np.ascontiguousarray(x).view(np.uint16).astype(np.uint32) << 16).view(np.float32)
    return x


def output_metrics(a: np.ndarray, b: np.ndarray, dtype: str) -> OutputMetrics:
    """The metrics of one output of the same shape on both sides (a float dtype)."""
    a, b = _work(a, dtype), _work(b, dtype)
    fa, fb = a.reshape(-1), b.reshape(-1)
    saa = sbb = sab = sdd = 0.0
    with np.errstate(all="ignore"):
        for s in range(0, fa.size, CHUNK):
            x = fa[s:s + CHUNK].astype(np.float64)
            y = fb[s:s + CHUNK].astype(np.float64)
            saa += float(x @ x)
            sbb += float(y @ y)
            sab += float(x @ y)
            d = y - x
            sdd += float(d @ d)
    norm_a, norm_b = math.sqrt(saa), math.sqrt(sbb)
    if math.isnan(sdd) or math.isnan(saa):
        relative = math.nan
    elif norm_a > 0:
        relative = math.sqrt(sdd) / norm_a
    else:
        relative = 0.0 if sdd == 0 else math.inf
    if norm_a > 0 and norm_b > 0:
        cosine = sab / (norm_a * norm_b)
    else:
        cosine = 1.0 if norm_a == 0 and norm_b == 0 else math.nan
    top1, rows, agree, last = None, 0, 0, None
    if a.ndim == 2 and a.shape[1] >= 2 and a.shape[0] >= 1:
        rows = a.shape[0]
        step = max(1, _ROW_ELEMENTS // a.shape[1])
        for s in range(0, rows, step):
            agree += int(np.count_nonzero(np.argmax(a[s:s + step], axis=1) == np.argmax(b[s:s + step], axis=1)))
        top1 = agree / rows
    if a.ndim >= 2 and a.shape[-1] >= 2 and a.size:
        # the last row's argmax on each side: the token a language model's step ([batch, tokens, vocabulary]) chooses
        ra, rb = a.reshape(-1, a.shape[-1]), b.reshape(-1, b.shape[-1])
        last = (int(np.argmax(ra[-1])), int(np.argmax(rb[-1])))
    return OutputMetrics(relative, cosine, top1, rows, agree, last)
