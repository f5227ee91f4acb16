"""Opening a user's input file: regular files only, never a blocking open nor an unbounded read.

A FIFO would block `open()` until some writer appears, `/dev/zero` never ends, a directory or a
device is not a file the user meant to give: each gets one line saying what it is.
"""

from __future__ import annotations

import contextlib
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import BinaryIO

from burnside.errors import BurnsideError

_KINDS = (
    (stat.S_ISDIR, "a directory"),
    (stat.S_ISFIFO, "a FIFO (named pipe)"),
    (stat.S_ISCHR, "a character device"),
    (stat.S_ISBLK, "a block device"),
    (stat.S_ISSOCK, "a socket"),
)


def file_kind(mode: int) -> str:
    """What a non-regular file is, in words ("a directory", "a FIFO (named pipe)", ...)."""
    return next((words for test, words in _KINDS if test(mode)), "not a regular file")


@contextlib.contextmanager
def open_input(path: Path, what: str, error: type[BurnsideError] = BurnsideError) -> Iterator[tuple[BinaryIO, int]]:
    """Open ``path`` for reading if it is a regular file: (binary handle, size in bytes).

    ``what`` names the expected input in messages ("a trace file"); ``error`` is the class raised.
    """
    try:
        # stat first: opening some devices has side effects, opening a FIFO blocks.
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise error(f"{path}: no such file") from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror})") from None
    if not stat.S_ISREG(mode):
        raise error(f"{path}: is {file_kind(mode)}, expected {what} (a regular file)")
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_NOCTTY | os.O_CLOEXEC)
    except PermissionError:
        raise error(f"{path}: permission denied") from None
    except OSError as exc:
        raise error(f"{path}: cannot read ({exc.strerror})") from None
    info = os.fstat(fd)
    if not stat.S_ISREG(info.st_mode):  # replaced between the stat and the open
        os.close(fd)
        raise error(f"{path}: is {file_kind(info.st_mode)}, expected {what} (a regular file)")
    with os.fdopen(fd, "rb") as handle:
        yield handle, info.st_size


def read_input(path: Path, what: str, limit: int, error: type[BurnsideError] = BurnsideError) -> bytes:
    """The whole content of a regular file of at most ``limit`` bytes."""
    with open_input(path, what, error) as (handle, size):
        if size > limit:
            raise error(f"{path}: is {size} bytes, more than the {limit} bytes {what} may have")
        try:
            data = handle.read(limit + 1)
        except OSError as exc:
            raise error(f"{path}: cannot read ({exc.strerror})") from None
    if len(data) > limit:  # grew while being read
        raise error(f"{path}: is more than the {limit} bytes {what} may have")
    return data


def decode_utf8(path: Path, data: bytes, what: str, error: type[BurnsideError] = BurnsideError) -> str:
    """``data`` as text, or one line saying where it stops being UTF-8."""
    try:
        return data.decode("utf-8")
    except UnicodeDecodeError as exc:
        raise error(f"{path}: is not UTF-8 (byte 0x{data[exc.start]:02x} at offset {exc.start}); "
                    f"{what} must be UTF-8 text") from None


__all__ = ["decode_utf8", "file_kind", "open_input", "read_input"]
