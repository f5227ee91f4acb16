"""`Trace`: one side's record of N training steps, read lazily from either file form."""

from __future__ import annotations

import json
import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import BinaryIO

import numpy as np

from burnside.errors import TraceError
from burnside.input_file import decode_utf8, open_input
from burnside.trace import json_file, safetensors_file
from burnside.trace.dtypes import as_bf16, bf16_to_f32, dtype_of
from burnside.trace.limits import MAX_JSON_BYTES, check_name, check_shape, short
from burnside import strict_json
from burnside.trace.metadata import (
    ALIASES_KEY,
    FORMAT_KEY,
    FORMAT_VERSION,
    STATISTICS_KEY,
    STATISTICS_VERSION,
    VERSION_KEY,
    VERSIONS,
    check_aliases,
    check_statistics,
    statistics_refusal,
)
from burnside.trace.metadata import check as check_metadata
from burnside.trace.metadata import decode as decode_metadata
from burnside.trace.metadata import encode as encode_metadata
from burnside.trace.metadata import trace_kind
from burnside.trace.names import order_key
from burnside.trace.statistics import Statistics, statistics_of


@dataclass(frozen=True)
class TensorInfo:
    """A tensor's dtype (safetensors name) and shape, known without reading its data."""

    dtype: str
    shape: tuple[int, ...]

    @property
    def n(self) -> int:
        """Number of elements."""
        return math.prod(self.shape)


class Trace:
    """A trace or init file. Tensor data is read on demand (memory-mapped for safetensors)."""

    def __init__(self, path: Path, metadata: dict, infos: dict[str, TensorInfo], source,
                 release=None, aliases: Mapping[str, str] | None = None,
                 statistics: Mapping[str, Statistics] | None = None) -> None:
        self.path = path
        #: Format version 2's aliases: name -> the tensor it is bit-identical to. Every other method presents
        #: an alias exactly as its target (`info`, `array`, `release`, `names`).
        self.aliases: dict[str, str] = dict(aliases or {})
        self._release = release
        self.metadata = metadata
        infos = {**infos, **{alias: infos[target] for alias, target in self.aliases.items()}}
        self._infos = infos
        self._source = source
        params = metadata.get("params") or []
        # Parameters rank in module order; buffers after them, activations in execution order (then the layer
        # inputs of modules with no activation recorded).
        order = [*params, *(metadata.get("buffers") or []), *(metadata.get("activations") or []),
                 *(metadata.get("layer_inputs") or [])]
        self._param_order = {p: i for i, p in enumerate(dict.fromkeys(order))}
        self.names: tuple[str, ...] = tuple(sorted(infos, key=lambda n: order_key(n, self._param_order)))
        #: Format version 3's statistics-only tensors, name -> `Statistics`, in pipeline order (as `names`).
        #: They have no data: they are not in `names`, ``name in trace`` is False, `info`/`array` do not know
        #: them. `statistics_of` gives the statistics of either kind of name.
        self.statistics: dict[str, Statistics] = {
            name: (statistics or {})[name]
            for name in sorted(statistics or {}, key=lambda n: order_key(n, self._param_order))}

    def __contains__(self, name: object) -> bool:
        return name in self._infos

    def info(self, name: str) -> TensorInfo:
        """dtype and shape of one tensor."""
        return self._infos[name]

    def array(self, name: str) -> np.ndarray:
        """The tensor's data in its storage dtype (BF16 as raw uint16 bits); read-only."""
        return self._source(self.aliases.get(name, name))

    def release(self, name: str) -> None:
        """Done with this tensor for now: let a memory-mapped file drop its pages from RSS."""
        if self._release is not None:
            self._release(self.aliases.get(name, name))

    def values(self, name: str) -> np.ndarray:
        """The tensor's values; BF16 widened to f32."""
        array = self.array(name)
        if self._infos[name].dtype == "BF16":
            return bf16_to_f32(array)
        return array

    @property
    def held_names(self) -> tuple[str, ...]:
        """Every name the trace holds, in full or as statistics only, in pipeline order (`names` without
        statistics)."""
        if not self.statistics:
            return self.names
        return tuple(sorted([*self.names, *self.statistics], key=lambda n: order_key(n, self._param_order)))

    def statistics_of(self, name: str) -> Statistics:
        """The statistics of a tensor recorded in full (computed from its data, in chunks, pages released after)
        or as statistics only (as recorded); KeyError for a name the trace has neither way."""
        if name in self.statistics:
            return self.statistics[name]
        info = self._infos[name]
        try:
            return statistics_of(self.array(name), info.dtype)
        finally:
            self.release(name)

    @property
    def steps(self) -> int:
        """Number of training steps recorded (of batches, in a forward trace)."""
        return int(self.metadata.get("steps", 0))

    @property
    def kind(self) -> str:
        """`training` (a training loop's steps) or `forward` (forward passes over batches, `record_forward`)."""
        return trace_kind(self.metadata)

    @property
    def framework(self) -> str:
        """`pytorch`, `burn`, or what the recorder said."""
        return str(self.metadata.get("framework", "unknown"))

    @property
    def optimizer(self) -> dict:
        """The optimizer configuration (may be empty for foreign files)."""
        value = self.metadata.get("optimizer") or {}
        return value if isinstance(value, dict) else {}

    @property
    def params(self) -> list[str]:
        """Parameter paths in module order."""
        return list(self.metadata.get("params") or [])


    def __repr__(self) -> str:
        stats = f", {len(self.statistics)} as statistics" if self.statistics else ""
        return f"Trace({str(self.path)!r}, {len(self._infos)} tensors{stats}, framework={self.framework!r})"


def open_trace(path: str | Path, kind: str = "trace") -> Trace:
    """Open a trace (or, with ``kind="init"``, an init file) in either form.

    Only a regular file is opened (a FIFO, a device or a directory is refused before any read).
    Raises TraceError with a one-line message for anything unusable.
    """
    path = Path(path)
    with open_input(path, f"a {kind} file", TraceError) as (handle, size):
        if path.suffix == ".json" or (path.suffix != ".safetensors" and not safetensors_file.is_safetensors(handle)):
            if size > MAX_JSON_BYTES:
                raise TraceError(f"{path}: a JSON trace of {size} bytes is more than the {MAX_JSON_BYTES} bytes "
                                 "allowed; keep large traces in safetensors")
            head = handle.read(MAX_JSON_BYTES + 1)
            if path.suffix != ".json" and not head.lstrip().startswith(b"{"):
                # neither form: a script or a checkpoint passed by mistake, not a corrupt trace
                raise TraceError(f"{path}: not a {kind} file (neither safetensors nor JSON); give the file "
                                 "burnside.torch.record wrote")
            text = decode_utf8(path, head, "a JSON trace", TraceError)
            return _open_json(path, kind, text)
        return _open_safetensors(path, kind, handle, size)


def _open_safetensors(path: Path, kind: str, handle: BinaryIO, size: int) -> Trace:
    raw, entries = safetensors_file.read_index(path, handle, size)
    version = _check_header(path, kind, raw.get(FORMAT_KEY), raw.get(VERSION_KEY))
    aliases = check_aliases(path, kind, version, raw.pop(ALIASES_KEY, None), entries)
    statistics = check_statistics(path, kind, version, _statistics_value(path, raw.pop(STATISTICS_KEY, None)),
                                  [*entries, *aliases], forward=raw.get("kind") == "forward")
    metadata = decode_metadata(path, raw)
    check_metadata(path, kind, metadata, [*entries, *aliases, *statistics])
    mapped = safetensors_file.MappedFile(handle, size)
    for name, entry in entries.items():
        mapped.check_bools(path, name, entry)
    infos = {name: TensorInfo(e.dtype, e.shape) for name, e in entries.items()}
    return Trace(path, metadata, infos, lambda name: mapped.array(entries[name]),
                 lambda name: mapped.release(entries[name]), aliases, statistics)


def _statistics_value(path: Path, value: str | None) -> object:
    """A safetensors file's metadata `statistics` (JSON text) parsed strictly; None if absent."""
    if value is None:
        return None
    try:
        return strict_json.loads(value)
    except ValueError as exc:
        raise TraceError(f"{path}: corrupt trace (metadata {STATISTICS_KEY!r} is not valid JSON: "
                         f"{strict_json.describe(exc)}); re-record it") from None


def _open_json(path: Path, kind: str, text: str) -> Trace:
    if kind != "trace":
        raise TraceError(f"{path}: {kind} files are safetensors only")
    metadata, tensors, version = json_file.read(path, text)
    metadata = dict(metadata)
    statistics = check_statistics(path, kind, version, metadata.pop(STATISTICS_KEY, None), tensors,
                                  forward=metadata.get("kind") == "forward")
    check_metadata(path, kind, metadata, [*tensors, *statistics])
    infos = {name: TensorInfo(dtype, tuple(a.shape)) for name, (dtype, a) in tensors.items()}
    arrays = {name: a for name, (_, a) in tensors.items()}
    for a in arrays.values():
        a.flags.writeable = False
    return Trace(path, metadata, infos, arrays.__getitem__, statistics=statistics)


def _check_header(path: Path, kind: str, fmt: str | None, version: str | None) -> int:
    """The file's format version, once its format and version are known ones."""
    if fmt is None:
        raise TraceError(f"{path}: not a burnside {kind} file (no {FORMAT_KEY} in its metadata); "
                         "record it with burnside.torch or the burnside-trace crate")
    if fmt != kind:
        shown = fmt if fmt in ("trace", "init") else short(fmt)
        raise TraceError(f"{path}: is a burnside {shown} file, expected a {kind} file")
    known = {str(v): v for v in VERSIONS if kind == "trace" or v == FORMAT_VERSION}
    if version not in known:
        values = [str(v) for v in known.values()]
        readable = values[0] if len(values) == 1 else f"versions {', '.join(values[:-1])} and {values[-1]}"
        readable = readable if len(values) > 1 else f"version {readable}"
        raise TraceError(f"{path}: trace format version {short(version)} is not supported "
                         f"(this burnside reads {readable}); upgrade burnside or re-record")
    return known[version]


def write_trace(path: str | Path, tensors: Mapping[str, np.ndarray], metadata: Mapping, kind: str = "trace",
                statistics: Mapping[str, Statistics] | None = None) -> Path:
    """Write numpy tensors + metadata as a trace; the suffix (.json/.safetensors) picks the form.

    ``statistics`` (name -> `Statistics`) are tensors recorded as statistics only: with any, the file is format
    version 3 (metadata `statistics`). The tensors, statistics and metadata are checked as a reader checks them
    first: burnside never writes a file it would refuse to read.
    """
    path = Path(path)
    arrays = {check_name(path, name): np.asarray(array) for name, array in tensors.items()}
    for name, array in arrays.items():
        try:
            dtype_of(array)
        except ValueError:
            raise TraceError(f"{path}: tensor {name!r} has dtype {array.dtype}, "
                             "which a trace cannot hold") from None
        check_shape(path, name, array.shape)
        if array.dtype == np.bool_ and array.size and np.ascontiguousarray(array).view(np.uint8).max() > 1:
            raise TraceError(f"{path}: tensor {name!r} is a bool array holding bytes other than 0 and 1")
    statistics = dict(statistics or {})
    check_statistics_entries(path, kind, statistics, arrays, forward=metadata.get("kind") == "forward")
    check_metadata(path, kind, metadata, [*arrays, *statistics])
    if path.suffix == ".json":
        if kind != "trace":
            raise TraceError(f"{path}: {kind} files are safetensors only; use a .safetensors suffix")
        typed = {name: (dtype_of(a), a) for name, a in arrays.items()}
        json_file.write(path, typed, dict(metadata), statistics)
    elif path.suffix == ".safetensors":
        encoded = encode_metadata(metadata, kind)
        if statistics:
            encoded[VERSION_KEY] = str(STATISTICS_VERSION)
            encoded[STATISTICS_KEY] = encode_statistics(statistics)
        safetensors_file.write(path, arrays, encoded)
    else:
        raise TraceError(f"{path}: unknown trace suffix {path.suffix!r}; use .safetensors or .json")
    return path


def convert_trace(src: str | Path, dst: str | Path) -> Path:
    """Rewrite a trace in the other form (by ``dst``'s suffix), bit for bit, NaN payloads included.

    Aliases (format version 2) are expanded: every name gets its own copy of the data, so the result is a
    version-1 file in either form. Statistics-only tensors (format version 3) are kept as they are: a trace
    with any stays version 3."""
    trace = open_trace(src)
    tensors = {name: _storage(trace.info(name).dtype, np.array(trace.array(name))) for name in trace.names}
    if Path(dst).suffix == ".json":
        typed = {name: (trace.info(name).dtype, a) for name, a in tensors.items()}
        json_file.write(Path(dst), typed, trace.metadata, trace.statistics)
        return Path(dst)
    return write_trace(dst, tensors, trace.metadata, statistics=trace.statistics)


def _storage(dtype: str, array: np.ndarray) -> np.ndarray:
    """``array`` of a tensor of safetensors ``dtype`` in its storage dtype (BF16's raw words marked as BF16)."""
    return as_bf16(array) if dtype == "BF16" else array


def check_statistics_entries(path: Path, kind: str, statistics: Mapping[str, Statistics], real: Iterable[str],
                             forward: bool | None = False) -> None:
    """A writer's check of the statistics-only tensors it is given: each a `Statistics` under a valid name no
    real tensor (or alias) has, and one that may be statistics in a trace of its kind (``forward``:
    `statistics_refusal`); TraceError otherwise."""
    if statistics and kind != "trace":
        raise TraceError(f"{path}: an {kind} file holds every tensor in full, never statistics")
    real = set(real)
    for name, stats in statistics.items():
        check_name(path, name)
        if not isinstance(stats, Statistics):
            raise TraceError(f"{path}: statistics of {name!r} must be a Statistics, not {type(stats).__name__}")
        if name in real:
            raise TraceError(f"{path}: tensor {name!r} is recorded twice (in full and as statistics); each name "
                             "is written once")
        why = statistics_refusal(name, stats.dtype, stats.shape, forward)
        if why is not None:
            raise TraceError(f"{path}: tensor {name!r} cannot be recorded as statistics: {why}")


def encode_statistics(statistics: Mapping[str, Statistics]) -> str:
    """Metadata `statistics` in its safetensors form: JSON text."""
    return json.dumps({name: stats.to_json() for name, stats in statistics.items()}, allow_nan=False)
