"""`burnside check`'s init file of a large trace is streamed, tensor by tensor from the mapped trace, and holds
exactly what the init file encoded whole holds: the same names, bytes and metadata."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

import burnside.burn.port as port
from burnside.torch import record_forward
from burnside.trace import open_trace


def test_a_streamed_init_file_holds_what_the_whole_one_holds(tmp_path, monkeypatch):
    torch.manual_seed(0)
    model = nn.Sequential(nn.Linear(6, 8), nn.BatchNorm1d(8), nn.ReLU(), nn.Linear(8, 3))
    batches = [{"x": torch.randn(4, 6)} for _ in range(3)]
    trace = open_trace(record_forward(model, batches, tmp_path / "t.safetensors"))
    whole = open_trace(port.init_from_trace(trace, tmp_path / "whole.safetensors"), kind="init")
    monkeypatch.setattr(port, "_STREAM_INIT", 0)  # every init file streamed
    streamed = open_trace(port.init_from_trace(trace, tmp_path / "streamed.safetensors"), kind="init")
    assert streamed.names == whole.names and streamed.metadata == whole.metadata
    assert any(n.startswith("params.") for n in whole.names) and any(".layer_inputs." in n for n in whole.names)
    for name in whole.names:
        assert whole.info(name) == streamed.info(name), name
        assert np.array_equal(whole.array(name), streamed.array(name)), name
    # the streamed file reserves its header room: it is the larger, the layout differs, the content does not
    assert (tmp_path / "streamed.safetensors").stat().st_size > (tmp_path / "whole.safetensors").stat().st_size
