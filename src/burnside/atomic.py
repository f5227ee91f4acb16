"""Atomic file output: a reader never sees a half-written file, and only regular files are written."""

from __future__ import annotations

import contextlib
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from burnside.errors import BurnsideError
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


def _create_temporary(target: Path, parent: Path) -> tuple[int, Path]:
    # Created with mode 0666 like any new file, so the kernel applies the umask for us.
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
    while True:
        tmp = parent / f".{target.name}.{secrets.token_hex(6)}.tmp"
        try:
            return os.open(tmp, flags, 0o666), tmp
        except FileExistsError:
            continue
        except OSError as exc:
            raise BurnsideError(f"{target}: cannot write here ({exc.strerror}); choose another output path") from None


@contextlib.contextmanager
def atomic_output(path: str | os.PathLike[str], mode: str = "wb") -> Iterator[IO]:
    """Open a temporary file beside ``path``; on success rename it over ``path``.

    ``path`` must be absent or a regular file: a symbolic link, a directory, a FIFO or a device
    is refused before anything is written (so `-o /dev/null` never replaces /dev/null). A new
    file gets the usual 0666 minus the umask; an existing file keeps its permission bits.
    On any exception the temporary file is removed and ``path`` is left as it was.
    """
    target = Path(path)
    parent = target.parent if str(target.parent) else Path(".")
    if not parent.is_dir():
        raise BurnsideError(f"{target}: directory {parent} does not exist; create it or choose another output path")
    existing_mode = _refuse_special(target)
    fd, tmp = _create_temporary(target, parent)
    try:
        if existing_mode is not None:
            os.fchmod(fd, existing_mode)
        with os.fdopen(fd, mode) as handle:
            yield handle
            handle.flush()
            os.fsync(handle.fileno())
        # A special file or link that appeared at the target meanwhile is refused, not replaced.
        _refuse_special(target)
        os.replace(tmp, target)
    except BaseException as exc:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(tmp)
        if isinstance(exc, OSError) and exc.filename in (None, str(tmp)):
            # Raised by the write itself (disk full, quota): name the user's path, not the temporary's.
            raise BurnsideError(f"{target}: cannot write ({exc.strerror or exc}); nothing was written") from None
        raise
