"""Every way a burn program can end is one line naming it, and the program's half-written output
is removed whatever ended it: real runs of `endings` (rust/pitb-opt/src/bin/endings.rs)."""

from __future__ import annotations

import os
import resource
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from burnside.burn.binary import expect_panic, run_binary
from burnside.burn.locate import rust_workspace
from burnside.errors import RunError
from tests.signals import default_sigint, python_sigint


@pytest.fixture(scope="module")
def endings(programs) -> Path:
    return programs.executables["endings"]


def ended(binary: Path, *args: str, **kwargs) -> str:
    with pytest.raises(RunError) as caught:
        run_binary(binary, list(args), **kwargs)
    return str(caught.value)


def test_a_non_zero_exit_is_named_with_its_status_and_last_line(endings):
    assert ended(endings, "exit") == "endings exited with status 3: endings: told to fail with status 3"


def test_a_panic_in_the_ports_own_code_says_so_with_its_place(endings):
    source = (rust_workspace() / "pitb-opt/src/bin/endings.rs").read_text().splitlines()
    line = next(i for i, text in enumerate(source, 1) if 'panic!("endings: the port' in text)
    assert ended(endings, "panic") == (f"endings panicked in its own code at pitb-opt/src/bin/endings.rs:{line}:9: "
                                       "endings: the port's own check failed (2 < 10)")


@pytest.mark.parametrize("backtrace", ["0", "1", "full"])
def test_a_panic_inside_burn_names_burn_and_the_ports_frame_that_called_it(endings, monkeypatch, backtrace):
    monkeypatch.setenv("RUST_BACKTRACE", backtrace)  # whatever the user has set, burnside asks for frames
    message = ended(endings, "burn-panic")
    assert message.startswith("endings panicked inside burn at burn-tensor-0.22.1/src/tensor/api/numeric.rs:")
    assert ", called from the port's endings::burn_panic: === Tensor Operation Error === Operation: 'Matmul'" in message
    assert "The inner dimension of matmul should be the same, but got 3 and 4." in message
    assert "\n" not in message and "stack backtrace" not in message


def test_an_abort_is_a_crash_named_by_its_signal_with_the_last_words(endings):
    assert ended(endings, "abort") == ("endings crashed with SIGABRT (it aborted: a failed allocation, a panic while "
                                       "panicking or an explicit abort); its last words: endings: aborting")


def test_a_segfault_is_a_crash_named_by_its_signal(endings):
    assert ended(endings, "segv") == ("endings crashed with SIGSEGV (a segmentation fault: an invalid memory access "
                                      "in native or unsafe code, or a stack overflow)")


def test_a_program_expected_to_panic_that_crashes_says_how_it_ended(endings):
    with pytest.raises(RunError, match=r"^endings was expected to panic but crashed with SIGSEGV \(a segmentation"):
        expect_panic(endings, ["segv"])


def _sleeping(binary: Path, out: Path, act, **kwargs) -> tuple[str, int]:
    """Run `endings sleep -o OUT` to its end; ``act(pid)`` once its temporary file is there.
    The RunError's message and the program's pid."""
    found: dict[str, int] = {}

    def watch() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            temps = list(out.parent.glob(f".{out.name}.*.tmp"))
            if temps:
                found["pid"] = int(temps[0].name.split(".")[-2])
                act(found["pid"])
                return
            time.sleep(0.02)

    watcher = threading.Thread(target=watch)
    watcher.start()
    try:
        message = ended(binary, "sleep", "-o", str(out), **kwargs)
    finally:
        watcher.join()
    return message, found["pid"]


def _gone(pid: int) -> bool:
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return True
    return False


@pytest.mark.parametrize(("signum", "expected"), [
    (signal.SIGKILL, "endings was killed by SIGKILL: usually out of memory (the kernel's OOM killer; `dmesg` says "
                     "so) or a user's `kill -9`; its last words: endings: wrote "),
    (signal.SIGTERM, "endings was stopped by SIGTERM; its last words: endings: wrote "),
    (signal.SIGINT, "endings was stopped by SIGINT (Ctrl-C); its last words: endings: wrote "),
], ids=["SIGKILL", "SIGTERM", "SIGINT"])
def test_a_program_killed_by_a_signal_is_named_and_its_temporary_removed(endings, tmp_path, signum, expected):
    out = tmp_path / "b.safetensors"
    with python_sigint():  # the program starts with SIGINT's default action, as from a terminal (tests/signals.py)
        message, pid = _sleeping(endings, out, lambda pid: os.kill(pid, signum))
    assert message.startswith(expected)
    assert _gone(pid) and list(tmp_path.iterdir()) == []  # its `.b.safetensors.<pid>.tmp` is gone, nothing else left


def test_a_program_past_its_timeout_is_killed_and_its_temporary_removed(endings, tmp_path):
    out = tmp_path / "b.safetensors"
    message, pid = _sleeping(endings, out, lambda pid: None, timeout=1)
    assert message == "endings did not finish within 1s (it was killed)"
    assert _gone(pid) and list(tmp_path.iterdir()) == []


def test_an_interrupted_run_kills_the_program_and_removes_its_temporary(endings, tmp_path):
    out = tmp_path / "b.safetensors"
    main = threading.main_thread().ident
    with python_sigint(), pytest.raises(KeyboardInterrupt):  # Python's handler, even in a background job
        _sleeping(endings, out, lambda pid: signal.pthread_kill(main, signal.SIGINT))
    temps = list(tmp_path.iterdir())
    assert temps == []
    # the program was killed before the interruption went on: no `endings` child is left
    children = subprocess.run(["ps", "-o", "comm=", "--ppid", str(os.getpid())], capture_output=True, text=True)
    assert "endings" not in children.stdout


def _write_under_a_size_limit(endings, out, sigxfsz: str) -> subprocess.CompletedProcess:
    """The port's 4 MiB trace written under a 1 MiB `ulimit -f`, run by `run_binary` in a Python whose SIGXFSZ
    is ``sigxfsz`` (`SIG_IGN`, Python's own default, or `SIG_DFL`)."""
    script = ("import signal, sys\nfrom burnside.burn.binary import run_binary\nfrom burnside.errors import RunError\n"
              f"signal.signal(signal.SIGXFSZ, signal.{sigxfsz})\n"
              "try:\n    run_binary(sys.argv[1], ['write', '-o', sys.argv[2]], expect_file=sys.argv[2])\n"
              "except RunError as e:\n    print(e)\n")

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_FSIZE, (1 << 20, 1 << 20))  # 1 MiB; the trace is 4 MiB

    return subprocess.run([sys.executable, "-c", script, str(endings), str(out)], capture_output=True, text=True,
                          preexec_fn=limit, timeout=60)


def test_a_file_size_limit_is_named_by_the_port_with_the_file_and_the_bytes_and_the_partial_trace_removed(
        endings, tmp_path):
    out = tmp_path / "b.safetensors"
    proc = _write_under_a_size_limit(endings, out, "SIG_IGN")  # Python ignores SIGXFSZ; the port keeps it ignored
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"endings exited with status 1: endings: {out}: larger than the file-size limit "
                                  "(ulimit -f) or the file system allows: "), proc.stdout
    assert proc.stdout.endswith(" bytes to write; nothing was written\n") and proc.stdout.count("\n") == 1
    assert list(tmp_path.iterdir()) == []


def test_a_file_size_limit_is_named_as_sigxfsz_and_the_partial_trace_removed(endings, tmp_path):
    out = tmp_path / "b.safetensors"
    proc = _write_under_a_size_limit(endings, out, "SIG_DFL")  # a caller that lets SIGXFSZ kill
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout == ("endings was killed by SIGXFSZ: a write went past the file-size limit (`ulimit -f`) or "
                           "the disk is full; raise the limit or make room\n")
    assert list(tmp_path.iterdir()) == []  # the 1 MiB `.b.safetensors.<pid>.tmp` is gone


def test_the_same_write_without_a_limit_succeeds(endings, tmp_path):
    out = tmp_path / "b.safetensors"
    run_binary(endings, ["write", "-o", str(out)], expect_file=out)
    assert out.stat().st_size > 4 << 20 and [p.name for p in tmp_path.iterdir()] == ["b.safetensors"]


STOPPED = {signal.SIGINT: "interrupted\n", signal.SIGTERM: "stopped by SIGTERM\n"}


@pytest.mark.parametrize("signum", [signal.SIGINT, signal.SIGTERM], ids=["SIGINT", "SIGTERM"])
def test_a_check_stopped_while_the_port_records_stops_the_port_and_removes_its_temporary(
        a1_trace, tmp_path, signum):
    """`burnside check` signalled alone (as `kill` or a service manager does, not the terminal's whole
    group): the port it runs is killed, not orphaned, and the port's temporary file is removed."""
    torch = a1_trace("torch", "sgd", 1).path
    proc = subprocess.Popen([str(Path(sys.executable).parent / "burnside"), "check", "--torch-trace", str(torch),
                             "--burn-crate", str(rust_workspace() / "pitb-opt"), "--bin", "endings",
                             "--out-dir", "out", "--", "--ending", "sleep"],
                            cwd=tmp_path, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                            preexec_fn=default_sigint)
    deadline = time.monotonic() + 120
    while not (temporaries := list((tmp_path / "out").glob(".endings.burn.safetensors.*.tmp"))):
        assert proc.poll() is None and time.monotonic() < deadline, proc.communicate()
        time.sleep(0.05)
    port = int(temporaries[0].name.split(".")[-2])
    assert not _gone(port)
    proc.send_signal(signum)
    out, err = proc.communicate(timeout=60)
    assert (proc.returncode, err) == (128 + signum, STOPPED[signum])
    assert _gone(port)
    assert not [p for p in tmp_path.rglob("*") if p.name.endswith(".tmp")]
    assert sorted(p.name for p in (tmp_path / "out").iterdir()) == ["init.safetensors"]  # complete, written before


def test_a_backward_pass_on_a_device_without_autodiff_is_told_the_autodiff_device(endings):
    """burn's own hint (`Tensor::autodiff().require_grad()`) is of a tensor; a port's fix is its device."""
    message = ended(endings, "no-autodiff")
    assert message.startswith("endings panicked inside burn at "), message
    assert ", called from the port's endings::no_autodiff: " in message, message
    assert message.endswith("`let device = Device::default().autodiff();`, as `burnside new` writes it; an inference "
                            "port calls no backward)"), message
    assert "\n" not in message
