"""Reading and writing the safetensors form of a trace.

Reading parses only the header (8-byte length + JSON index) and memory-maps the
data, so a trace larger than memory can be compared one tensor at a time.
Writing goes through the `safetensors` package.
"""

from __future__ import annotations

import math
import mmap
import struct
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np
from safetensors import TensorSpec, serialize

from burnside import strict_json
from burnside.atomic import write_atomic
from burnside.errors import TraceError
from burnside.trace.dtypes import STORAGE, dtype_of
from burnside.trace.limits import (
    MAX_HEADER_BYTES,
    check_dtype,
    check_name,
    check_shape,
    short,
)

_ENTRY_KEYS = {"dtype", "shape", "data_offsets"}


@dataclass(frozen=True)
class Entry:
    """Where one tensor lives in the file."""

    dtype: str
    shape: tuple[int, ...]
    begin: int  # absolute byte offset in the file
    end: int


def read_index(path: Path, handle: BinaryIO, size: int) -> tuple[dict[str, str], dict[str, Entry]]:
    """Parse and validate a safetensors header: (metadata, entries).

    Strict: the header is exactly its stated length (a JSON object, then only space padding),
    and the tensors' byte ranges tile the data area exactly, in offset order, with nothing
    left over, so a length that is off by one byte cannot shift every tensor.
    """
    head = handle.read(8)
    if len(head) < 8:
        raise TraceError(f"{path}: not a safetensors file (only {len(head)} bytes); re-record it")
    (header_len,) = struct.unpack("<Q", head)
    if header_len > MAX_HEADER_BYTES:
        raise TraceError(f"{path}: safetensors header of {header_len} bytes is more than the "
                         f"{MAX_HEADER_BYTES} bytes allowed; not a trace, or corrupt")
    if header_len > size - 8:
        raise TraceError(f"{path}: not a safetensors file or truncated (header claims {header_len} bytes, "
                         f"file has {size}); re-record it")
    raw = handle.read(header_len)
    if len(raw) != header_len:
        raise TraceError(f"{path}: truncated while reading its header; re-record it")
    if not raw.startswith(b"{") or not raw.rstrip(b" ").endswith(b"}"):
        raise TraceError(f"{path}: corrupt safetensors header (its {header_len} bytes are not one JSON object "
                         "padded with spaces; the stated length is wrong or the file is not safetensors)")
    try:
        header = strict_json.loads(raw.decode("utf-8"))
    except UnicodeDecodeError:
        raise TraceError(f"{path}: corrupt safetensors header (not UTF-8); re-record it") from None
    except ValueError as exc:
        raise TraceError(f"{path}: corrupt safetensors header ({strict_json.describe(exc)}); re-record it") from None
    if not isinstance(header, dict):
        raise TraceError(f"{path}: corrupt safetensors header (not an object); re-record it")
    metadata = header.pop("__metadata__", None)
    if metadata is None:
        metadata = {}
    if not isinstance(metadata, dict) or not all(isinstance(v, str) for v in metadata.values()):
        raise TraceError(f"{path}: corrupt safetensors metadata (__metadata__ must map strings to strings)")
    data_start = 8 + header_len
    entries = {check_name(path, name): _entry(path, name, spec, data_start) for name, spec in header.items()}
    _check_layout(path, entries, data_start, size)
    return metadata, entries


def _entry(path: Path, name: str, spec: object, data_start: int) -> Entry:
    if not isinstance(spec, dict) or set(spec) != _ENTRY_KEYS:
        raise TraceError(f"{path}: corrupt safetensors entry for {name!r} (an entry is exactly dtype, shape and "
                         f"data_offsets, not {short(spec)}); re-record it")
    dtype = check_dtype(path, name, spec["dtype"])
    shape = check_shape(path, name, spec["shape"])
    offsets = spec["data_offsets"]
    if (not isinstance(offsets, list) or len(offsets) != 2 or not all(type(o) is int for o in offsets)
            or not 0 <= offsets[0] <= offsets[1]):
        raise TraceError(f"{path}: tensor {name!r} has data_offsets {short(offsets)}, "
                         "not two integers [begin, end] with 0 <= begin <= end")
    begin, end = offsets
    expected = math.prod(shape) * STORAGE[dtype].itemsize
    if end - begin != expected:
        raise TraceError(f"{path}: tensor {name!r} has {end - begin} bytes of data for shape {list(shape)} "
                         f"{dtype} ({expected} expected); re-record it")
    return Entry(dtype, shape, data_start + begin, data_start + end)


def _check_layout(path: Path, entries: dict[str, Entry], data_start: int, size: int) -> None:
    at, previous = data_start, None
    for name, entry in sorted(entries.items(), key=lambda item: (item[1].begin, item[1].end)):
        if entry.end > size:
            raise TraceError(f"{path}: truncated: tensor {name!r} ends at byte {entry.end}, file has {size}; "
                             "re-record it")
        if entry.begin < at:
            raise TraceError(f"{path}: tensors {previous!r} and {name!r} overlap in the file; re-record it")
        if entry.begin > at:
            raise TraceError(f"{path}: {entry.begin - at} bytes before tensor {name!r} belong to no tensor; "
                             "re-record it")
        at, previous = entry.end, name
    if at != size:
        raise TraceError(f"{path}: {size - at} bytes after the last tensor belong to no tensor (trailing bytes, "
                         "or a header length that is off); re-record it")


class MappedFile:
    """A read-only memory map of a safetensors file, handing out zero-copy arrays."""

    def __init__(self, handle: BinaryIO, size: int) -> None:
        self._mmap: mmap.mmap | None = None
        if size:
            # mmap keeps its own descriptor: the caller may close ``handle``.
            self._mmap = mmap.mmap(handle.fileno(), 0, access=mmap.ACCESS_READ)
            if hasattr(mmap, "MADV_SEQUENTIAL"):
                self._mmap.madvise(mmap.MADV_SEQUENTIAL)

    def check_bools(self, path: Path, name: str, entry: Entry) -> None:
        """A BOOL tensor's bytes are 0 or 1: any other byte reads as true and would not survive a conversion."""
        if entry.dtype != "BOOL" or entry.end == entry.begin or self._mmap is None:
            return
        raw = np.frombuffer(self._mmap, dtype=np.uint8, count=entry.end - entry.begin, offset=entry.begin)
        bad = np.flatnonzero(raw > 1)
        if bad.size:
            raise TraceError(f"{path}: tensor {name!r} is BOOL but element {int(bad[0])} is the byte "
                             f"0x{int(raw[bad[0]]):02x} (a BOOL byte is 0 or 1); re-record it")

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


#: safetensors dtype -> the name `safetensors.serialize` takes for it.
_SPEC_NAMES = {"F64": "float64", "F32": "float32", "F16": "float16", "BF16": "bfloat16", "I64": "int64",
               "I32": "int32", "I16": "int16", "I8": "int8", "U64": "uint64", "U32": "uint32", "U16": "uint16",
               "U8": "uint8", "BOOL": "bool"}


def write(path: Path, tensors: dict[str, np.ndarray], metadata: dict[str, str]) -> None:
    """Write tensors (numpy, already in storage dtype, names checked) and string metadata atomically.

    Through `safetensors.serialize` with each tensor's safetensors dtype (`dtype_of`): `safetensors.numpy.save`
    names a dtype by numpy's name, so it would store BF16's raw words (`BF16_STORAGE`) as U16."""
    held = {}
    for name, array in tensors.items():
        dtype = dtype_of(array)
        data = np.ascontiguousarray(array).reshape(np.shape(array))  # a 0-d array stays 0-d
        if data.dtype.byteorder == ">":
            data = data.astype(data.dtype.newbyteorder("<"))
        held[name] = (dtype, data)
    specs = {name: TensorSpec(dtype=_SPEC_NAMES[dtype], shape=list(data.shape), data_ptr=data.ctypes.data,
                              data_len=data.nbytes) for name, (dtype, data) in held.items()}
    payload = bytes(serialize(specs, metadata=metadata))  # `held` keeps every pointer alive until here
    write_atomic(path, payload)


def is_safetensors(handle: BinaryIO) -> bool:
    """Sniff an open file: does it start like a safetensors file (u64 length, then '{')? Rewinds."""
    head = handle.read(9)
    handle.seek(0)
    return len(head) == 9 and head[8:9] == b"{"


__all__ = ["Entry", "MappedFile", "read_index", "write", "is_safetensors"]
