"""Reading and writing the JSON form of a trace (exact values, see docs/trace-format.md)."""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from burnside import strict_json
from burnside.atomic import write_atomic
from burnside.errors import TraceError
from burnside.trace.dtypes import FLOATS, STORAGE, as_bf16, bf16_to_f32
from burnside.trace.limits import check_dtype, check_name, check_shape, short
from burnside.trace.statistics import Statistics

#: The versions of the JSON form: 1, and 3 with statistics-only tensors (it never has aliases, version 2).
VERSIONS = (1, 3)

JSON_FORMAT = "burnside-trace"
_DOC_KEYS = {"format", "version", "metadata", "tensors"}
_SPEC_KEYS = {"dtype", "shape", "data"}
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}
#: Unsigned integer view of each float dtype's bits, for NaN payloads.
_BITS = {"F64": np.dtype("<u8"), "F32": np.dtype("<u4"), "F16": np.dtype("<u2"), "BF16": np.dtype("<u2")}
#: (exponent mask, mantissa mask) of each float dtype: a NaN has every exponent bit and some mantissa bit.
_NAN_MASKS = {"F64": (0x7FF0000000000000, 0x000FFFFFFFFFFFFF), "F32": (0x7F800000, 0x007FFFFF),
              "F16": (0x7C00, 0x03FF), "BF16": (0x7F80, 0x007F)}
#: The bits "NaN" stands for: each dtype's default quiet NaN (numpy's and PyTorch's).
_CANONICAL_NAN = {"F64": 0x7FF8000000000000, "F32": 0x7FC00000, "F16": 0x7E00, "BF16": 0x7FC0}
_PAYLOAD = re.compile(r"NaN:0x([0-9a-fA-F]+)")
_BF16_MAX = 3.3895313892515355e38
_BF16_MIN_NORMAL = 2.0**-126
_BF16_SUBNORMAL_STEP = 2.0**-133


def read(path: Path, text: str) -> tuple[dict, dict[str, tuple[str, np.ndarray]], int]:
    """Parse a JSON trace's text: (metadata, {name: (dtype, array)}, version); the version is checked here
    (1, or 3 for a trace with statistics-only tensors, metadata `statistics`)."""
    try:
        doc = strict_json.loads(text, check_floats=False)  # tensor data is checked in bulk below
    except ValueError as exc:
        reason = strict_json.describe(exc)
        if isinstance(exc, json.JSONDecodeError):
            reason += "; the file is corrupt or truncated"
        raise TraceError(f"{path}: {reason}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("tensors"), dict):
        raise TraceError(f"{path}: not a burnside JSON trace (no \"tensors\" object)")
    if doc.get("format") != JSON_FORMAT:
        raise TraceError(f"{path}: not a burnside JSON trace (format is {short(doc.get('format'))}, "
                         f"expected {JSON_FORMAT!r})")
    version = doc.get("version")
    if type(version) is not int or version not in VERSIONS:
        raise TraceError(f"{path}: trace format version {short(version)} is not supported "
                         "(this burnside reads JSON versions 1 and 3); upgrade burnside or re-record")
    unknown = set(doc) - _DOC_KEYS
    if unknown:
        raise TraceError(f"{path}: unknown top-level key {short(sorted(unknown)[0])} "
                         "(a JSON trace has format, version, metadata and tensors)")
    if "metadata" not in doc:
        raise TraceError(f"{path}: has no \"metadata\" object; re-record it")
    metadata = doc["metadata"]
    if not isinstance(metadata, dict):
        raise TraceError(f"{path}: \"metadata\" must be an object, not {short(metadata)}")
    tensors = {check_name(path, name): _tensor(path, name, spec) for name, spec in doc["tensors"].items()}
    return metadata, tensors, version


def _tensor(path: Path, name: str, spec: object) -> tuple[str, np.ndarray]:
    if not isinstance(spec, dict) or set(spec) != _SPEC_KEYS:
        raise TraceError(f"{path}: tensor {name!r} must be an object with exactly dtype, shape and data, "
                         f"not {short(spec)}")
    dtype = check_dtype(path, name, spec["dtype"])
    shape = check_shape(path, name, spec["shape"])
    data = spec["data"]
    if not isinstance(data, list):
        raise TraceError(f"{path}: tensor {name!r} data must be a list, not {short(data)}")
    if len(data) != math.prod(shape):
        raise TraceError(f"{path}: tensor {name!r} has {len(data)} values for shape {list(shape)} "
                         f"({math.prod(shape)} expected)")
    if dtype in FLOATS:
        return dtype, _floats(path, name, dtype, data).reshape(shape)
    return dtype, _integers(path, name, dtype, data).reshape(shape)


def _floats(path: Path, name: str, dtype: str, data: list) -> np.ndarray:
    payloads: list[tuple[int, int]] = []
    if set(map(type, data)) <= {float}:  # the common case, checked in bulk
        wide = np.array(data, dtype=np.float64)
    else:
        wide = np.array([_float(path, name, dtype, i, v, payloads) for i, v in enumerate(data)], dtype=np.float64)
    if not np.isfinite(wide).all():
        # The parser refuses bare Infinity, so an inf that was not the string "Infinity" was a
        # decimal beyond f64's range.
        strings = np.array([isinstance(v, str) for v in data], dtype=bool)
        _refuse_overflow(path, name, "a 64-bit float", wide, np.isinf(wide) & ~strings, literal_inf=True)
    if dtype == "F64":
        out = wide
    elif dtype == "BF16":
        out = _to_bf16_bits(path, name, wide)
    else:
        with np.errstate(over="ignore"):
            out = wide.astype(STORAGE[dtype])
        _refuse_overflow(path, name, dtype, wide, np.isinf(out))
    if payloads:
        index, bits = zip(*payloads, strict=True)
        out.view(_BITS[dtype])[list(index)] = np.array(bits, dtype=_BITS[dtype])
    return out


def _float(path: Path, name: str, dtype: str, index: int, v: object, payloads: list[tuple[int, int]]) -> float:
    if type(v) is float:
        return v
    if type(v) is int:
        try:
            return float(v)
        except OverflowError:
            raise TraceError(f"{path}: tensor {name!r} value #{index} ({short(v)}) is out of range "
                             f"for {dtype}") from None
    if isinstance(v, str):
        if v in _NONFINITE:
            return _NONFINITE[v]
        payloads.append((index, _payload(path, name, dtype, index, v)))
        return math.nan
    raise TraceError(f"{path}: tensor {name!r} value #{index} is {short(v)}, not a number")


def _payload(path: Path, name: str, dtype: str, index: int, text: str) -> int:
    """The bits of a `"NaN:0x…"` value, which must be a NaN of ``dtype``'s width."""
    m = _PAYLOAD.fullmatch(text)
    width = _BITS[dtype].itemsize * 2
    exponent, mantissa = _NAN_MASKS[dtype]
    bits = int(m.group(1), 16) if m and len(m.group(1)) == width else None
    if bits is None or bits & exponent != exponent or not bits & mantissa:
        raise TraceError(f"{path}: tensor {name!r} value #{index} is {short(text)}, not a number: "
                         f"use a number, \"NaN\", \"Infinity\", \"-Infinity\", or \"NaN:0x\" and the {width} "
                         f"hex digits of a {dtype} NaN")
    return bits


def _refuse_overflow(path: Path, name: str, dtype: str, wide: np.ndarray, overflowed: np.ndarray,
                     literal_inf: bool = False) -> None:
    bad = np.flatnonzero(overflowed if literal_inf else overflowed & np.isfinite(wide))
    if bad.size:
        i = int(bad[0])
        what = "a decimal beyond ±1.8e308" if literal_inf else repr(float(wide[i]))
        raise TraceError(f"{path}: tensor {name!r} value #{i} ({what}) is out of range for {dtype}; "
                         "write \"Infinity\" or \"-Infinity\" if that is what the tensor holds")


def _to_bf16_bits(path: Path, name: str, wide: np.ndarray) -> np.ndarray:
    """f64 values rounded once, to nearest even, to bf16 (8 significant bits, f32's exponent range)."""
    with np.errstate(invalid="ignore", over="ignore"):
        mantissa, exponent = np.frexp(wide)
        normal = np.ldexp(np.rint(mantissa * 256.0), exponent - 8)
        subnormal = np.rint(wide / _BF16_SUBNORMAL_STEP) * _BF16_SUBNORMAL_STEP
        rounded = np.where(np.abs(wide) >= _BF16_MIN_NORMAL, normal, subnormal)
        _refuse_overflow(path, name, "BF16", wide, np.abs(rounded) > _BF16_MAX)
        # every rounded value is exact in f32, whose top 16 bits are the bf16
        return as_bf16((rounded.astype(np.float32).view(np.uint32) >> 16).astype(np.uint16))


def _integers(path: Path, name: str, dtype: str, data: list) -> np.ndarray:
    is_bool = dtype == "BOOL"
    if not is_bool:
        info = np.iinfo(STORAGE[dtype])
        low, high = int(info.min), int(info.max)
    for i, v in enumerate(data):
        if (type(v) is bool) != is_bool or not isinstance(v, int):
            raise TraceError(f"{path}: tensor {name!r} value #{i} is {short(v)}, not a {dtype} value")
        if not is_bool and not low <= v <= high:
            raise TraceError(f"{path}: tensor {name!r} value #{i} ({short(v)}) is out of range for {dtype} "
                             f"({low} to {high})")
    return np.array(data, dtype=STORAGE[dtype])


def write(path: Path, tensors: dict[str, tuple[str, np.ndarray]], metadata: dict,
          statistics: Mapping[str, Statistics] | None = None) -> None:
    """Write a JSON trace atomically; floats as shortest round-trip decimals, NaN payloads kept. With
    ``statistics`` (statistics-only tensors, already checked), version 3 with metadata `statistics`."""
    body = {}
    for name, (dtype, array) in tensors.items():
        body[name] = {"dtype": dtype, "shape": list(array.shape), "data": _values(dtype, array)}
    version = 1
    if statistics:
        version = 3
        metadata = {**metadata, "statistics": {name: s.to_json() for name, s in statistics.items()}}
    doc = {"format": JSON_FORMAT, "version": version, "metadata": metadata, "tensors": body}
    text = json.dumps(doc, indent=1, allow_nan=False)
    write_atomic(path, text + "\n")


def _values(dtype: str, array: np.ndarray) -> list:
    flat = np.ascontiguousarray(array).reshape(-1)
    if dtype not in FLOATS:
        return flat.tolist()
    values = bf16_to_f32(flat) if dtype == "BF16" else flat
    with np.errstate(invalid="ignore"):  # NaNs widen to NaNs; their bits are written below
        out = values.astype(np.float64).tolist()
    nonfinite = np.flatnonzero(~np.isfinite(values))
    if nonfinite.size:
        bits = flat.view(_BITS[dtype])
        for i in nonfinite.tolist():
            v = out[i]
            if v == v:
                out[i] = "Infinity" if v > 0 else "-Infinity"
            elif int(bits[i]) == _CANONICAL_NAN[dtype]:
                out[i] = "NaN"
            else:
                out[i] = f"NaN:0x{int(bits[i]):0{_BITS[dtype].itemsize * 2}x}"
    return out
