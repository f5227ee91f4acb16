"""Reading and writing the safetensors form of a trace.

Reading parses only the header (8-byte length + JSON index) and memory-maps the
data, so a trace larger than memory can be compared one tensor at a time.
Writing goes through the `safetensors` package.
"""

from __future__ import annotations

import json
import math
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from safetensors.numpy import save as safetensors_save

from burnside.atomic import atomic_output
from burnside.errors import TraceError
from burnside.trace.dtypes import STORAGE

_MAX_HEADER = 100 * 1024 * 1024


@dataclass(frozen=True)
class Entry:
    """Where one tensor lives in the file."""

    dtype: str
    shape: tuple[int, ...]
    begin: int  # absolute byte offset in the file
    end: int


def read_index(path: Path) -> tuple[dict[str, str], dict[str, Entry], int]:
    """Parse and validate a safetensors header: (metadata, entries, file size)."""
    try:
        size = path.stat().st_size
        with path.open("rb") as handle:
            head = handle.read(8)
            if len(head) < 8:
                raise TraceError(f"{path}: not a safetensors file (only {len(head)} bytes); re-record it")
            (header_len,) = struct.unpack("<Q", head)
            if header_len > min(_MAX_HEADER, size - 8):
                raise TraceError(
                    f"{path}: not a safetensors file or truncated (header claims {header_len} bytes, "
                    f"file has {size}); re-record it"
                )
            raw = handle.read(header_len)
    except FileNotFoundError:
        raise TraceError(f"{path}: no such file") from None
    except IsADirectoryError:
        raise TraceError(f"{path}: is a directory, expected a trace file") from None
    except PermissionError:
        raise TraceError(f"{path}: permission denied") from None
    try:
        header = json.loads(raw)
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise TraceError(f"{path}: corrupt safetensors header (not JSON); re-record it") from None
    if not isinstance(header, dict):
        raise TraceError(f"{path}: corrupt safetensors header (not an object); re-record it")
    metadata = header.pop("__metadata__", None) or {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise TraceError(f"{path}: corrupt safetensors metadata (values must be strings)")
    data_start = 8 + header_len
    entries: dict[str, Entry] = {}
    for name, spec in header.items():
        entries[name] = _entry(path, name, spec, data_start, size)
    return metadata, entries, size


def _entry(path: Path, name: str, spec: object, data_start: int, size: int) -> Entry:
    try:
        dtype = spec["dtype"]  # type: ignore[index]
        shape = tuple(int(d) for d in spec["shape"])  # type: ignore[index]
        begin, end = (int(o) for o in spec["data_offsets"])  # type: ignore[index]
    except (KeyError, TypeError, ValueError):
        raise TraceError(f"{path}: corrupt safetensors entry for {name!r}; re-record it") from None
    if dtype not in STORAGE:
        raise TraceError(f"{path}: tensor {name!r} has unsupported dtype {dtype}")
    expected = math.prod(shape) * STORAGE[dtype].itemsize
    if any(d < 0 for d in shape) or end - begin != expected or begin < 0:
        raise TraceError(f"{path}: tensor {name!r} has inconsistent shape and offsets; re-record it")
    if data_start + end > size:
        raise TraceError(
            f"{path}: truncated: tensor {name!r} ends at byte {data_start + end}, file has {size}; re-record it"
        )
    return Entry(dtype, shape, data_start + begin, data_start + end)


class MappedFile:
    """A read-only memory map of a safetensors file, handing out zero-copy arrays."""

    def __init__(self, path: Path, size: int) -> None:
        self._mmap: mmap.mmap | None = None
        if size:
            with path.open("rb") as handle:
                self._mmap = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            if hasattr(mmap, "MADV_SEQUENTIAL"):
                self._mmap.madvise(mmap.MADV_SEQUENTIAL)

    def array(self, entry: Entry) -> np.ndarray:
        """The tensor as a read-only array over the mapped bytes."""
        storage = STORAGE[entry.dtype]
        count = math.prod(entry.shape)
        if count == 0 or self._mmap is None:
            return np.zeros(entry.shape, dtype=storage)
        flat = np.frombuffer(self._mmap, dtype=storage, count=count, offset=entry.begin)
        return flat.reshape(entry.shape)


    def release(self, entry: Entry) -> None:
        """Unmap a compared tensor's pages (they stay in the page cache): keeps RSS to one tensor."""
        if self._mmap is None or not hasattr(mmap, "MADV_DONTNEED"):
            return
        start = entry.begin - entry.begin % mmap.PAGESIZE
        if entry.end > start:
            self._mmap.madvise(mmap.MADV_DONTNEED, start, entry.end - start)


def write(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """Write tensors (numpy, already in storage dtype) and string metadata atomically."""
    payload = safetensors_save({k: np.ascontiguousarray(v).reshape(np.shape(v)) for k, v in tensors.items()}, metadata=metadata)
    with atomic_output(path, "wb") as handle:
        handle.write(payload)


def is_safetensors(path: Path) -> bool:
    """Sniff: does the file start like a safetensors file (u64 length, then '{')?"""
    try:
        with path.open("rb") as handle:
            head = handle.read(9)
    except OSError:
        return False
    return len(head) == 9 and head[8:9] == b"{"


__all__ = ["Entry", "MappedFile", "read_index", "write", "is_safetensors"]
