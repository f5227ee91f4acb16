"""Reading and writing the JSON form of a trace (exact values, see docs/trace-format.md)."""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from burnside.atomic import atomic_output
from burnside.errors import TraceError
from burnside.trace.dtypes import FLOATS, STORAGE, bf16_to_f32, f32_to_bf16_bits

JSON_FORMAT = "burnside-trace"
_NONFINITE = {"NaN": math.nan, "Infinity": math.inf, "-Infinity": -math.inf}


def read(path: Path) -> tuple[str, int, dict, dict[str, tuple[str, np.ndarray]]]:
    """Parse a JSON trace: (format, version, metadata, {name: (dtype, array)})."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except (UnicodeDecodeError, IsADirectoryError, PermissionError) as exc:
        raise TraceError(f"{path}: cannot read as a JSON trace ({type(exc).__name__})") from None
    try:
        doc = json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as exc:
        raise TraceError(f"{path}: invalid JSON at line {exc.lineno} column {exc.colno} ({exc.msg}); "
                         "the file is corrupt or truncated") from None
    except ValueError as exc:
        raise TraceError(f"{path}: {exc}") from None
    if not isinstance(doc, dict) or not isinstance(doc.get("tensors"), dict):
        raise TraceError(f"{path}: not a burnside JSON trace (no \"tensors\" object)")
    metadata = doc.get("metadata", {})
    if not isinstance(metadata, dict):
        raise TraceError(f"{path}: \"metadata\" must be an object")
    tensors = {name: _tensor(path, name, spec) for name, spec in doc["tensors"].items()}
    return str(doc.get("format", "")), doc.get("version"), metadata, tensors


def _reject_constant(token: str) -> float:
    raise ValueError(f"bare {token} is not JSON; write non-finite values as the strings \"NaN\", \"Infinity\", \"-Infinity\"")


def _tensor(path: Path, name: str, spec: object) -> tuple[str, np.ndarray]:
    if not isinstance(spec, dict):
        raise TraceError(f"{path}: tensor {name!r} must be an object with dtype, shape and data")
    dtype = spec.get("dtype", "F32")
    shape = spec.get("shape")
    data = spec.get("data")
    if dtype not in STORAGE:
        raise TraceError(f"{path}: tensor {name!r} has unsupported dtype {dtype!r}")
    if not isinstance(shape, list) or not all(isinstance(d, int) and d >= 0 for d in shape):
        raise TraceError(f"{path}: tensor {name!r} has an invalid shape {shape!r}")
    if not isinstance(data, list):
        raise TraceError(f"{path}: tensor {name!r} has no data list")
    if len(data) != math.prod(shape):
        raise TraceError(f"{path}: tensor {name!r} has {len(data)} values for shape {shape} "
                         f"({math.prod(shape)} expected)")
    if dtype in FLOATS:
        values = [_float(path, name, i, v) for i, v in enumerate(data)]
        if dtype == "BF16":
            wide = np.array(values, dtype=np.float32)
            return dtype, f32_to_bf16_bits(wide).reshape(shape)
        return dtype, np.array(values, dtype=STORAGE[dtype]).reshape(shape)
    for i, v in enumerate(data):
        if isinstance(v, bool) != (dtype == "BOOL") or not isinstance(v, int):
            raise TraceError(f"{path}: tensor {name!r} value #{i} is {v!r}, not a {dtype} value")
    return dtype, np.array(data, dtype=STORAGE[dtype]).reshape(shape)


def _float(path: Path, name: str, index: int, value: object) -> float:
    if isinstance(value, (int, float)) and not isinstance(value, bool):
        return float(value)
    if isinstance(value, str) and value in _NONFINITE:
        return _NONFINITE[value]
    raise TraceError(f"{path}: tensor {name!r} value #{index} is {value!r}, not a number")


def write(path: Path, tensors: dict[str, tuple[str, np.ndarray]], metadata: dict) -> None:
    """Write a JSON trace atomically; floats as shortest round-trip decimals."""
    body = {}
    for name, (dtype, array) in tensors.items():
        body[name] = {"dtype": dtype, "shape": list(array.shape), "data": _values(dtype, array)}
    doc = {"format": JSON_FORMAT, "version": 1, "metadata": metadata, "tensors": body}
    text = json.dumps(doc, indent=1, allow_nan=False)
    with atomic_output(path, "w") as handle:
        handle.write(text + "\n")


def _values(dtype: str, array: np.ndarray) -> list:
    flat = np.asarray(array).reshape(-1)
    if dtype == "BF16":
        flat = bf16_to_f32(flat)
    if dtype not in FLOATS:
        return flat.tolist()
    out = flat.astype(np.float64).tolist()
    if not np.isfinite(flat).all():
        out = [v if math.isfinite(v) else ("NaN" if v != v else ("Infinity" if v > 0 else "-Infinity")) for v in out]
    return out
