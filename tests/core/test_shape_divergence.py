"""A layer whose output's shape parts: the first-divergence line names the settings that decide that shape for the
layer's kind, and quotes A's configured values of them (the trace's `module_settings`)."""

from __future__ import annotations

from io import StringIO

import numpy as np
import torch
from rich.console import Console
from torch import nn

from burnside.diagnose import diagnose
from burnside.pipeline import compare_with_evidence
from burnside.report.table import render
from burnside.torch import record_forward
from burnside.trace import open_trace, write_trace


def _decoder(output_padding: int) -> nn.Module:
    torch.manual_seed(0)
    return nn.Sequential(nn.Conv2d(2, 4, 3, padding=1), nn.ConvTranspose2d(4, 2, 3, stride=2, padding=1,
                                                                           output_padding=output_padding))


def test_a_conv_transpose_that_parts_is_told_with_output_padding_and_as_configured(tmp_path):
    batch = {"x": torch.randn(1, 2, 5, 5)}
    a = record_forward(_decoder(1), batch, tmp_path / "a.safetensors")
    other = record_forward(_decoder(0), batch, tmp_path / "other.safetensors")
    trace = open_trace(other)
    port = write_trace(tmp_path / "b.safetensors", {n: np.array(trace.array(n)) for n in trace.names},
                       {**{k: v for k, v in trace.metadata.items() if k not in ("modules", "module_settings")},
                        "framework": "burn", "framework_version": "0.22.1"})
    comparison = compare_with_evidence(open_trace(a), open_trace(port))
    out = StringIO()
    render(comparison, diagnose(comparison), Console(file=out, width=500))
    line = next(line for line in out.getvalue().splitlines() if line.startswith("first divergence:"))
    assert "step0.activations.1 (ConvTranspose2d)" in line and "[1, 2, 10, 10] in A, [1, 2, 9, 9] in B" in line, line
    assert "(output_padding, stride, padding, dilation, kernel size)" in line, line
    assert "A's 1 is built with kernel_size (3, 3), stride (2, 2), padding (1, 1), output_padding (1, 1), " \
           "dilation (1, 1)" in line, line
