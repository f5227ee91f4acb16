"""What the optimizer replays share (SGD, Adam and AdamW, RMSprop, Adagrad, Adafactor, Muon): the sampled read of
a tensor, a declared setting, the residual of a replay beyond float32 rounding, and the rows of a least-squares fit
gathered over parameters and steps."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from burnside.trace import Trace

#: Elements of each tensor the replay reads (the first ones, flat): an optimizer setting shows in
#: every element, and this keeps forensics memory-bounded and fast on multi-GB traces.
SAMPLE = 1 << 16
#: A replayed update (or state) further than this beyond float32 rounding (`beyond_rounding`), relative
#: to the tensor's update (state), is not the declared optimizer. Correct A1 ports stay below 2e-4 (burn's f32
#: Adam constants: 1.3e-5 in
#: exp_avg_sq; an SGD update's f32 rounding 6e-5); the smallest bug measured is 3e-2.
REPLAY_TOLERANCE = 1e-3
#: A least-squares fit whose residual exceeds this (relative to the data) explains nothing: its
#: settings are not reported (clipping or a double step fit no optimizer of the declared form).
FIT_TOLERANCE = 1e-3


#: Rows one fit keeps at most. Beyond, every other row kept is dropped and later parameters' rows are taken at the
#: doubled stride: a model of any size is fitted on an evenly spread sample of bounded size (a GPT-2's 148 parameters
#: made compare's private memory 1.9 GiB when every row was kept). Fits fed side by side (an x and a y) get the same
#: rows in the same order, so they keep the same ones.
MAX_ROWS = 1 << 15


@dataclass
class Rows:
    """Rows of one least-squares fit (or one side of it), gathered over parameters and steps (at most `MAX_ROWS`)."""

    parts: list[np.ndarray] = field(default_factory=list)
    stride: int = 1
    count: int = 0

    def add(self, rows: np.ndarray) -> None:
        """Append one parameter's rows (every `stride`-th, copied: a view would keep the whole array alive)."""
        if self.stride > 1:
            rows = np.ascontiguousarray(rows[::self.stride])
        self.parts.append(rows)
        self.count += len(rows)
        while self.count > MAX_ROWS:
            self.stride *= 2
            self.parts = [np.ascontiguousarray(part[::2]) for part in self.parts]
            self.count = sum(len(part) for part in self.parts)

    def __bool__(self) -> bool:
        return bool(self.parts)

    def all(self) -> np.ndarray | None:
        """Every row gathered, or None when none was."""
        return np.concatenate(self.parts) if self.parts else None


@dataclass
class StepRates:
    """The learning rate each step's updates show: per step, (the update's direction, how far the parameter moved
    against it) pairs, gathered over the parameters of one group, fitted through 0 one step at a time. A rate the
    loop changes between steps (a schedule, a decay written by hand) is seen at the step it acts; the fits over
    every step at once explain none of them."""

    rows: dict[int, Rows] = field(default_factory=dict)

    def add(self, k: int, direction: np.ndarray, moved: np.ndarray) -> None:
        """Step ``k`` of one parameter: ``moved = lr * direction`` for the rate ``lr`` it applied."""
        self.rows.setdefault(k, Rows()).add(np.stack([direction.ravel(), moved.ravel()], axis=1))

    def rates(self) -> dict[int, float]:
        """Step -> the learning rate its updates show, for each step whose updates one positive rate explains."""
        found: dict[int, float] = {}
        for k, rows in sorted(self.rows.items()):
            pairs = rows.all()
            if pairs is None:
                continue
            pairs = pairs[np.all(np.isfinite(pairs), axis=1)]
            x, y = pairs[:, 0], pairs[:, 1]
            if x.size and np.dot(x, x) > 0:
                lr = float(np.dot(x, y) / np.dot(x, x))
                if lr > 0 and explains(pairs[:, :1], y, np.array([lr])):
                    found[k] = lr
        return found


def sampled(trace: Trace, name: str) -> np.ndarray | None:
    """The first SAMPLE elements of tensor ``name``, flat, in float64; None when the trace lacks it."""
    if name not in trace:
        return None
    values = np.array(trace.values(name).reshape(-1)[:SAMPLE], dtype=np.float64)
    trace.release(name)
    return values


def number(config: dict, key: str, default: float) -> float:
    """A numeric setting of the declared optimizer, ``default`` when absent or not a number."""
    value = config.get(key, default)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def betas(config: dict) -> tuple[float, float]:
    """Adam's declared (beta_1, beta_2), PyTorch's default when not declared."""
    declared = config.get("betas") if isinstance(config.get("betas"), list) else [0.9, 0.999]
    b1, b2 = (float(b) for b in declared[:2])
    return b1, b2


def decoupled(name: str, config: dict) -> bool:
    """Whether weight decay is applied to the parameter rather than added to the gradient (AdamW)."""
    return name == "adamw" or config.get("weight_decay_kind") == "decoupled"


def relative(actual: np.ndarray, expected: np.ndarray, scale: np.ndarray) -> float:
    """max|actual - expected| relative to max|scale| (0 when both are 0, infinity when only the error is not)."""
    size = float(np.max(np.abs(scale))) if scale.size else 0.0
    err = float(np.max(np.abs(actual - expected))) if actual.size else 0.0
    if size == 0.0:
        return 0.0 if err == 0.0 else math.inf
    return err / size


def half_ulp(x: np.ndarray) -> np.ndarray:
    """Half a float32 ulp of each element of ``x`` (in float64): the most float32 rounding moves a value that size."""
    with np.errstate(over="ignore", invalid="ignore"):
        magnitude = np.abs(np.asarray(x, dtype=np.float64)).astype(np.float32)
    return np.spacing(magnitude).astype(np.float64) / 2


def beyond_rounding(actual: np.ndarray, expected: np.ndarray, scale: np.ndarray, rounding: np.ndarray) -> float:
    """Like `relative`, but each element's error counts only beyond ``rounding``, the float32 rounding of that
    element (of the recorded tensors and of the update's own arithmetic): a replay in float64 of float32 values
    is that far off a correct run wherever the update is as small as the tensor's rounding (a bias moved only by
    weight decay, a gradient of 1e-9), which relative to the tensor's update can be any size."""
    if not actual.size:
        return 0.0
    err = float(np.max(np.maximum(np.abs(actual - expected) - rounding, 0.0)))
    size = float(np.max(np.abs(scale))) if scale.size else 0.0
    if size == 0.0:
        return 0.0 if err == 0.0 else math.inf
    return err / size


def explains(x: np.ndarray, y: np.ndarray, coef: np.ndarray) -> bool:
    """Whether the fit ``x @ coef`` reproduces ``y`` within FIT_TOLERANCE of its size."""
    size = float(np.max(np.abs(y))) if y.size else 0.0
    return size > 0 and float(np.max(np.abs(x @ coef - y))) <= FIT_TOLERANCE * size


def standard_errors(x: np.ndarray, y: np.ndarray, coef: np.ndarray) -> np.ndarray:
    """The standard error of each coefficient of the least-squares fit ``x @ coef ~ y`` (from its residuals):
    a fitted value within a few of them of another is not told apart from it by these numbers."""
    n, k = x.shape
    if n <= k:
        return np.full(k, np.inf)
    resid = y - x @ coef
    try:
        cov = np.linalg.inv(x.T @ x) * float(np.dot(resid, resid)) / (n - k)
    except np.linalg.LinAlgError:
        return np.full(k, np.inf)
    return np.sqrt(np.abs(np.diag(cov)))


def finite(x: np.ndarray | None, y: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
    """The rows where ``x`` and ``y`` are finite: a NaN or an infinity (a diverged run, a broken port)
    is no evidence of a setting, and LAPACK's least squares fails on one."""
    if x is None or y is None:
        return x, y
    finite_x = np.isfinite(x)
    keep = np.isfinite(y) & (np.all(finite_x, axis=1) if x.ndim > 1 else finite_x)
    return x[keep], y[keep]
