"""atomic_output writes regular files only, respects the umask, and names the user's path."""

from __future__ import annotations

import errno
import os
import socket
import stat
import threading

import pytest

from burnside.atomic import atomic_output
from burnside.errors import BurnsideError
from burnside.trace import convert_trace, write_trace
from tests.core.conftest import run_cli

from .conftest import tiny_metadata, tiny_tensors


def _write(path, text: str = "new") -> None:
    with atomic_output(path, "w") as handle:
        handle.write(text)


def _leftovers(directory) -> list[str]:
    return sorted(p.name for p in directory.iterdir() if p.name.endswith(".tmp"))


def test_a_fifo_destination_is_refused_not_replaced_and_nothing_blocks(tmp_path):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    done = threading.Event()

    def attempt():
        with pytest.raises(BurnsideError, match="out.json: is a FIFO \\(named pipe\\); burnside writes only regular"):
            _write(fifo)
        done.set()

    worker = threading.Thread(target=attempt, daemon=True)
    worker.start()
    worker.join(30)
    assert done.is_set(), "writing to a FIFO blocked"
    assert stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert _leftovers(tmp_path) == []


def test_a_symlink_destination_is_refused_and_its_target_untouched(tmp_path):
    target = tmp_path / "real.json"
    target.write_text("keep")
    link = tmp_path / "link.json"
    link.symlink_to(target)
    with pytest.raises(BurnsideError, match="link.json: is a symbolic link; burnside writes only regular files"):
        _write(link)
    assert link.is_symlink() and target.read_text() == "keep"
    dangling = tmp_path / "dangling.json"
    dangling.symlink_to(tmp_path / "nowhere")
    with pytest.raises(BurnsideError, match="is a symbolic link"):
        _write(dangling)
    assert not (tmp_path / "nowhere").exists()


def test_dev_null_is_never_replaced():
    before = os.lstat("/dev/null")
    with pytest.raises(BurnsideError, match="/dev/null: is a character device; burnside writes only regular files"):
        _write("/dev/null")
    after = os.lstat("/dev/null")
    assert stat.S_ISCHR(after.st_mode) and after.st_ino == before.st_ino and after.st_rdev == before.st_rdev


def test_a_socket_destination_is_refused(tmp_path):
    path = tmp_path / "s.sock"
    server = socket.socket(socket.AF_UNIX)
    try:
        server.bind(str(path))
        with pytest.raises(BurnsideError, match="is a socket"):
            _write(path)
    finally:
        server.close()


def test_a_directory_destination_is_named_by_the_users_path(tmp_path):
    (tmp_path / "out.json").mkdir()
    with pytest.raises(BurnsideError) as info:
        _write(tmp_path / "out.json")
    assert str(info.value) == f"{tmp_path / 'out.json'}: is a directory; give a file path for the output"
    assert ".tmp" not in str(info.value) and _leftovers(tmp_path) == []


@pytest.mark.parametrize(("umask", "mode"), [(0o022, 0o644), (0o077, 0o600), (0o002, 0o664)])
def test_a_new_file_gets_0666_minus_the_umask(tmp_path, umask, mode):
    old = os.umask(umask)
    try:
        path = write_trace(tmp_path / "t.json", tiny_tensors(), tiny_metadata())
        converted = convert_trace(path, tmp_path / "t.safetensors")
    finally:
        os.umask(old)
    assert stat.S_IMODE(os.stat(path).st_mode) == mode
    assert stat.S_IMODE(os.stat(converted).st_mode) == mode


def test_an_existing_file_keeps_its_mode(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("old")
    path.chmod(0o640)
    old = os.umask(0o077)
    try:
        _write(path)
    finally:
        os.umask(old)
    assert path.read_text() == "new" and stat.S_IMODE(os.stat(path).st_mode) == 0o640


def test_a_failed_write_names_the_users_path_and_leaves_the_old_file(tmp_path):
    path = tmp_path / "t.json"
    path.write_text("old")
    with pytest.raises(BurnsideError) as info, atomic_output(path, "w") as handle:
        handle.write("half")
        raise OSError(errno.EIO, os.strerror(errno.EIO))
    assert str(info.value) == f"{path}: cannot write (Input/output error); nothing was written"
    assert path.read_text() == "old" and _leftovers(tmp_path) == []
    # No room (tests/hostile/test_full_disk.py has the real ones): the bytes needed and the room there is.
    with pytest.raises(BurnsideError) as info, atomic_output(path, "w", size=4) as handle:
        handle.write("half")
        raise OSError(errno.ENOSPC, os.strerror(errno.ENOSPC))
    assert str(info.value).startswith(f"{path}: no space left on the device: 4 bytes to write, ")
    assert str(info.value).endswith(" free; nothing was written")
    assert path.read_text() == "old" and _leftovers(tmp_path) == []


def test_a_missing_directory_and_an_unwritable_one(tmp_path):
    with pytest.raises(BurnsideError, match="directory .*missing does not exist"):
        _write(tmp_path / "missing" / "t.json")
    assert not (tmp_path / "missing").exists()
    if os.geteuid() != 0:  # root writes anywhere
        locked = tmp_path / "locked"
        locked.mkdir(mode=0o500)
        with pytest.raises(BurnsideError, match="locked/t.json: cannot write here \\(Permission denied\\)"):
            _write(locked / "t.json")


def test_the_cli_refuses_dev_null_a_fifo_a_link_and_a_directory_as_convert_output(tmp_path, st_path):
    fifo = tmp_path / "out.json"
    os.mkfifo(fifo)
    (tmp_path / "dir.json").mkdir()
    link = tmp_path / "null.json"
    link.symlink_to("/dev/null")
    for dst, what in (("/dev/null", "unknown trace suffix"), (str(link), "is a symbolic link"),
                      (str(fifo), "is a FIFO")):
        proc = run_cli("convert", str(st_path), dst)
        lines = [line for line in proc.stderr.splitlines() if line.strip()]
        assert proc.returncode == 2 and len(lines) == 1, (dst, proc.stderr)
        assert lines[0].startswith(f"error: {dst}: {what}") and ".tmp" not in lines[0], lines[0]
    # a directory is refused by the option's own check: click's usage error, exit 2
    proc = run_cli("convert", str(st_path), str(tmp_path / "dir.json"))
    assert proc.returncode == 2 and proc.stderr.rstrip().endswith(f"File '{tmp_path / 'dir.json'}' is a directory.")
    assert "Traceback" not in proc.stderr
    assert stat.S_ISCHR(os.lstat("/dev/null").st_mode) and stat.S_ISFIFO(os.lstat(fifo).st_mode)
    assert link.is_symlink() and _leftovers(tmp_path) == []
