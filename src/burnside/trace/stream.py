"""`TraceWriter`: a safetensors trace written tensor by tensor, as a recorder records them.

Memory stays bounded by one tensor plus the small ones held for alignment, whatever the size of
the trace. The file is an ordinary safetensors file (docs/trace-format.md, "safetensors layout"):

- it is written to ``.{name}.{pid}.{random hex}.partial`` beside the output and renamed over the
  output only once complete and fsynced; leaving the writer without `TraceWriter.finish` (an error,
  an exception, KeyboardInterrupt, the writer dropped) removes it, so the output path never holds a
  partial trace and a previous file there stays as it was;
- the header's room is reserved up front (``65536 + 192`` bytes per expected tensor, plus the
  metadata's estimate, rounded up to 8) and the data written after it; at `finish` the header is
  written into its room, padded with spaces. A header larger than its room is not an error: the
  data is copied behind the exact header into a second temporary file, which is renamed instead;
- a tensor that keeps the data 8-byte aligned is written at once; a small one (< 64 KiB: a scalar,
  a step counter, a loss) that would not is held and written at `finish`, widest dtype first, so
  the large f64 tensors of a float64 reference stay aligned. At most 16 MiB are held; beyond that a
  tensor is written at once, aligned or not (numpy reads unaligned data correctly, only slower);
- `TraceWriter.alias` records a tensor bit-identical to one already added as a name in the metadata
  ``aliases`` (format version 2), with no data of its own;
- `TraceWriter.add_statistics` records a tensor as its statistics only (`burnside.trace.statistics`), an entry
  of the metadata ``statistics`` (format version 3), with no data of its own.
"""

from __future__ import annotations

import contextlib
import ctypes
import json
import os
import struct
from collections.abc import Mapping
from pathlib import Path

import numpy as np

from burnside.atomic import NO_ROOM, create_temporary, no_room_message, prepare_target, refuse_special
from burnside.errors import BurnsideError, TraceError, stops_deferred
from burnside.trace.dtypes import dtype_of
from burnside.trace.limits import MAX_HEADER_BYTES, check_name, check_shape
from burnside.trace.metadata import (
    ALIAS_VERSION,
    ALIASES_KEY,
    STATISTICS_KEY,
    STATISTICS_VERSION,
    VERSION_KEY,
    statistics_refusal,
)
from burnside.trace.metadata import check as check_metadata
from burnside.trace.metadata import encode as encode_metadata
from burnside.trace.statistics import Statistics

#: Header room reserved per expected tensor (an entry: its name, dtype, shape and offsets) and in all.
ENTRY_RESERVE = 192
BASE_RESERVE = 65536
#: A tensor smaller than this that would break the data's 8-byte alignment is held until `finish`.
SMALL = 64 * 1024
#: The most bytes held at once.
HELD_BOUND = 16 * 1024 * 1024
_BUFFER = 1 << 20
#: Every this many bytes written, the disk is told to start writing them out (`_start_writeback`).
WRITEBACK_EVERY = 64 << 20


def round_up_8(n: int) -> int:
    return n + (-n % 8)


def header_reserve(expected_tensors: int, metadata_estimate: int = 0) -> int:
    """The header room a writer reserves for ``expected_tensors`` tensors and metadata of about
    ``metadata_estimate`` bytes."""
    return round_up_8(BASE_RESERVE + ENTRY_RESERVE * max(expected_tensors, 0) + max(metadata_estimate, 0))


class TraceWriter:
    """Stream a `.safetensors` trace (or, with ``kind="init"``, an init file) to ``path``.

        with TraceWriter(path, expected_tensors=steps * per_step) as writer:
            writer.add("step0.loss", loss)
            ...
            writer.finish(metadata)

    ``add`` checks each tensor as `write_trace` does (name, dtype, shape, bool bytes; a name given
    twice is a TraceError); ``finish`` checks the metadata against every name, aliases included, before
    anything is renamed. No room (a full disk, a quota, a file-size limit) is one line naming the output
    and the bytes written so far (or, when it happens at `finish`, the file's whole size); the temporary
    file is removed.
    """

    def __init__(self, path: str | os.PathLike[str], *, kind: str = "trace", expected_tensors: int = 0,
                 metadata_estimate: int = 0, forward: bool = False) -> None:
        self.path = Path(path)
        self.kind = kind
        self.forward = forward  # a forward trace's statistics rules (`statistics_refusal`), checked again at finish
        if self.path.suffix != ".safetensors":
            raise TraceError(f"{self.path}: a streamed trace is a .safetensors file, "
                             f"not {self.path.suffix or 'a file without suffix'}")
        self._entries: dict[str, tuple[str, tuple[int, ...], int, int]] = {}
        self._aliases: dict[str, str] = {}
        self._statistics: dict[str, Statistics] = {}
        self._held: list[tuple[str, str, tuple[int, ...], int, np.ndarray]] = []
        self._held_bytes = 0
        self._offset = 0  # bytes of data written so far
        self._written_back = 0  # bytes of the file the disk was told to write out (`_start_writeback`)
        self._done = False
        self._needed: int | None = None  # the file's size, once known (at finish)
        self._fd: int | None = None
        self._file = None
        self._tmp: Path | None = None
        self._second: Path | None = None  # the file `_rewrite` makes, when the header outgrew its room
        target, parent, mode = prepare_target(self.path)
        self._parent = parent
        self._mode = mode
        self._reserve = header_reserve(expected_tensors, metadata_estimate)
        try:
            with stops_deferred():  # a stop just after the file is made must find it in `_tmp` to remove it
                fd, self._tmp = create_temporary(target, parent, None, suffix="partial", tag=f"{os.getpid()}.")
                self._fd = fd
            if mode is not None:
                os.fchmod(fd, mode)
            self._file = open(fd, "wb", buffering=_BUFFER, closefd=False)  # noqa: SIM115 (closed by close)
            self._file.seek(8 + self._reserve)
        except BaseException as exc:
            self._fail(exc)

    # -- the context manager: leaving without finish removes the temporary file

    def __enter__(self) -> TraceWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        if not self._done:
            self.abort()

    def __del__(self) -> None:
        if not getattr(self, "_done", True):
            self.abort()

    @property
    def written(self) -> int:
        """Bytes written to the file so far (the reserved header room included)."""
        return 8 + self._reserve + self._offset

    def add(self, name: str, array: np.ndarray) -> None:
        """Write one tensor (a numpy array in its storage dtype), or hold it if small and unaligned."""
        self._check_open()
        name = check_name(self.path, name)
        if name in self._entries or name in self._aliases or name in self._statistics:
            raise TraceError(f"{self.path}: tensor {name!r} is recorded twice; each name is written once")
        array = np.asarray(array)
        try:
            dtype = dtype_of(array)
        except ValueError:
            raise TraceError(f"{self.path}: tensor {name!r} has dtype {array.dtype}, "
                             "which a trace cannot hold") from None
        shape = check_shape(self.path, name, tuple(array.shape))
        if array.dtype.byteorder == ">":
            array = array.astype(array.dtype.newbyteorder("<"))
        flat = np.ascontiguousarray(array).reshape(-1).view(np.uint8)
        if array.dtype == np.bool_ and flat.size and flat.max() > 1:
            raise TraceError(f"{self.path}: tensor {name!r} is a bool array holding bytes other than 0 and 1")
        size = flat.size
        aligned = self._offset % 8 == 0 and size % 8 == 0
        if not aligned and size < SMALL and self._held_bytes + size <= HELD_BOUND:
            self._held.append((name, dtype, shape, array.dtype.itemsize, flat.copy()))
            self._held_bytes += size
            self._entries[name] = (dtype, shape, -1, -1)  # placed at finish
            return
        self._write(name, dtype, shape, flat)

    def alias(self, name: str, target: str) -> None:
        """Record ``name`` as bit-identical to ``target``, a tensor already added (not an alias)."""
        self._check_open()
        name = check_name(self.path, name)
        if name in self._entries or name in self._aliases or name in self._statistics:
            raise TraceError(f"{self.path}: tensor {name!r} is recorded twice; each name is written once")
        if target not in self._entries:
            what = "another alias" if target in self._aliases else "not a tensor added before it"
            raise TraceError(f"{self.path}: alias {name!r} points to {target!r}, {what}; an alias names a tensor "
                             "already written")
        self._aliases[name] = target

    def add_statistics(self, name: str, stats: Statistics) -> None:
        """Record the tensor ``name`` as its statistics only (no data): an entry of metadata ``statistics``, and
        the file becomes format version 3. Refused as the reader would refuse it: a name recorded before, an
        input, ``step0.params_before.*``, a 0-d scalar, an integer or bool tensor."""
        self._check_open()
        name = check_name(self.path, name)
        _check_statistics_entry(self.path, self.kind, self.forward, name, stats,
                                name in self._entries or name in self._aliases or name in self._statistics)
        self._statistics[name] = stats

    def finish(self, metadata: Mapping) -> Path:
        """Check ``metadata`` against every name, write the held tensors and the header, fsync, rename
        the file over the output; returns the output path."""
        self._check_open()
        try:
            names = [*self._entries, *self._aliases, *self._statistics]
            check_metadata(self.path, self.kind, metadata, names)
            forward = metadata.get("kind") == "forward"
            for name, stats in self._statistics.items():  # the rules of the trace's kind, known now
                why = statistics_refusal(name, stats.dtype, stats.shape, forward)
                if why is not None:
                    raise TraceError(f"{self.path}: tensor {name!r} cannot be recorded as statistics: {why}")
            self._needed = 8 + self._reserve + self._offset + self._held_bytes
            encoded = encode_metadata(metadata, self.kind)
            if self._aliases:
                encoded[VERSION_KEY] = str(ALIAS_VERSION)
                encoded[ALIASES_KEY] = json.dumps(self._aliases)
            if self._statistics:
                encoded[VERSION_KEY] = str(STATISTICS_VERSION)
                encoded[STATISTICS_KEY] = json.dumps({n: st.to_json() for n, st in self._statistics.items()},
                                                     allow_nan=False)
            # widest dtype first: the f64 scalars before the f32 ones before the bytes
            for name, dtype, shape, _, flat in sorted(self._held, key=lambda h: -h[3]):
                self._write(name, dtype, shape, flat)
            self._held, self._held_bytes = [], 0
            header = self._header(encoded)
            if len(header) > self._reserve:
                self._needed = 8 + len(header) + self._offset
            self._file.flush()
            if len(header) <= self._reserve:
                final = self._tmp
                header += b" " * (self._reserve - len(header))
                os.pwrite(self._fd, struct.pack("<Q", len(header)) + header, 0)
                os.fsync(self._fd)
            else:
                final = self._rewrite(header)
            refuse_special(self.path)  # a link or special file that appeared there meanwhile is refused
            os.replace(final, self.path)
        except BaseException as exc:
            self._fail(exc)
        if final != self._tmp:
            with contextlib.suppress(FileNotFoundError):
                os.unlink(self._tmp)
        self._close()
        self._done = True
        return self.path

    def abort(self) -> None:
        """Remove the temporary file; the output path is left as it was."""
        self._done = True
        self._close()
        for tmp in (self._tmp, self._second):
            if tmp is not None:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(tmp)

    # -- internals

    def _check_open(self) -> None:
        if self._done:
            raise TraceError(f"{self.path}: the trace writer is finished or was abandoned; start a new one")

    def _write(self, name: str, dtype: str, shape: tuple[int, ...], flat: np.ndarray) -> None:
        try:
            if flat.size:
                self._file.write(flat)
        except BaseException as exc:
            self._fail(exc)
        self._entries[name] = (dtype, shape, self._offset, self._offset + flat.size)
        self._offset += flat.size
        if self.written - self._written_back >= WRITEBACK_EVERY:
            self._start_writeback()

    def _start_writeback(self) -> None:
        """Have the kernel start writing what was written so far to the disk, without waiting and without
        dropping it from the page cache, so that the disk works while the model computes and `finish`'s
        fsync has little left to wait for (a GPT-2-sized forward trace, 778 MiB: 0.24-0.58 s less in three
        pairs of runs). Dropping the pages as well was measured and not kept: compare then read the trace back
        from the disk, slower overall. Linux only; elsewhere, or on a file system that refuses it,
        nothing is done and the fsync at `finish` writes it all."""
        end = self.written
        try:
            self._file.flush()
        except BaseException as exc:
            self._fail(exc)
        if _sync_file_range is not None and _sync_file_range(self._fd, self._written_back,
                                                              end - self._written_back, _SYNC_FILE_RANGE_WRITE):
            self._written_back = 1 << 62  # refused once (EINVAL, ESPIPE): never asked again for this file
            return
        self._written_back = end

    def _header(self, encoded: dict[str, str]) -> bytes:
        header: dict[str, object] = {"__metadata__": encoded}
        for name, (dtype, shape, begin, end) in self._entries.items():
            header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [begin, end]}
        raw = json.dumps(header, separators=(",", ":")).encode("utf-8")
        raw += b" " * (-len(raw) % 8)
        if len(raw) > MAX_HEADER_BYTES:
            raise TraceError(f"{self.path}: the trace's header would be {len(raw)} bytes, more than the "
                             f"{MAX_HEADER_BYTES} bytes a reader allows; record fewer steps or tensors")
        return raw

    def _rewrite(self, header: bytes) -> Path:
        """The slow path: a second temporary file with the exact header, the data copied behind it."""
        fd = None
        try:
            with stops_deferred():  # as in __init__: the new file is in `_second`, which abort removes
                fd, self._second = create_temporary(self.path, self._parent, None, suffix="partial",
                                                    tag=f"{os.getpid()}.")
            if self._mode is not None:
                os.fchmod(fd, self._mode)
            head = struct.pack("<Q", len(header)) + header
            _write_all(fd, head)
            start, left, at = 8 + self._reserve, self._offset, len(head)
            while left:
                try:
                    n = os.copy_file_range(self._fd, fd, left, start, at)
                except OSError as exc:
                    if exc.errno in NO_ROOM:
                        raise
                    n = _copy_chunk(self._fd, fd, min(left, 1 << 24), start, at)
                if n == 0:
                    raise OSError(f"{self._tmp} ended {left} bytes early while copying it")
                start, at, left = start + n, at + n, left - n
            os.fsync(fd)
        finally:
            if fd is not None:
                os.close(fd)
        return self._second

    def _close(self) -> None:
        if self._file is not None:
            with contextlib.suppress(OSError, ValueError):
                self._file.close()  # flushes; an error here is moot once the file is abandoned
            self._file = None
        if self._fd is not None:
            with contextlib.suppress(OSError):
                os.close(self._fd)
            self._fd = None

    def _fail(self, exc: BaseException) -> None:
        """Abandon the file and raise: no room or another write error as one line, anything else as it was."""
        written, needed = self.written, self._needed
        self.abort()
        if isinstance(exc, OSError) and not isinstance(exc, BurnsideError):
            if exc.errno in NO_ROOM:
                raise TraceError(no_room_message(self.path, exc, needed, written)) from None
            raise TraceError(f"{self.path}: cannot write ({exc.strerror or exc}); nothing was written") from None
        raise exc


def _libc_sync_file_range():
    """libc's ``sync_file_range`` (Linux; the os module has none), or None where it does not exist."""
    try:
        function = ctypes.CDLL(None, use_errno=True).sync_file_range
    except (OSError, AttributeError):
        return None
    function.argtypes = [ctypes.c_int, ctypes.c_int64, ctypes.c_int64, ctypes.c_uint]
    function.restype = ctypes.c_int
    return function


_sync_file_range = _libc_sync_file_range()
_SYNC_FILE_RANGE_WRITE = 2  # linux/fs.h: start writing out dirty pages of the range, do not wait


def _write_all(fd: int, data: bytes) -> None:
    view = memoryview(data)
    while view:
        view = view[os.write(fd, view):]


def _copy_chunk(src: int, dst: int, n: int, src_at: int, dst_at: int) -> int:
    data = os.pread(src, n, src_at)
    _write_all_at(dst, data, dst_at)
    return len(data)


def _write_all_at(fd: int, data: bytes, at: int) -> None:
    view = memoryview(data)
    while view:
        n = os.pwrite(fd, view, at)
        view, at = view[n:], at + n





class MemoryWriter:
    """`TraceWriter`'s interface for a `.json` trace: the tensors are kept (copied) and written by
    `write_trace` at `finish`, aliases expanded (the JSON form has none). For small traces."""

    def __init__(self, path: str | os.PathLike[str], *, kind: str = "trace", forward: bool = False) -> None:
        self.path, self.kind, self.forward = Path(path), kind, forward
        self._tensors: dict[str, np.ndarray] = {}
        self._aliases: dict[str, str] = {}
        self._statistics: dict[str, Statistics] = {}

    def __enter__(self) -> MemoryWriter:
        return self

    def __exit__(self, *exc_info) -> None:
        self._tensors.clear()

    def add(self, name: str, array: np.ndarray) -> None:
        if name in self._tensors or name in self._aliases or name in self._statistics:
            raise TraceError(f"{self.path}: tensor {name!r} is recorded twice; each name is written once")
        self._tensors[name] = np.array(array)  # a copy: the caller may hand a view of a live tensor

    def add_statistics(self, name: str, stats: Statistics) -> None:
        """As `TraceWriter.add_statistics`: the JSON trace becomes version 3, with metadata ``statistics``."""
        name = check_name(self.path, name)
        _check_statistics_entry(self.path, self.kind, self.forward, name, stats,
                                name in self._tensors or name in self._aliases or name in self._statistics)
        self._statistics[name] = stats

    def alias(self, name: str, target: str) -> None:
        if name in self._tensors or name in self._aliases or name in self._statistics:
            raise TraceError(f"{self.path}: tensor {name!r} is recorded twice; each name is written once")
        if target not in self._tensors:
            raise TraceError(f"{self.path}: alias {name!r} points to {target!r}, not a tensor added before it")
        self._aliases[name] = target

    def finish(self, metadata: Mapping) -> Path:
        from burnside.trace.trace import write_trace

        tensors = {**self._tensors, **{a: self._tensors[t] for a, t in self._aliases.items()}}
        return write_trace(self.path, tensors, metadata, kind=self.kind, statistics=self._statistics)


def _check_statistics_entry(path: Path, kind: str, forward: bool, name: str, stats: object, recorded: bool) -> None:
    if recorded:
        raise TraceError(f"{path}: tensor {name!r} is recorded twice; each name is written once")
    if kind != "trace":
        raise TraceError(f"{path}: an {kind} file holds every tensor in full, never statistics")
    if not isinstance(stats, Statistics):
        raise TraceError(f"{path}: statistics of {name!r} must be a Statistics, not {type(stats).__name__}")
    why = statistics_refusal(name, stats.dtype, stats.shape, forward)
    if why is not None:
        raise TraceError(f"{path}: tensor {name!r} cannot be recorded as statistics: {why}")


def open_writer(path: str | os.PathLike[str], *, kind: str = "trace", expected_tensors: int = 0,
                metadata_estimate: int = 0, forward: bool = False) -> TraceWriter | MemoryWriter:
    """The writer for ``path`` by its suffix: `TraceWriter` for `.safetensors` (streamed), `MemoryWriter`
    for `.json`; another suffix is refused before anything is recorded. ``forward``: a forward trace's (its
    parameters may be statistics)."""
    path = Path(path)
    if path.suffix == ".safetensors":
        return TraceWriter(path, kind=kind, expected_tensors=expected_tensors, metadata_estimate=metadata_estimate,
                           forward=forward)
    if path.suffix == ".json":
        if kind != "trace":
            raise TraceError(f"{path}: {kind} files are safetensors only; use a .safetensors suffix")
        prepare_target(path)
        return MemoryWriter(path, kind=kind, forward=forward)
    raise TraceError(f"{path}: unknown trace suffix {path.suffix!r}; use .safetensors or .json")

__all__ = ["BASE_RESERVE", "ENTRY_RESERVE", "HELD_BOUND", "SMALL", "MemoryWriter", "TraceWriter", "header_reserve",
           "open_writer"]
