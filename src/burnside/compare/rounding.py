"""What counts as float32 rounding when two runs are judged by a float64 reference (docs/compare.md).

The constants the noise verdict (`referee`) and the zero-gradient masks (`zero_gradients`) share.
"""

#: A side within this many times the other side's own distance to the reference is noise.
NOISE_FACTOR = 32.0
#: The absolute floor, in float32 half-ulps (2^-24) of the tensor's largest reference value.
FLOOR_HALF_ULPS = 8.0
#: One float32 half-ulp at scale 1.
HALF_ULP = 2.0**-24
#: Elements per chunk when a tensor is walked against its reference.
CHUNK = 1 << 17
#: A float32 sum of n terms, added one after another (burn's Flex reduces a tensor so, a few accumulators at a time;
#: PyTorch pairwise), rounds by up to about sqrt(n) half-ulps of its magnitude: measured 0.6-0.83 sqrt(n) at the
#: worst of 200 sums of n = 256 to 16384 uniform terms, a fifth of them negative, and 0.38-0.45 sqrt(n) on a VAE's
#: summed BCE loss and its decoder bias gradients (2048 terms; docs/compare.md). The floor of such a tensor is
#: SUM_FACTOR sqrt(n) half-ulps where that exceeds FLOOR_HALF_ULPS.
SUM_FACTOR = 2.0


def sum_half_ulps(terms: int) -> float:
    """The floor, in float32 half-ulps of a tensor's scale, of a tensor whose elements are float32 sums of ``terms``
    terms: FLOOR_HALF_ULPS, or SUM_FACTOR sqrt(terms) where that is more."""
    return max(FLOOR_HALF_ULPS, SUM_FACTOR * terms ** 0.5)
