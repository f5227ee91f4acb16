"""Judging two float32 runs by their distance to a float64 reference: noise or a real difference.

A tensor of side X is at distance d_X = max|X - R_X| from its reference R_X (the float64 run,
or the variant that models X's framework arithmetic, see `burnside.reference`). Side B is
noise when d_B <= NOISE_FACTOR * d_A + floor, where the floor is FLOOR_HALF_ULPS half-ulps of
float32 at the tensor's scale max|R|; the same for A. A side further than that is a real
difference. The constants are justified by measurements in docs/compare.md.

Every tensor is read one at a time and walked in chunks, like the comparison itself.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from burnside.errors import TraceError
from burnside.trace import Trace, open_trace, parse_name

#: A side within this many times the other side's own distance to the reference is noise.
NOISE_FACTOR = 32.0
#: The absolute floor, in float32 half-ulps (2^-24) of the tensor's largest reference value.
FLOOR_HALF_ULPS = 8.0
#: References (the float64 run and a variant) separate at a tensor once they differ by more than
#: this many float32 half-ulps of its scale: beyond any float32 run's rounding there.
SEPARATION_HALF_ULPS = 64.0
_HALF_ULP = 2.0**-24
_CHUNK = 1 << 17

#: What each variant models, for the report (see burnside.reference).
VARIANT_TITLES = {
    "burn-adam": ("burn's Adam/AdamW form their scalar constants in f32 (burn-optim 0.22.1 adam.rs/adamw.rs: "
                  "`1 - beta_2`, `1 - beta_2.powi(t)` and the bias corrections), PyTorch in double"),
    "burn-batchnorm": ("burn's BatchNorm updates running_var with the biased batch variance (divided by n), "
                       "PyTorch with the unbiased one (divided by n - 1), n the elements per channel "
                       "(burn-nn 0.22.1)"),
}
VARIANT_TITLES["burn-adam+burn-batchnorm"] = "; and ".join(VARIANT_TITLES[k] for k in ("burn-adam", "burn-batchnorm"))


@dataclass
class Reference:
    """An opened float64 reference trace and the variants its metadata names."""

    trace: Trace
    variants: dict[str, Trace] = field(default_factory=dict)
    #: traces `check_start` found this reference starts from (`check` checks before the port runs,
    #: compare again: the start's tensors are read once)
    starts: set[Path] = field(default_factory=set)

    @property
    def path(self) -> Path:
        """The reference trace's path."""
        return self.trace.path


def open_reference(path: str | Path) -> Reference:
    """Open a reference recorded by `burnside.reference.record_reference`, with its variants."""
    trace = open_trace(path)
    if trace.metadata.get("reference") != "float64":
        raise TraceError(f"{trace.path} is not a float64 reference trace; record one with "
                         "burnside.reference.record_reference (or `burnside run` without --no-reference)")
    variants = {}
    for key, value in trace.metadata.items():
        if key.startswith("variant.") and isinstance(value, str):
            variant_path = trace.path.with_name(value)
            if not variant_path.is_file():
                raise TraceError(f"{trace.path} names its variant {value}, which is not next to it; "
                                 "keep the reference's files together")
            variants[key.removeprefix("variant.")] = open_trace(variant_path)
    return Reference(trace, variants)


#: Elements per chunk when the reference's start is checked against a trace's.
_START_CHUNK = 1 << 20


def check_start(trace: Trace, reference: Reference) -> None:
    """Raise TraceError unless ``reference`` starts where ``trace`` does: every input and step 0's
    parameters equal, value for value, once widened to float64 (exact for float32 and float16).

    A reference recorded from another seed, other batches or a model already trained would judge
    both sides by a run they never made, and could pass a real bug as rounding noise."""
    if trace.path.resolve() in reference.starts:
        return
    ref = reference.trace
    if trace.metadata.get("framework") == "pytorch":
        _check_same_loop(trace, reference)
    for name in trace.names:
        parsed = parse_name(name)
        if parsed is None or not parsed.is_shared_start or name not in ref:
            continue
        if ref.info(name).shape != trace.info(name).shape:
            raise TraceError(f"{reference.path} does not start where {trace.path} does: {name} has shape "
                             f"{list(ref.info(name).shape)} there, {list(trace.info(name).shape)} in the trace; "
                             "record the reference from the same model and batches (burnside.reference."
                             "record_reference), or leave out --reference")
        x, r = trace.values(name).reshape(-1), ref.values(name).reshape(-1)
        differing, worst = 0, 0.0
        for start in range(0, x.size, _START_CHUNK):
            xs = np.asarray(x[start:start + _START_CHUNK], dtype=np.float64)
            rs = np.asarray(r[start:start + _START_CHUNK], dtype=np.float64)
            off = ~((xs == rs) | (np.isnan(xs) & np.isnan(rs)))
            if off.any():
                differing += int(np.count_nonzero(off))
                with np.errstate(invalid="ignore"):
                    worst = max(worst, float(np.nanmax(np.abs(xs[off] - rs[off]), initial=0.0)))
        trace.release(name)
        ref.release(name)
        if differing:
            raise TraceError(
                f"{reference.path} does not start where {trace.path} does: {name} differs in {differing} of "
                f"{x.size} elements (up to {worst:.3g}); record the reference from the same model, weights and "
                "batches as the trace, before training (burnside.reference.record_reference), or leave out "
                "--reference")
    if trace.metadata.get("framework") == "pytorch":
        _check_same_loss(trace, reference)
    reference.starts.add(trace.path.resolve())


#: What a reference must share with the PyTorch trace it judges, besides its start: the optimizer's
#: settings (a reference of lr 2e-3 judges a run of lr 1e-3 by a run it never made) and the loss.
_SAME_OPTIMIZER = ("name", "lr", "betas", "eps", "weight_decay", "weight_decay_kind", "momentum", "dampening",
                   "nesterov", "amsgrad", "clip_grad_norm", "lr_per_step")


def _check_same_loop(trace: Trace, reference: Reference) -> None:
    ref = reference.trace
    ours, theirs = trace.optimizer, ref.optimizer
    if isinstance(ours, dict) and isinstance(theirs, dict):
        for key in _SAME_OPTIMIZER:
            a, r = ours.get(key), theirs.get(key)
            if not same_setting(a, r):
                raise TraceError(
                    f"{reference.path} is not a reference of {trace.path}'s loop: its optimizer has {key} "
                    f"{_setting(r)}, the trace's {_setting(a)}; record the reference with the same optimizer settings "
                    "and arguments as the trace (burnside.reference.record_reference), or leave out --reference")
    loss_a, loss_r = trace.metadata.get("loss_fn"), ref.metadata.get("loss_fn")
    if isinstance(loss_a, str) and isinstance(loss_r, str) and loss_a != loss_r:
        raise TraceError(f"{reference.path} is not a reference of {trace.path}'s loop: its loss is {loss_r}, the "
                         f"trace's {loss_a}; record the reference with the same loss_fn, or leave out --reference")



def _check_same_loss(trace: Trace, reference: Reference) -> None:
    """The loss's options (label smoothing, class weights, a reduction) are not in the metadata; its first
    value is: from the same start (checked before this), float32 and float64 agree on it far better."""
    ref = reference.trace
    first = "step0.loss"
    if first in trace and first in ref and trace.info(first).n == 1 and ref.info(first).n == 1:
        ours, theirs = float(trace.values(first).reshape(-1)[0]), float(ref.values(first).reshape(-1)[0])
        # relative, with an absolute floor for a loss near zero, whose float32 value is mostly rounding
        if math.isfinite(ours) and math.isfinite(theirs) and abs(ours - theirs) > _SAME_LOSS * abs(theirs) + 1e-6:
            raise TraceError(
                f"{reference.path} is not a reference of {trace.path}'s loop: its first loss is {theirs:.6g}, the "
                f"trace's {ours:.6g} from the same start: another loss (label smoothing, class weights, reduction) or "
                "forward; record the reference with the trace's loss_fn and forward, or leave out --reference")


#: The relative gap between a trace's and its reference's first loss beyond which they are two losses: a
#: float32 forward from the same start is within ~1e-6 of the float64 one (A1: 1.4e-7 relative).
_SAME_LOSS = 1e-3


def same_setting(a: object, b: object, *, abs_tol: float = 0.0) -> bool:
    """Whether two optimizer settings from trace metadata agree: numbers to 1e-6 relative (a setting
    written through float32; ``abs_tol`` for values near 0), lists element by element, the rest equal."""
    if isinstance(a, (list, tuple)) and isinstance(b, (list, tuple)):
        return len(a) == len(b) and all(same_setting(x, y, abs_tol=abs_tol) for x, y in zip(a, b, strict=True))
    numbers = (int, float)
    if isinstance(a, numbers) and isinstance(b, numbers) and not isinstance(a, bool) and not isinstance(b, bool):
        return math.isclose(float(a), float(b), rel_tol=1e-6, abs_tol=abs_tol)
    return a == b


def _setting(value: object) -> str:
    return "none" if value is None else f"{value!r}"


@dataclass(frozen=True)
class RefStats:
    """One tensor's distances to the reference on both sides, and the verdict."""

    dist_a: float
    dist_b: float
    scale: float  # max|R|
    verdict: str  # "noise", "a" (A is off) or "b" (B is off)

    @property
    def noise(self) -> bool:
        """Both sides within rounding of their references."""
        return self.verdict == "noise"

    @property
    def floor(self) -> float:
        """The absolute floor at this tensor's scale."""
        return FLOOR_HALF_ULPS * _HALF_ULP * self.scale

    @property
    def ratio(self) -> float:
        """How many times further from the reference the off side is than the other side (plus floor)."""
        far, near = (self.dist_a, self.dist_b) if self.verdict == "a" else (self.dist_b, self.dist_a)
        return far / (near + self.floor) if near + self.floor > 0 else float("inf")

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"dist_a": self.dist_a, "dist_b": self.dist_b, "scale": self.scale, "verdict": self.verdict}


@dataclass
class ZeroGradient:
    """A parameter with elements whose gradient is zero up to rounding, judged from the reference."""

    param: str
    first_step: int
    count: int  # elements (over the steps so far) whose reference gradient is below rounding
    n: int

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"param": self.param, "first_step": self.first_step, "count": self.count, "n": self.n}


@dataclass
class FrameworkDifference:
    """A known numerical difference of one side's framework, detected from the numbers."""

    side: str  # "a" or "b"
    variant: str
    detected_at: str  # the first tensor where the references separate
    dist_variant: float  # the side's distance to the variant there
    dist_plain: float  # and to the plain float64 reference
    relative_offset: float  # median (variant - reference) / reference there
    effect: dict[str, float] = field(default_factory=dict)  # stage -> max|R - variant| over the run

    @property
    def title(self) -> str:
        """What the difference is."""
        return VARIANT_TITLES.get(self.variant, self.variant)

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"side": self.side, "variant": self.variant, "title": self.title, "detected_at": self.detected_at,
                "dist_variant": self.dist_variant, "dist_plain": self.dist_plain,
                "relative_offset": self.relative_offset, "effect": self.effect}


def max_distance(x: np.ndarray, r: np.ndarray, skip: np.ndarray | None = None) -> float:
    """max|x - r| in float64, chunk by chunk (NaN where either side is not finite), without ``skip``'s elements."""
    x, r = x.reshape(-1), r.reshape(-1)
    worst = 0.0
    for start in range(0, x.size, _CHUNK):
        d = np.abs(x[start:start + _CHUNK].astype(np.float64) - r[start:start + _CHUNK].astype(np.float64))
        if skip is not None:
            d = d[~skip[start:start + _CHUNK]]
        if d.size:
            m = float(np.max(d))
            if math.isnan(m):
                return m
            worst = max(worst, m)
    return worst


def max_abs(r: np.ndarray) -> float:
    """max|r|, chunk by chunk."""
    r = r.reshape(-1)
    return max((float(np.max(np.abs(r[s:s + _CHUNK]))) for s in range(0, r.size, _CHUNK)), default=0.0)


def verdict(dist_a: float, dist_b: float, scale: float) -> str:
    """"noise" when each side is within NOISE_FACTOR of the other's distance plus the floor; else the side off."""
    floor = FLOOR_HALF_ULPS * _HALF_ULP * scale
    if math.isnan(dist_a) or math.isnan(dist_b):  # a non-finite value on some side
        return "b" if math.isnan(dist_b) else "a"
    if dist_b > NOISE_FACTOR * dist_a + floor:
        return "b"
    if dist_a > NOISE_FACTOR * dist_b + floor:
        return "a"
    return "noise"


class Judge:
    """Walks the compared tensors in pipeline order, choosing each side's reference as it goes.

    Until the float64 run and a variant separate (beyond float32 rounding), both sides are
    measured against the float64 run. At the first tensor where they separate, each side takes
    the one it is closer to; a side closer to a variant is computing that framework difference.
    """

    def __init__(self, reference: Reference, *, adaptive: bool = False) -> None:
        self.reference = reference
        self.adaptive = adaptive  # an Adam-family optimizer: it scales gradient noise up to lr-sized steps
        self.chosen: dict[str, str | None] = {"a": None, "b": None}
        self.decided = not reference.variants
        self.differences: list[FrameworkDifference] = []
        self._effect: dict[str, dict[str, float]] = {name: {} for name in reference.variants}
        #: param -> its elements whose reference gradient was below rounding at some step so far
        self.zero_masks: dict[str, np.ndarray] = {}
        self.zero_gradients: dict[str, ZeroGradient] = {}
        self._grad_scale: dict[int, float] = {}  # step -> largest reference gradient so far

    def judge(self, name: str, stage: str | None, a: np.ndarray, b: np.ndarray, *, step: int = 0,
              param: str | None = None) -> RefStats | None:
        """The verdict for one tensor, or None when the reference does not hold it (or not in that shape).

        Elements of ``param`` whose reference gradient is zero up to rounding (FLOOR_HALF_ULPS of
        the gradient's scale) are left out of this and every later tensor of that parameter: each
        side's gradient there is its own rounding noise, which Adam scales up to lr-sized steps.
        """
        ref = self.reference.trace
        if name not in ref or ref.info(name).shape != tuple(a.shape) or a.dtype.kind != "f":
            return None
        r = ref.array(name)
        scale = max_abs(r)
        if stage == "grads" and param is not None and self.adaptive:
            # a gradient that is zero in exact arithmetic has no scale of its own (the float64 run's
            # is ~1e-17): its rounding is judged at the scale of the step's other gradients
            self._grad_scale[step] = max(self._grad_scale.get(step, 0.0), scale)
            self._note_zero_gradient(param, step, r, self._grad_scale[step], a, b)
        skip = self.zero_masks.get(param) if param is not None else None
        if skip is not None and skip.size != r.size:
            skip = None
        variants = {}
        for vname, vtrace in self.reference.variants.items():
            if name in vtrace and vtrace.info(name).shape == tuple(a.shape):
                variants[vname] = vtrace.array(name)
                sep = max_distance(r, variants[vname])
                if stage is not None and not math.isnan(sep):
                    effect = self._effect[vname]
                    effect[stage] = max(effect.get(stage, 0.0), sep)
                if not self.decided and sep > SEPARATION_HALF_ULPS * _HALF_ULP * scale:
                    self._decide(name, r, vname, variants[vname], a, b)
        dists = {}
        for side, x in (("a", a), ("b", b)):
            chosen = self.chosen[side]
            dists[side] = max_distance(x, variants.get(chosen, r), skip)
        ref.release(name)
        for vtrace in self.reference.variants.values():
            if name in vtrace:
                vtrace.release(name)
        return RefStats(dists["a"], dists["b"], scale, verdict(dists["a"], dists["b"], scale))

    def _note_zero_gradient(self, param: str, step: int, r: np.ndarray, scale: float, a: np.ndarray,
                            b: np.ndarray) -> None:
        # below rounding in the reference, not exactly zero on both sides (a dead ReLU's exact zero is
        # not noise: no optimizer moves it), and each side's value itself of rounding size: a side whose
        # gradient there is real (a GELU where the model has a ReLU) computes something else, not noise
        flat, fa, fb = r.reshape(-1), a.reshape(-1), b.reshape(-1)
        floor = FLOOR_HALF_ULPS * _HALF_ULP * scale
        noise = NOISE_FACTOR * floor
        chunks = [(np.abs(flat[s:s + _CHUNK]) <= floor) & ((fa[s:s + _CHUNK] != 0) | (fb[s:s + _CHUNK] != 0))
                  & (np.abs(fa[s:s + _CHUNK]) <= noise) & (np.abs(fb[s:s + _CHUNK]) <= noise)
                  for s in range(0, flat.size, _CHUNK)]
        zero = np.concatenate(chunks) if chunks else np.zeros(0, dtype=bool)
        if scale == 0.0 or not zero.any():
            return
        mask = self.zero_masks.get(param)
        self.zero_masks[param] = zero if mask is None or mask.size != zero.size else mask | zero
        found = self.zero_gradients.get(param)
        count = int(np.count_nonzero(self.zero_masks[param]))
        self.zero_gradients[param] = ZeroGradient(param, found.first_step if found else step, count, zero.size)

    def _decide(self, name: str, r: np.ndarray, vname: str, v: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
        self.decided = True
        # the offset from the first _CHUNK elements: a constant relative offset shows in any of them
        rr = r.reshape(-1)[:_CHUNK].astype(np.float64)
        vv = v.reshape(-1)[:_CHUNK].astype(np.float64)
        nonzero = rr != 0
        offset = float(np.median((vv[nonzero] - rr[nonzero]) / rr[nonzero])) if nonzero.any() else 0.0
        for side, x in (("a", a), ("b", b)):
            plain, variant = max_distance(x, r), max_distance(x, v)
            if variant * 8 < plain:  # an order of magnitude closer: measured 77x at A1's step0.optim.exp_avg_sq
                self.chosen[side] = vname
                self.differences.append(FrameworkDifference(side, vname, name, variant, plain, offset,
                                                            self._effect[vname]))
