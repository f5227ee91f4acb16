"""Tolerances as data: a default and per-tensor overrides by glob, loadable from a file."""

from __future__ import annotations

import fnmatch
import math
import numbers
import tomllib
from dataclasses import dataclass, field
from fractions import Fraction
from pathlib import Path

import numpy as np

from burnside import strict_json
from burnside.errors import BurnsideError
from burnside.input_file import decode_utf8, read_input


def _is_number(value: object) -> bool:
    return isinstance(value, numbers.Real) and not isinstance(value, (bool, np.bool_))


def _is_integer(value: object) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, (bool, np.bool_))


def _finite(value: float) -> bool:
    try:
        return math.isfinite(value)
    except OverflowError:  # an integer beyond float range
        return False


def _shown(value: object) -> str:
    text = repr(float(value)) if isinstance(value, float) else repr(value)
    return text if len(text) <= 40 else text[:37] + "..."

# Elements whose rounded |a-b| lies this close (relatively) to a bound involving rtol are
# settled in exact rational arithmetic; with rtol 0 an exact two-sum settles them instead.
_RTOL_BORDER = 2.0**-40


@dataclass(frozen=True)
class Tolerance:
    """An element passes when |a-b| <= atol + rtol*|b|, or (if ulps is set) when it is within ulps."""

    atol: float = 1e-6
    rtol: float = 0.0
    ulps: int | None = None

    def __post_init__(self) -> None:
        # A NaN tolerance would pass every difference: `diff > nan` is never true.
        for key in ("atol", "rtol"):
            value = getattr(self, key)
            if not _is_number(value) or not _finite(value) or value < 0:
                raise BurnsideError(f"tolerance {key}={_shown(value)} is not a finite number >= 0; "
                                    "give e.g. 1e-6 (0 for exact)")
        if self.ulps is not None and (not _is_integer(self.ulps) or not 0 <= self.ulps < 2**63):
            raise BurnsideError(f"tolerance ulps={_shown(self.ulps)} is not a whole number from 0 to 2^63-1; "
                                "give e.g. 4")

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
            # an atol beyond the working type's range: no finite difference exceeds it
            atol = work(min(self.atol, float(np.finfo(work).max)))
            bad = np.greater(diff, atol, out=out)
            # |a-b| was rounded to the working type: elements within rounding of atol are settled
            # by an exact two-sum in f64 (a - b == s + e exactly).
            border = 2.0**-20 if diff.dtype != np.float64 else 2.0**-50
            near = np.flatnonzero(np.abs(diff - atol) <= atol * work(border))
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


#: A tolerance file is a few tables of numbers; anything much larger is not one.
MAX_TOLERANCE_FILE_BYTES = 1024 * 1024


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
    data = read_input(path, "a tolerance file", MAX_TOLERANCE_FILE_BYTES)
    text = decode_utf8(path, data, "a tolerance file")
    try:
        doc = tomllib.loads(text) if path.suffix == ".toml" else strict_json.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise BurnsideError(f"{path}: invalid tolerance file ({exc})") from None
    except RecursionError:
        raise BurnsideError(f"{path}: nested too deeply; a tolerance file is [default] and "
                            "[tensors.\"GLOB\"] tables of numbers") from None
    except ValueError as exc:
        raise BurnsideError(f"{path}: invalid tolerance file ({strict_json.describe(exc)})") from None
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
    for key in ("atol", "rtol"):
        if key in spec and not _is_number(spec[key]):
            raise BurnsideError(f"{path}: [{where}] {key} must be a number, not {_shown(spec[key])}")
    if "ulps" in spec and not _is_integer(spec["ulps"]):
        raise BurnsideError(f"{path}: [{where}] ulps must be a whole number, not {_shown(spec['ulps'])}")
    try:
        return Tolerance(
            atol=spec.get("atol", fallback.atol),
            rtol=spec.get("rtol", fallback.rtol),
            ulps=spec.get("ulps", fallback.ulps),
        )
    except BurnsideError as exc:
        raise BurnsideError(f"{path}: [{where}] {exc}") from None
