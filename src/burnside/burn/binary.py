"""Run a built burn program with a timeout and read its machine-readable `JSON: {...}` line.

Every way the program can end is named in one line (`RunError`): a non-zero exit with what it
said last, a panic with where it happened (the port's own code, or inside burn or another
dependency and then the port's own frame that led there), a signal by name with what it usually
means. Whatever ended it, the temporary files it was writing its output through
(`.{name}.{pid}.tmp` beside the output, as burnside-trace names them) are removed.
"""

from __future__ import annotations

import contextlib
import glob
import json
import os
import re
import signal
import subprocess
import tempfile
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING

from burnside.errors import RunError

if TYPE_CHECKING:
    from burnside.progress import StepProgress

_JSON_PREFIX = "JSON: "
#: What `burnside_trace::step_done` prints on stderr when `BURNSIDE_PROGRESS` is set.
_STEP_LINE = re.compile(r"burnside-progress: step (\d+)/(\d+)")


@dataclass
class BinaryRun:
    """One run: what it printed, the parsed JSON line (if any), how long it took."""

    name: str
    stdout: str
    stderr: str
    json: dict | None
    seconds: float

    @property
    def text(self) -> str:
        """What the program printed for people (stdout without the JSON line)."""
        return "\n".join(line for line in self.stdout.splitlines() if not line.startswith(_JSON_PREFIX))


#: Lines of a failed program's own report relayed at most (its last ones).
MAX_REPORT_LINES = 40
#: Of a longer report, the first lines kept besides the last ones (burn-store's list of what it could not load).
HEAD_LINES = 24
#: burnside-trace's panic hook's line (`run_port`): the tensor recorded last before a panic.
_LAST_RECORDED = re.compile(r"^burnside-trace: last recorded (?P<name>\S+) (?P<shape>\[[0-9, ]*\])$")
#: burnside-trace's panic hook's lines before it: each layer output recorded at the step that panicked, and its shape.
_RECORDED = re.compile(r"^burnside-trace: recorded (?P<name>\S+) \[(?P<shape>[0-9, ]*)\]$")
_PANIC = re.compile(r"thread '[^']*'(?: \(\d+\))? panicked at (?P<where>.+):$")
#: A backtrace's frame (`  4: endings::burn_panic`) and its source line, when built with debug info.
_FRAME = re.compile(r"\s*\d+:\s+(?:0x[0-9a-f]+ - )?(?P<symbol>.+)$")
#: What `RUST_BACKTRACE=full` adds to a symbol: crates' disambiguators (`std[e282..]`) and the hash.
_SYMBOL_NOISE = re.compile(r"\[[0-9a-f]+\]|::h[0-9a-f]{16}$")
_FRAME_AT = re.compile(r"\s+at (?P<path>.+?)(?::\d+(?::\d+)?)?$")
#: Where cargo keeps dependencies' sources: `.../registry/src/<index>/<crate>-<version>/...`, git checkouts.
_REGISTRY = re.compile(r"/(?:registry/src/[^/]+|git/checkouts/[^/]+/[^/]+)/(?P<crate>[^/]+)/(?P<rest>.+)$")
#: The standard library's sources as panics name them (`/rustc/<hash>/library/...`) or in a toolchain.
_STD = re.compile(r"(?:^/rustc/[0-9a-f]+/|/toolchains/[^/]+/lib/rustlib/src/rust/)library/(?P<rest>.+)$")
#: Frames that are Rust's own machinery around a panic or `main`, never the port's.
_MACHINERY = ("std::", "core::", "alloc::", "__rustc::", "rust_begin_unwind", "<core::", "<alloc::", "<std::")

#: A signal that ended the program: what to call it and what it usually means.
_SIGNALS = {
    signal.SIGKILL: "was killed by SIGKILL: usually out of memory (the kernel's OOM killer; `dmesg` says so) "
                    "or a user's `kill -9`",
    signal.SIGXFSZ: "was killed by SIGXFSZ: a write went past the file-size limit (`ulimit -f`) or the disk "
                    "is full; raise the limit or make room",
    signal.SIGSEGV: "crashed with SIGSEGV (a segmentation fault: an invalid memory access in native or "
                    "unsafe code, or a stack overflow)",
    signal.SIGBUS: "crashed with SIGBUS (a bad memory access: a memory-mapped file that shrank or a full "
                   "/dev/shm)",
    signal.SIGABRT: "crashed with SIGABRT (it aborted: a failed allocation, a panic while panicking or an "
                    "explicit abort)",
    signal.SIGILL: "crashed with SIGILL (an illegal instruction: built for another CPU, or a trap in the code)",
    signal.SIGFPE: "crashed with SIGFPE (an arithmetic fault)",
    signal.SIGTERM: "was stopped by SIGTERM",
    signal.SIGINT: "was stopped by SIGINT (Ctrl-C)",
    signal.SIGHUP: "was stopped by SIGHUP (its terminal closed)",
    signal.SIGPIPE: "was stopped by SIGPIPE (what it wrote to was closed)",
}


def recorded_shapes(stderr: str) -> list[tuple[str, tuple[int, ...]]]:
    """The layer outputs a port that panicked had recorded at that step (burnside-trace's panic hook), in order:
    (name, shape)."""
    found = []
    for line in stderr.splitlines():
        m = _RECORDED.match(line.strip())
        if m:
            found.append((m["name"], tuple(int(d) for d in m["shape"].replace(" ", "").split(",") if d)))
    return found


def _signal_text(signum: int) -> str:
    known = _SIGNALS.get(signum)
    if known:
        return known
    try:
        return f"was killed by {signal.Signals(signum).name}"
    except ValueError:
        return f"was killed by signal {signum}"


def _lines(text: str) -> list[str]:
    return [line.rstrip() for line in text.splitlines() if line.strip()]


def _own_frame(lines: list[str], crate: str) -> str | None:
    """The first frame of a panic's backtrace in the program's own code: a frame whose source is
    not a dependency's or the standard library's, or (without debug info) whose function is in the
    binary's crate (``crate``)."""
    frames: list[tuple[str, str | None]] = []
    for line in lines:
        at = _FRAME_AT.match(line)
        if at and frames and frames[-1][1] is None:
            frames[-1] = (frames[-1][0], at["path"])
            continue
        frame = _FRAME.match(line)
        if frame:
            frames.append((_SYMBOL_NOISE.sub("", frame["symbol"]), None))
    for symbol, path in frames:
        if symbol.startswith(_MACHINERY):
            continue
        if path is not None:
            if _REGISTRY.search(path) or _STD.search(path):
                continue
            return f"{symbol} ({path})"
        if re.match(rf"[<&\s]*{re.escape(crate)}::", symbol):
            return symbol
    return None


def _panic_text(place: str, message: str, backtrace: list[str], crate: str) -> str:
    """``panicked at PLACE (whose code it is): MESSAGE``: the port's own, or a dependency's and
    then the port's frame that called into it, from the backtrace when there is one."""
    dependency = _REGISTRY.search(place)
    std = _STD.search(place)
    if dependency is None and std is None:
        return f"panicked in its own code at {place}: {message}"
    if dependency is not None:
        name = dependency["crate"]
        inside = "inside burn" if name.startswith("burn") else "inside a dependency"
        place = f"{name}/{dependency['rest']}"
    else:
        inside, place = "inside Rust's standard library", std["rest"]
    if not backtrace:
        called = "; run it with RUST_BACKTRACE=1 to see the port's own frame"
    else:
        own = _own_frame(backtrace, crate)
        called = f", called from the port's {own}" if own else ", with no frame of the port's own code in the backtrace"
    return f"panicked {inside} at {place}{called}: {message}{_hint(message)}"


def _hint(message: str) -> str:
    """What burnside knows of a burn panic a port meets: the port-side fix, after burn's own words."""
    if "backward requires" in message and "autodiff" in message:
        return (" (burnside: a training port's model and tensors live on an autodiff device, "
                "`let device = Device::default().autodiff();`, as `burnside new` writes it; an inference port "
                "calls no backward)")
    return ""


def _what_it_said(text: str, crate: str = "") -> str:
    """What a failed program reported on stderr, for the error: a panic's place and message on one
    line; otherwise the program's own lines (the last MAX_REPORT_LINES), without Rust's notes on
    backtraces. A port's own report (a load that does not fit lists every missing tensor, then the
    fix) is what the user acts on, so it is relayed whole, not cut to its last line."""
    lines = _lines(text)
    for i, line in enumerate(lines):
        panic = _PANIC.match(line)
        if panic:
            message: list[str] = []
            backtrace: list[str] = []
            for j, more in enumerate(lines[i + 1:], start=i + 1):
                if more.startswith("stack backtrace:"):
                    backtrace = [b for b in lines[j + 1:] if not b.startswith("note: ")]
                    break
                if more.startswith("note: "):
                    break
                message.append(more.strip())
            text_of = _panic_text(panic["where"], " ".join(message), backtrace, crate)
            last = [m for line in lines if (m := _LAST_RECORDED.match(line))]
            if last:  # burnside-trace's panic hook: where the recording had got to
                text_of += (f" (the last tensor it recorded: {last[-1]['name']} of shape {last[-1]['shape']}; "
                            "the code after it panicked)")
            return text_of
    said = [line for line in lines if not line.startswith("note: ")]
    if not said:
        return "(no output on stderr)"
    hint = _packed_hint(text)
    if len(said) == 1 and not hint:
        return said[0]
    if len(said) > MAX_REPORT_LINES:
        # the head says what failed (burn-store's "Tensor not found", its counts), the tail its last words
        said = [*said[:HEAD_LINES], f"... ({len(said) - MAX_REPORT_LINES + HEAD_LINES} lines left out)",
                *said[-(MAX_REPORT_LINES - HEAD_LINES):]]
    return "\n" + "\n".join("  " + line for line in said) + (f"\n  burnside: {hint}" if hint else "")


#: PyTorch's packed tensors: one tensor holds several of burn's (q, k, v; a recurrent layer's gates)
_PACKED_NAMES = re.compile(r"\b(in_proj_weight|in_proj_bias|weight_ih_l\d+|weight_hh_l\d+|bias_ih_l\d+|bias_hh_l\d+)\b")


def _packed_hint(text: str) -> str:
    """What to do when a port's load failed on one of PyTorch's packed tensors (burn-store names them)."""
    found = _PACKED_NAMES.search(text)
    if found is None or "does not fit this init file" in text:
        return ""  # InitFile::load_module cuts the packed tensors itself: one it cannot place is a layer's own
    return (f"`{found.group(1)}` is one of PyTorch's packed tensors (an nn.MultiheadAttention's in_proj, an nn.LSTM's "
            "or nn.GRU's stacked gates), which burn-store's PytorchStore cannot cut into burn's layers and no name "
            "remapping can: load the checkpoint with `burnside_trace::load_pytorch_checkpoint(model, path)`, which "
            "cuts them (not allow_partial(true), which leaves them at their initialisation)")


def _failure(head: str, stderr: str, crate: str = "") -> str:
    """``head: what it said`` on one line, or ``head:`` over the program's indented report."""
    said = _what_it_said(stderr, crate)
    return f"{head}:{said}" if said.startswith("\n") else f"{head}: {said}"


def _ending(name: str, returncode: int, stderr: str) -> str:
    """The one line for a program that ended with ``returncode`` (non-zero; negative: a signal)."""
    crate = name.replace("-", "_")
    if returncode < 0:
        last = [line for line in _lines(stderr) if not line.startswith("note: ")]
        return f"{name} {_signal_text(-returncode)}" + (f"; its last words: {last[-1].strip()}" if last else "")
    said = _what_it_said(stderr, crate)
    if said.startswith("panicked "):
        return f"{name} {said}"  # the status (101) says nothing the panic does not
    return f"{name} exited with status {returncode}:{said}" if said.startswith("\n") else \
        f"{name} exited with status {returncode}: {said}"


def _outputs(args: list[str], expect_file: Path | None) -> list[Path]:
    """The files the program writes: ``expect_file`` and the `-o OUT` of the port contract."""
    outputs = [Path(expect_file)] if expect_file is not None else []
    for flag, value in zip(args, args[1:]):
        if flag in ("-o", "--out", "--output"):
            outputs.append(Path(value))
    return outputs


def remove_temporaries(outputs: list[Path], pid: int) -> None:
    """Remove what process ``pid`` left half-written beside ``outputs``: burnside-trace writes
    OUT through `.{OUT's name}.{pid}.tmp` (a trace written at the end) or streams it through
    `.{OUT's name}.{pid}.{random hex}.partial` in OUT's directory, and renames it only when complete;
    a port killed by a signal leaves it behind."""
    for out in outputs:
        with contextlib.suppress(OSError):
            (out.parent / f".{out.name}.{pid}.tmp").unlink()
        with contextlib.suppress(OSError):
            for partial in out.parent.glob(f".{glob.escape(out.name)}.{pid}.*.partial"):
                with contextlib.suppress(OSError):
                    partial.unlink()


def _child_env(progress: bool) -> dict[str, str]:
    env = dict(os.environ)
    if env.get("RUST_BACKTRACE", "0") in ("", "0"):
        env["RUST_BACKTRACE"] = "1"  # a panic inside burn then names the port's frame that led there
    if progress:
        env["BURNSIDE_PROGRESS"] = "1"
    return env


def run_binary(path: Path, args: list[str] | None = None, *, timeout: float = 300,
               expect_file: Path | None = None, progress: StepProgress | None = None) -> BinaryRun:
    """Run ``path`` with ``args``; a non-zero exit, a signal, a timeout or a missing ``expect_file``
    is a RunError (one line naming the ending), and the program's temporary files are removed.

    With ``progress``, the program is asked for its steps (`BURNSIDE_PROGRESS`) and ``progress``
    is told each `burnside-progress: step k/N` line as it comes; those lines are not in ``stderr``.
    If this process is interrupted meanwhile (KeyboardInterrupt, or burnside's SIGTERM handling),
    the program is killed and its temporaries removed before the interruption goes on.
    """
    name = Path(path).name
    args = list(args or [])
    start = time.monotonic()
    proc = _run([str(path), *args], timeout, progress, _child_env(progress is not None),
                _outputs(args, expect_file), name)
    seconds = time.monotonic() - start
    if expect_file is not None and not Path(expect_file).is_file():
        raise RunError(_failure(f"{name} exited cleanly but wrote no trace at {expect_file}", proc.stderr))
    parsed = None
    for line in proc.stdout.splitlines():
        if line.startswith(_JSON_PREFIX):
            try:
                parsed = json.loads(line[len(_JSON_PREFIX):])
            except json.JSONDecodeError:
                raise RunError(f"{name} printed a malformed JSON line: {line[:80]}") from None
    return BinaryRun(name, proc.stdout, proc.stderr, parsed, seconds)


def _run(command: list[str], timeout: float, progress: StepProgress | None, env: dict[str, str],
         outputs: list[Path], name: str, *, check: bool = True) -> subprocess.CompletedProcess:
    """Run ``command``: stderr read line by line (step lines to ``progress``), stdout to a file (a
    program printing much cannot block on a full pipe). The program never outlives this call, and
    unless it exits 0 its temporaries beside ``outputs`` are removed; with ``check`` a non-zero
    ending is a RunError."""
    kept: list[str] = []
    timed_out = threading.Event()
    with tempfile.TemporaryFile(mode="w+") as out:
        try:
            # Popen resets SIGXFSZ to its default in the child; where burnside runs with it ignored (so that a
            # write past `ulimit -f` is an error, not death), the port keeps it ignored too and says which file
            # and how many bytes (Rust programs ignore SIGPIPE themselves, the other signal restored)
            keep = signal.getsignal(signal.SIGXFSZ) == signal.SIG_IGN
            proc = subprocess.Popen(command, stdout=out, stderr=subprocess.PIPE, text=True, errors="replace",
                                    env=env, restore_signals=not keep)
        except OSError as exc:
            raise RunError(f"cannot run {name}: {exc.strerror or exc}") from None

        def stop() -> None:
            timed_out.set()
            proc.kill()

        timer = threading.Timer(timeout, stop)
        timer.start()
        try:
            assert proc.stderr is not None
            for line in proc.stderr:
                step = _STEP_LINE.fullmatch(line.rstrip("\n")) if progress is not None else None
                if step:
                    progress(int(step[1]), int(step[2]))
                else:
                    kept.append(line)
            returncode = proc.wait()
        except BaseException:
            proc.kill()
            proc.wait()
            remove_temporaries(outputs, proc.pid)
            raise
        finally:
            timer.cancel()
            proc.stderr.close()
        if returncode != 0:
            remove_temporaries(outputs, proc.pid)
        if timed_out.is_set():
            raise RunError(f"{name} did not finish within {timeout:.0f}s (it was killed)")
        stderr = "".join(kept)
        if check and returncode != 0:
            error = RunError(_ending(name, returncode, stderr))
            error.recorded_shapes = recorded_shapes(stderr)
            raise error
        out.seek(0)
        return subprocess.CompletedProcess(command, returncode, out.read(), stderr)


def expect_panic(path: Path, args: list[str] | None = None, *, timeout: float = 300) -> str:
    """Run ``path`` expecting a Rust panic; return the panic message (stderr, without backtrace).

    A clean exit, another failure or a signal is a RunError: the program was meant to be stopped
    by an assertion.
    """
    name = Path(path).name
    proc = _run([str(path), *(args or [])], timeout, None, {**os.environ, "RUST_BACKTRACE": "0"}, [], name,
                check=False)
    if proc.returncode < 0:
        raise RunError(f"{name} was expected to panic but {_signal_text(-proc.returncode)}")
    if proc.returncode == 0 or "panicked at" not in proc.stderr:
        raise RunError(_failure(f"{name} was expected to panic but exited with status {proc.returncode}",
                                proc.stderr))
    return "\n".join(line for line in proc.stderr.splitlines() if not line.startswith("note: run with `RUST_BACKTRACE"))
