"""Tolerances as data: a default and per-tensor overrides by glob, loadable from a file."""

from __future__ import annotations

import fnmatch
import json
import tomllib
from dataclasses import dataclass, field
from pathlib import Path

from burnside.errors import BurnsideError


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
