"""Tolerances as data: a default and per-tensor overrides by glob, loadable from a file."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from burnside.errors import BurnsideError

# Elements whose rounded |a-b| lies this close (relatively) to a bound involving rtol are
# settled in exact rational arithmetic; with rtol 0 an exact two-sum settles them instead.
_RTOL_BORDER = 2.0**-40


@dataclass(frozen=True)
class Tolerance:
    """An element passes when |a-b| <= atol + rtol*|b|, or (if ulps is set) when it is within ulps."""

    atol: float = 1e-6
    rtol: float = 0.0
    ulps: int | None = None

    def describe(self) -> str:
        """Short form for the verdict line, e.g. `tol=1e-06`."""
        text = f"tol={self.atol:g}"
        if self.rtol:
            text += f" rtol={self.rtol:g}"
        if self.ulps is not None:
            text += f" ulps={self.ulps}"
        return text

    def exceeded(self, a: np.ndarray, b: np.ndarray, diff: np.ndarray, ulps: np.ndarray,
                 out: np.ndarray | None = None) -> np.ndarray:
        """The one definition of "out of tolerance", element-wise and exact.

        An element fails when |a-b| > atol + rtol*|b| in exact arithmetic and, if `ulps` is set,
        it is also more than `ulps` representable values away. ``a``/``b`` are finite values in
        their working type (f64 for F64, else f32), ``diff`` their |a-b| rounded to that type,
        ``ulps`` their ULP distance; ``out`` is an optional bool buffer for the result.
        """
        if self.rtol:
            bound = self.atol + self.rtol * np.abs(b.astype(np.float64))
            exact = np.abs(a.astype(np.float64) - b.astype(np.float64))
            bad = np.greater(exact, bound, out=out)
            near = np.flatnonzero(np.abs(exact - bound) <= bound * _RTOL_BORDER)
            for i in near:  # rare: settle exactly with rationals
                fa, fb = Fraction(float(a[i])), Fraction(float(b[i]))
                bad[i] = abs(fa - fb) > Fraction(self.atol) + Fraction(self.rtol) * abs(fb)
        else:
            work = diff.dtype.type
            bad = np.greater(diff, work(self.atol), out=out)
            # |a-b| was rounded to the working type: elements within rounding of atol are settled
            # by an exact two-sum in f64 (a - b == s + e exactly).
            border = 2.0**-20 if diff.dtype != np.float64 else 2.0**-50
            near = np.flatnonzero(np.abs(diff - work(self.atol)) <= work(self.atol * border))
            if near.size:
                bad[near] = _exceeds_exactly(a[near].astype(np.float64), b[near].astype(np.float64), self.atol)
        if self.ulps is not None:
            bad &= ulps > self.ulps
        return bad


def _exceeds_exactly(a: np.ndarray, b: np.ndarray, atol: float) -> np.ndarray:
    """|a-b| > atol exactly, for f64 values.

    Knuth's two-sum gives a - b == s + e exactly, with s the rounded difference. Rounding is
    monotone, so |s| > atol or |s| < atol already decides; at |s| == atol the sign of e does.
    """
    nb = -b
    s = a + nb
    bp = s - a
    e = (a - (s - bp)) + (nb - bp)
    mag = np.abs(s)
    return (mag > atol) | ((mag == atol) & (np.sign(e) == np.sign(s)) & (e != 0))


@dataclass(frozen=True)
class Tolerances:
    """The default tolerance and `(glob, Tolerance)` overrides; the last matching glob wins."""

    default: Tolerance = Tolerance()
    overrides: tuple[tuple[str, Tolerance], ...] = field(default_factory=tuple)

    def for_name(self, name: str) -> Tolerance:
        """The tolerance that applies to one tensor name."""
        chosen = self.default
        for pattern, tol in self.overrides:
            if fnmatch.fnmatchcase(name, pattern):
                chosen = tol
        return chosen


def load_tolerances(path: str | Path, default: Tolerance) -> Tolerances:
    """Read a tolerance file (.json or .toml).

    ```toml
    [default]
    atol = 1e-6
    [tensors."*.optim.exp_avg_sq.*"]
    atol = 1e-9
    ulps = 4
    ```
    Keys not given in a table fall back to `default`.
    """
    path = Path(path)
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as exc:
        raise BurnsideError(f"{path}: cannot read tolerance file ({exc.strerror})") from None
    try:
        doc = tomllib.loads(text) if path.suffix == ".toml" else json.loads(text)
    except (tomllib.TOMLDecodeError, json.JSONDecodeError) as exc:
        raise BurnsideError(f"{path}: invalid tolerance file ({exc})") from None
    if not isinstance(doc, dict):
        raise BurnsideError(f"{path}: a tolerance file is a table with [default] and [tensors.\"GLOB\"]")
    base = _tolerance(path, "default", doc.get("default", {}), default)
    tensors = doc.get("tensors", {})
    if not isinstance(tensors, dict):
        raise BurnsideError(f"{path}: [tensors] must map globs to tables")
    overrides = tuple((glob, _tolerance(path, glob, spec, base)) for glob, spec in tensors.items())
    return Tolerances(base, overrides)


def _tolerance(path: Path, where: str, spec: object, fallback: Tolerance) -> Tolerance:
    if not isinstance(spec, dict) or set(spec) - {"atol", "rtol", "ulps"}:
        raise BurnsideError(f"{path}: [{where}] may only set atol, rtol and ulps")
    try:
        ulps = spec.get("ulps", fallback.ulps)
        return Tolerance(
            atol=float(spec.get("atol", fallback.atol)),
            rtol=float(spec.get("rtol", fallback.rtol)),
            ulps=None if ulps is None else int(ulps),
        )
    except (TypeError, ValueError):
        raise BurnsideError(f"{path}: [{where}] atol/rtol must be numbers and ulps an integer") from None
