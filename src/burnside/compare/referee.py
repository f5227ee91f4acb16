"""Judging two float32 runs by their distance to a float64 reference: noise or a real difference.

A tensor of side X is at distance d_X = max|X - R_X| from its reference R_X (the float64 run,
or the variant that models X's framework arithmetic, see `burnside.reference`). Side B is
noise when d_B <= NOISE_FACTOR * d_A + floor, where the floor is FLOOR_HALF_ULPS half-ulps of
float32 at the tensor's scale max|R|; the same for A. A side further than that is a real
difference. The constants are justified by measurements in docs/compare.md.

Every tensor is read one at a time and walked in chunks, like the comparison itself. Opening the
reference is `reference_file`, checking it may judge a trace `start_checks`, the gradient elements
left out of the verdict `zero_gradients`.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from burnside.compare.reference_file import Reference
from burnside.compare.rounding import CHUNK, HALF_ULP, NOISE_FACTOR, sum_half_ulps
from burnside.compare.zero_gradients import ZeroGradients

#: References (the float64 run and a variant) separate at a tensor once they differ by more than
#: this many float32 half-ulps of its scale: beyond any float32 run's rounding there.
SEPARATIONHALF_ULPS = 64.0

#: What each variant models, for the report (see burnside.reference).
VARIANT_TITLES = {
    "burn-adam": ("burn's Adam/AdamW form their scalar constants in f32 (burn-optim 0.22.1 adam.rs/adamw.rs: "
                  "`1 - beta_2`, `1 - beta_2.powi(t)` and the bias corrections), PyTorch in double"),
    "burn-batchnorm": ("burn's BatchNorm updates running_var with the biased batch variance (divided by n), "
                       "PyTorch with the unbiased one (divided by n - 1), n the elements per channel "
                       "(burn-nn 0.22.1)"),
    "burn-muon": ("burn's Muon runs its Newton-Schulz iteration in the parameters' dtype (burn-optim 0.22.1 muon.rs), "
                  "PyTorch's in bfloat16; the iteration does not converge, so bfloat16's rounding stays in the update"),
}
VARIANT_TITLES["burn-adam+burn-batchnorm"] = "; and ".join(VARIANT_TITLES[k] for k in ("burn-adam", "burn-batchnorm"))


@dataclass(frozen=True)
class RefStats:
    """One tensor's distances to the reference on both sides, and the verdict."""

    dist_a: float
    dist_b: float
    scale: float  # max|R|
    verdict: str  # "noise", "a" (A is off) or "b" (B is off)
    #: set when a distance within the noise band is a real difference all the same, and why: the layer's own
    #: settings, measured from its input and output on each side, differ (`burnside.compare.overruled_noise`)
    overruled: str = ""
    #: the float32 terms each element sums (`summed_terms`): its floor is `sum_half_ulps` of them
    terms: int = 1

    @property
    def noise(self) -> bool:
        """Both sides within rounding of their references."""
        return self.verdict == "noise"

    @property
    def floor(self) -> float:
        """The absolute floor at this tensor's scale (and of a sum of its terms)."""
        return sum_half_ulps(self.terms) * HALF_ULP * self.scale

    @property
    def ratio(self) -> float:
        """How many times further from the reference the off side is than the other side: the ratio of the
        two distances printed beside it (inf when the other side is exactly on its reference)."""
        far, near = (self.dist_a, self.dist_b) if self.verdict == "a" else (self.dist_b, self.dist_a)
        return far / near if near > 0 else float("inf")

    @property
    def band(self) -> float:
        """The noise band the off side is beyond: NOISE_FACTOR times the other side's distance plus the floor."""
        near = self.dist_b if self.verdict == "a" else self.dist_a
        return NOISE_FACTOR * near + self.floor

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"dist_a": self.dist_a, "dist_b": self.dist_b, "scale": self.scale, "verdict": self.verdict,
                **({"overruled": self.overruled} if self.overruled else {}),
                **({"terms": self.terms} if self.terms > 1 else {})}


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


def max_distance(x: np.ndarray, r: np.ndarray, skip=None) -> float:
    """max|x - r| in float64, chunk by chunk (NaN where either side is not finite), without ``skip``'s elements."""
    x, r = x.reshape(-1), r.reshape(-1)
    worst = 0.0
    for start in range(0, x.size, CHUNK):
        d = np.abs(x[start:start + CHUNK].astype(np.float64) - r[start:start + CHUNK].astype(np.float64))
        if skip is not None:
            d = d[~skip[start:start + CHUNK]]
        if d.size:
            m = float(np.max(d))
            if math.isnan(m):
                return m
            worst = max(worst, m)
    return worst


def max_abs(r: np.ndarray) -> float:
    """max|r|, chunk by chunk."""
    r = r.reshape(-1)
    return max((float(np.max(np.abs(r[s:s + CHUNK]))) for s in range(0, r.size, CHUNK)), default=0.0)


def verdict(dist_a: float, dist_b: float, scale: float, terms: int = 1) -> str:
    """"noise" when each side is within NOISE_FACTOR of the other's distance plus the floor (of a sum of ``terms``
    terms); else the side off."""
    floor = sum_half_ulps(terms) * HALF_ULP * scale
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
        #: gradient elements zero up to rounding in the reference, left out of the verdict (Adam-family only)
        self.zero_gradients = ZeroGradients()

    def judge(self, name: str, stage: str | None, a: np.ndarray, b: np.ndarray, *, step: int = 0,
              param: str | None = None, terms: int = 1) -> RefStats | None:
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
            self.zero_gradients.note(param, step, r, scale, a, b)
        skip = self.zero_gradients.mask(param, r.size) if param is not None else None
        variants = {}
        for vname, vtrace in self.reference.variants.items():
            if name in vtrace and vtrace.info(name).shape == tuple(a.shape):
                variants[vname] = vtrace.array(name)
                sep = max_distance(r, variants[vname])
                if stage is not None and not math.isnan(sep):
                    effect = self._effect[vname]
                    effect[stage] = max(effect.get(stage, 0.0), sep)
                if not self.decided and sep > SEPARATIONHALF_ULPS * HALF_ULP * scale:
                    self._decide(name, r, vname, variants[vname], a, b)
        dists = {}
        for side, x in (("a", a), ("b", b)):
            chosen = self.chosen[side]
            dists[side] = max_distance(x, variants.get(chosen, r), skip)
        ref.release(name)
        for vtrace in self.reference.variants.values():
            if name in vtrace:
                vtrace.release(name)
        return RefStats(dists["a"], dists["b"], scale, verdict(dists["a"], dists["b"], scale, terms), terms=terms)

    def _decide(self, name: str, r: np.ndarray, vname: str, v: np.ndarray, a: np.ndarray, b: np.ndarray) -> None:
        self.decided = True
        # the offset from the first CHUNK elements: a constant relative offset shows in any of them
        rr = r.reshape(-1)[:CHUNK].astype(np.float64)
        vv = v.reshape(-1)[:CHUNK].astype(np.float64)
        nonzero = rr != 0
        offset = float(np.median((vv[nonzero] - rr[nonzero]) / rr[nonzero])) if nonzero.any() else 0.0
        for side, x in (("a", a), ("b", b)):
            plain, variant = max_distance(x, r), max_distance(x, v)
            if variant * 8 < plain:  # an order of magnitude closer: measured 77x at A1's step0.optim.exp_avg_sq
                self.chosen[side] = vname
                self.differences.append(FrameworkDifference(side, vname, name, variant, plain, offset,
                                                            self._effect[vname]))
