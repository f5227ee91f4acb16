"""safetensors dtype names and their numpy storage types."""

from __future__ import annotations

import numpy as np

#: numpy has no bfloat16: a BF16 tensor is held as its raw 16-bit words in this uint16 dtype, marked in the
#: dtype's metadata so that a writer stores it as BF16 and not U16 (the mark survives views, reshapes and
#: copies; it compares equal to plain uint16, so `dtype_of` reads the mark first).
BF16_STORAGE = np.dtype("<u2", metadata={"safetensors": "BF16"})

#: safetensors dtype -> numpy dtype used to *store* it. BF16 has no numpy type:
#: it is kept as its raw uint16 bits (`BF16_STORAGE`) and widened to f32 where values are needed.
STORAGE: dict[str, np.dtype] = {
    "F64": np.dtype("<f8"),
    "F32": np.dtype("<f4"),
    "F16": np.dtype("<f2"),
    "BF16": BF16_STORAGE,
    "I64": np.dtype("<i8"),
    "I32": np.dtype("<i4"),
    "I16": np.dtype("<i2"),
    "I8": np.dtype("i1"),
    "U64": np.dtype("<u8"),
    "U32": np.dtype("<u4"),
    "U16": np.dtype("<u2"),
    "U8": np.dtype("u1"),
    "BOOL": np.dtype("?"),
}
FLOATS = ("F64", "F32", "F16", "BF16")

_FROM_NUMPY = {
    np.dtype("f8"): "F64",
    np.dtype("f4"): "F32",
    np.dtype("f2"): "F16",
    np.dtype("i8"): "I64",
    np.dtype("i4"): "I32",
    np.dtype("i2"): "I16",
    np.dtype("i1"): "I8",
    np.dtype("u8"): "U64",
    np.dtype("u4"): "U32",
    np.dtype("u2"): "U16",
    np.dtype("u1"): "U8",
    np.dtype("?"): "BOOL",
}


def dtype_of(array: np.ndarray) -> str:
    """The safetensors dtype name of a numpy array (``BF16`` for raw bf16 words in `BF16_STORAGE`)."""
    if is_bf16(array):
        return "BF16"
    try:
        return _FROM_NUMPY[array.dtype.newbyteorder("=")]
    except KeyError:
        raise ValueError(f"dtype {array.dtype} has no safetensors equivalent") from None


def is_bf16(array: np.ndarray) -> bool:
    """Whether ``array`` holds raw bf16 words (its dtype carries `BF16_STORAGE`'s mark)."""
    metadata = array.dtype.metadata
    return metadata is not None and metadata.get("safetensors") == "BF16"


def as_bf16(bits: np.ndarray) -> np.ndarray:
    """``bits`` (raw bf16 words, uint16 or int16) marked as BF16: a view, no copy."""
    return np.asarray(bits).view(BF16_STORAGE)


def bf16_to_f32(bits: np.ndarray) -> np.ndarray:
    """Widen raw bf16 bits to f32 values (exact)."""
    return (bits.astype(np.uint32) << 16).view(np.float32)


def f32_to_bf16_bits(values: np.ndarray) -> np.ndarray:
    """Raw bf16 bits of f32 values that are exactly representable in bf16."""
    return as_bf16((np.ascontiguousarray(values, dtype=np.float32).view(np.uint32) >> 16).astype(np.uint16))
