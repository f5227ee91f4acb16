"""The bounds a trace stays within, and the checks of a tensor's name, dtype and shape against them.

Every bound is far above what a real trace needs; each exists so that a hostile file gets one
line naming the bound instead of a crash, a hang or an allocation of the whole memory.
"""

from __future__ import annotations

import math
import re
from pathlib import Path

from burnside.errors import TraceError
from burnside.trace.dtypes import STORAGE

#: Length of a safetensors JSON header.
MAX_HEADER_BYTES = 100 * 1024 * 1024
#: Size of a JSON trace (read whole into memory; larger traces belong in safetensors).
MAX_JSON_BYTES = 1024 * 1024 * 1024
#: Training steps in one trace (diagnosis looks at every step).
MAX_STEPS = 100_000
#: Dimensions of one tensor (numpy 1.x stops at 32).
MAX_DIMS = 32
#: Elements of one tensor, counting a zero-length dimension as 1 (so `[0, 10**30]` is refused too).
MAX_ELEMENTS = 2**48

# C0 and C1 control characters: a name printed in a terminal must not carry escape sequences.
_CONTROL = re.compile(r"[\x00-\x1f\x7f-\x9f]")


def check_text(path: Path, what: str, value: object) -> str:
    """A string that may be printed: no control characters."""
    if not isinstance(value, str):
        raise TraceError(f"{path}: {what} must be a string, not {short(value)}")
    bad = _CONTROL.search(value)
    if bad:
        raise TraceError(f"{path}: {what} contains the control character U+{ord(bad.group()):04X}; "
                         "names and metadata strings are printable text")
    return value


def check_name(path: Path, name: object) -> str:
    """A tensor name: a non-empty printable string."""
    check_text(path, "a tensor name", name)
    if not name:
        raise TraceError(f"{path}: a tensor has an empty name")
    return name  # type: ignore[return-value]


def check_dtype(path: Path, name: str, dtype: object) -> str:
    """A safetensors dtype name this reader knows."""
    if not isinstance(dtype, str):
        raise TraceError(f"{path}: tensor {name!r} has dtype {short(dtype)}, not a dtype name such as \"F32\"")
    if dtype not in STORAGE:
        raise TraceError(f"{path}: tensor {name!r} has unsupported dtype {short(dtype)} "
                         f"(one of {', '.join(STORAGE)})")
    return dtype


def check_shape(path: Path, name: str, shape: object) -> tuple[int, ...]:
    """A shape: a list of non-negative integers, at most MAX_DIMS of them, at most MAX_ELEMENTS elements."""
    if not isinstance(shape, (list, tuple)) or not all(type(d) is int and d >= 0 for d in shape):
        raise TraceError(f"{path}: tensor {name!r} has shape {short(shape)}, "
                         "not a list of non-negative integers")
    if len(shape) > MAX_DIMS:
        raise TraceError(f"{path}: tensor {name!r} has {len(shape)} dimensions, more than the {MAX_DIMS} allowed")
    if math.prod(max(d, 1) for d in shape) > MAX_ELEMENTS:
        raise TraceError(f"{path}: tensor {name!r} has shape {short(shape)}, more than the "
                         f"{MAX_ELEMENTS} (2^48) elements allowed")
    return tuple(shape)


def short(value: object, limit: int = 60) -> str:
    """repr of a value from a file, cut to ``limit`` characters for a one-line message."""
    try:
        text = repr(value)
    except ValueError:  # an int beyond Python's 4300-digit conversion limit
        return "a very large integer"
    return text if len(text) <= limit else text[: limit - 3] + "..."


__all__ = ["MAX_DIMS", "MAX_ELEMENTS", "MAX_HEADER_BYTES", "MAX_JSON_BYTES", "MAX_STEPS",
           "check_dtype", "check_name", "check_shape", "check_text", "short"]
