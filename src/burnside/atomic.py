"""Atomic file output: a reader never sees a half-written file, and only regular files are written.

A write that fails for want of room (a full disk, a quota, a file-size limit) is one line naming the
user's path, the bytes it needed and the room there was; the temporary file is removed.
"""

from __future__ import annotations

import contextlib
import errno
import os
import resource
import secrets
import shutil
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from burnside.errors import BurnsideError, stops_deferred
from burnside.input_file import file_kind


def _refuse_special(target: Path) -> int | None:
    """The permission bits of an existing regular ``target`` (None if absent); refuse anything else."""
    try:
        info = os.lstat(target)
    except FileNotFoundError:
        return None
    except OSError as exc:
        raise BurnsideError(f"{target}: cannot write here ({exc.strerror}); choose another output path") from None
    if stat.S_ISLNK(info.st_mode):
        raise BurnsideError(f"{target}: is a symbolic link; burnside writes only regular files "
                            "(give the link's target or another path)")
    if stat.S_ISDIR(info.st_mode):
        raise BurnsideError(f"{target}: is a directory; give a file path for the output")
    if not stat.S_ISREG(info.st_mode):
        raise BurnsideError(f"{target}: is {file_kind(info.st_mode)}; burnside writes only regular files "
                            "(choose another output path)")
    return stat.S_IMODE(info.st_mode)


#: The errors that mean "no room for this file": a full disk, a full quota, a file-size limit (EFBIG is
#: what a write past RLIMIT_FSIZE gets when SIGXFSZ is ignored, or past the file system's largest file).
NO_ROOM = frozenset({errno.ENOSPC, errno.EDQUOT, errno.EFBIG})


def _amount(n: int) -> str:
    if n < 1024:
        return f"{n} bytes"
    for unit, scale in (("GiB", 1 << 30), ("MiB", 1 << 20), ("KiB", 1 << 10)):
        if n >= scale:
            return f"{n} bytes ({n / scale:.1f} {unit})"
    raise AssertionError(n)  # pragma: no cover


def no_room_message(target: Path | str, exc: OSError, needed: int | None, written: int = 0,
                    outcome: str = "nothing was written", directory: Path | None = None) -> str:
    """The one line for a write of ``target`` that failed with ENOSPC, EDQUOT or EFBIG: the path, the
    bytes needed (``needed``, or more than the ``written`` ones when the size was not known) and the
    room there was (free space on the device holding ``directory``, by default the target's, or the
    file-size limit)."""
    need = _amount(needed) if needed is not None else f"more than {_amount(written)}"
    parent = directory or Path(target).parent
    if exc.errno == errno.EFBIG:
        limit = resource.getrlimit(resource.RLIMIT_FSIZE)[0]
        if limit != resource.RLIM_INFINITY:
            room = f"larger than the file-size limit (ulimit -f) of {_amount(limit)}: {need} to write"
        else:
            room = f"too large for the file system: {need} to write"
    else:
        try:
            free = f", {_amount(shutil.disk_usage(parent).free)} free"
        except OSError:
            free = ""
        what = "disk quota exceeded" if exc.errno == errno.EDQUOT else "no space left on the device"
        room = f"{what}: {need} to write{free}"
    return f"{target}: {room}; {outcome}"


def prepare_target(path: str | os.PathLike[str]) -> tuple[Path, Path, int | None]:
    """(target, its directory, the permission bits of the regular file there or None): an output path
    whose directory is missing, or which is a symbolic link, a directory, a FIFO or a device, is refused
    in one line before anything is written."""
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise BurnsideError(f"{target}: directory {parent} does not exist; create it or choose another output path")
    return target, parent, _refuse_special(target)


def refuse_special(target: Path) -> None:
    """Refuse a special file or link at ``target`` (one that appeared there while the output was written)."""
    _refuse_special(target)


def create_temporary(target: Path, parent: Path, size: int | None, suffix: str = "tmp",
                     tag: str = "") -> tuple[int, Path]:
    """A new file ``.{target name}.{tag}{random hex}.{suffix}`` in ``parent``, opened for reading and
    writing (a descriptor), mode 0666 minus the umask; no room for it is the one no-room line."""
    return _create_temporary(target, parent, size, suffix=suffix, tag=tag, flags=os.O_RDWR)


def _create_temporary(target: Path, parent: Path, size: int | None, suffix: str = "tmp", tag: str = "",
                      flags: int = os.O_WRONLY) -> tuple[int, Path]:
    # Created with mode 0666 like any new file, so the kernel applies the umask for us.
    flags |= os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = parent / f".{target.name}.{tag}{secrets.token_hex(6)}.{suffix}"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            if exc.errno in NO_ROOM:  # no room even for the directory entry (or an inode)
                raise BurnsideError(no_room_message(target, exc, size)) from None
            raise BurnsideError(f"{target}: cannot write here ({exc.strerror}); choose another output path") from None


def write_atomic(path: str | os.PathLike[str], data: bytes | str) -> Path:
    """Write ``data`` (text is written as UTF-8) to ``path`` through `atomic_output`, its size known
    up front so that a full disk says how much was needed."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    with atomic_output(path, "wb", size=len(payload)) as handle:
        handle.write(payload)
    return Path(path)


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], mode: str = "wb", *, size: int | None = None) -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success rename it over ``path``.

    ``path`` must be absent or a regular file: a symbolic link, a directory, a FIFO or a device
    is refused before anything is written (so `-o /dev/null` never replaces /dev/null). A new
    file gets the usual 0666 minus the umask; an existing file keeps its permission bits.
    On any exception the temporary file is removed and ``path`` is left as it was. ``size`` is how
    many bytes will be written, for the message when there is no room for them (ENOSPC, EDQUOT, EFBIG);
    without it the message says how many were written before the write failed.
    """
    target, parent, existing_mode = prepare_target(path)
    tmp = None
    try:
        # A stop just after the file is made would leave it behind, its name not yet in `tmp`.
        with stops_deferred():
            fd, tmp = _create_temporary(target, parent, size)
            handle = os.fdopen(fd, mode)
        with handle:
            if existing_mode is not None:
                os.fchmod(fd, existing_mode)
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        # A special file or link that appeared at the target meanwhile is refused, not replaced.
        _refuse_special(target)
        os.replace(tmp, target)
    except BaseException as exc:
        if tmp is None:  # nothing was made (a refusal, or a stop before the file)
            raise
        written = 0
        with contextlib.suppress(OSError):
            written = os.stat(tmp).st_size
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename in (None, str(tmp)) and exc.errno in NO_ROOM:
            raise BurnsideError(no_room_message(target, exc, size, written)) from None
        if isinstance(exc, OSError) and exc.filename in (None, str(tmp)):
            # Raised by the write itself (disk full, quota): name the user's path, not the temporary's.
            raise BurnsideError(f"{target}: cannot write ({exc.strerror or exc}); nothing was written") from None
        raise
