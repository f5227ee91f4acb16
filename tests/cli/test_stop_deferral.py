"""A stop that lands just after a temporary file is made still finds it to remove.

The console script turns SIGINT into `Interrupted` at the next line of Python. Landing between the
`open` that makes an output's temporary file and the line that keeps its name, it left the file
behind (`test_an_interrupted_report_writes_no_page` saw `.r.html.<hex>.tmp` once in 1,300 runs).
Here the signal is raised right after the real `open` returns, inside the process, with the
console script's own handler: the three places that make a temporary file (an atomic output, a
streamed trace, a streamed trace whose header outgrew its room) leave nothing.
"""

from __future__ import annotations

import os
import signal

import numpy as np
import pytest

from burnside.atomic import write_atomic
from burnside.cli.root import _stop
from burnside.errors import STOPPING, Interrupted, stops_deferred
from burnside.trace.stream import TraceWriter
from tests.core.conftest import a1_like_tensors, base_metadata


@pytest.fixture
def console_handler():
    """The console script's stop handler on SIGINT for the test; every stopping signal restored after."""
    before = {each: signal.getsignal(each) for each in STOPPING}
    signal.signal(signal.SIGINT, _stop)
    yield
    for each, handler in before.items():
        signal.signal(each, handler)


@pytest.fixture
def stop_after_next_open(monkeypatch):
    """Arm: the next `os.open` that makes a file is followed at once by a SIGINT to this process."""
    real = os.open
    armed = []

    def open_then_stop(path, flags, *args, **kwargs):
        fd = real(path, flags, *args, **kwargs)
        if armed and flags & os.O_CREAT:
            armed.clear()
            signal.raise_signal(signal.SIGINT)  # the handler runs at the next line: still inside here
        return fd

    monkeypatch.setattr(os, "open", open_then_stop)
    return lambda: armed.append(True)


def test_an_atomic_output_stopped_as_its_file_is_made_leaves_nothing(tmp_path, console_handler,
                                                                    stop_after_next_open):
    stop_after_next_open()
    with pytest.raises(Interrupted):
        write_atomic(tmp_path / "r.html", "<html></html>")
    assert list(tmp_path.iterdir()) == []


def test_a_streamed_trace_stopped_as_its_file_is_made_leaves_nothing(tmp_path, console_handler,
                                                                    stop_after_next_open):
    stop_after_next_open()
    with pytest.raises(Interrupted):
        TraceWriter(tmp_path / "t.safetensors")
    assert list(tmp_path.iterdir()) == []


def test_a_trace_stopped_as_its_rewritten_file_is_made_leaves_nothing(tmp_path, console_handler,
                                                                     stop_after_next_open):
    writer = TraceWriter(tmp_path / "t.safetensors")  # a 64 KiB header reservation, which these outgrow:
    for i in range(600):  # finish copies the data behind the exact header, in a second temporary file
        writer.add(f"step0.grads.{'layer' * 30}.{i}.weight", np.ones(4, np.float32))
    stop_after_next_open()
    with pytest.raises(Interrupted):
        writer.finish(_BARE)
    assert list(tmp_path.iterdir()) == []


_BARE = {"framework": "x", "framework_version": "1", "device": "cpu", "dtype": "float32", "steps": 1,
         "optimizer": {"name": "sgd"}, "params": [], "grads_len": [0]}


def test_a_stop_inside_a_deferred_block_is_raised_when_the_block_ends(console_handler):
    reached = []
    with pytest.raises(Interrupted) as stopped:
        with stops_deferred():
            signal.raise_signal(signal.SIGINT)
            reached.append(sum(range(10)))  # lines after the signal still run
        reached.append("after")  # not reached: the stop is raised as the block ends
    assert reached == [45] and stopped.value.signum == signal.SIGINT


def test_the_same_writes_uninterrupted_are_complete(tmp_path):
    """So the stops above are what leaves nothing, not a write that fails anyway."""
    write_atomic(tmp_path / "r.html", "<html></html>")
    writer = TraceWriter(tmp_path / "t.safetensors")
    for name, array in a1_like_tensors().items():
        writer.add(name, np.asarray(array))
    writer.finish(base_metadata())
    writer = TraceWriter(tmp_path / "big.safetensors")
    for i in range(600):
        writer.add(f"step0.grads.{'layer' * 30}.{i}.weight", np.ones(4, np.float32))
    writer.finish(_BARE)
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.safetensors", "r.html", "t.safetensors"]


def test_a_stop_under_a_block_that_fails_is_not_raised_later(console_handler):
    """The block's own error goes through; the stop that came with it is not kept for the next block."""
    with pytest.raises(OSError), stops_deferred():
        signal.raise_signal(signal.SIGINT)
        raise OSError("disk full")
    with stops_deferred():
        pass  # would raise a stale Interrupted if the first block had left it pending
