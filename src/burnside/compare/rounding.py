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
