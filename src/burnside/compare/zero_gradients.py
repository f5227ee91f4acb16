"""Gradient elements that are zero up to rounding in the float64 reference, left out of the verdict.

Under an Adam-family optimizer a gradient that is zero in exact arithmetic is each side's own
rounding noise, which Adam scales up to lr-sized steps; judged as it is, it would blame a side for
noise. `Judge` notes each step's gradients here and leaves the noted elements out of this and every
later tensor of that parameter; the report lists them (`Comparison.zero_gradients`).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from burnside.compare.rounding import CHUNK, FLOOR_HALF_ULPS, HALF_ULP, NOISE_FACTOR


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


#: Set bits of each byte value.
_POPCOUNT = np.array([bin(i).count("1") for i in range(256)], dtype=np.uint8)


class PackedMask:
    """A bool mask of ``size`` elements held one bit each (a GPT-2's embedding is 38.6 M elements: 4.8 MB, not
    38.6 MB, for every parameter with a noted element), sliced as the bool array it stands for."""

    def __init__(self, bits: np.ndarray, size: int) -> None:
        self.bits, self.size = bits, size

    def __getitem__(self, part: slice) -> np.ndarray:
        start, stop, _ = part.indices(self.size)
        lo, hi = start // 8, (stop + 7) // 8
        return np.unpackbits(self.bits[lo:hi], bitorder="little")[start - 8 * lo:stop - 8 * lo].astype(bool)

    def count(self) -> int:
        return int(_POPCOUNT[self.bits].sum(dtype=np.int64))


class ZeroGradients:
    """Per parameter, the elements whose reference gradient was below rounding at some step so far."""

    def __init__(self) -> None:
        self.masks: dict[str, PackedMask] = {}
        self.found: dict[str, ZeroGradient] = {}
        self._scale: dict[int, float] = {}  # step -> largest reference gradient so far

    def mask(self, param: str, size: int) -> PackedMask | None:
        """The elements of ``param`` to leave out, or None (none noted, or of another size)."""
        mask = self.masks.get(param)
        return mask if mask is not None and mask.size == size else None

    def note(self, param: str, step: int, r: np.ndarray, scale: float, a: np.ndarray, b: np.ndarray) -> None:
        """Note step ``step``'s gradient of ``param``: reference ``r`` (of largest magnitude ``scale``), sides
        ``a``, ``b``."""
        # a gradient that is zero in exact arithmetic has no scale of its own (the float64 run's
        # is ~1e-17): its rounding is judged at the scale of the step's other gradients
        self._scale[step] = max(self._scale.get(step, 0.0), scale)
        scale = self._scale[step]
        # below rounding in the reference, not exactly zero on both sides (a dead ReLU's exact zero is
        # not noise: no optimizer moves it), and each side's value itself of rounding size: a side whose
        # gradient there is real (a GELU where the model has a ReLU) computes something else, not noise
        flat, fa, fb = r.reshape(-1), a.reshape(-1), b.reshape(-1)
        floor = FLOOR_HALF_ULPS * HALF_ULP * scale
        noise = NOISE_FACTOR * floor
        # packed chunk by chunk (CHUNK is a multiple of 8: each chunk's bits start on a byte)
        chunks = [np.packbits((np.abs(flat[s:s + CHUNK]) <= floor) & ((fa[s:s + CHUNK] != 0) | (fb[s:s + CHUNK] != 0))
                              & (np.abs(fa[s:s + CHUNK]) <= noise) & (np.abs(fb[s:s + CHUNK]) <= noise),
                              bitorder="little")
                  for s in range(0, flat.size, CHUNK)]
        zero = np.concatenate(chunks) if chunks else np.zeros(0, dtype=np.uint8)
        if scale == 0.0 or not zero.any():
            return
        mask = self.masks.get(param)
        if mask is not None and mask.size == flat.size:
            zero |= mask.bits
        self.masks[param] = PackedMask(zero, flat.size)
        found = self.found.get(param)
        count = self.masks[param].count()
        self.found[param] = ZeroGradient(param, found.first_step if found else step, count, flat.size)
