"""A training loop whose model returns several outputs (a VAE's reconstruction, mu and logvar), recorded as
`record_forward` records them: each tensor under its name, the first also as the step's logits, the whole output
handed to the user's loss function; and the comparison of a port that records the others by name."""

from __future__ import annotations

import numpy as np
import pytest
import torch
from torch import nn

from burnside.errors import BurnsideError
from burnside.pipeline import compare_with_evidence
from burnside.torch import record
from burnside.trace import open_trace, write_trace


class TinyVae(nn.Module):
    def __init__(self, as_dict: bool = False) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.enc = nn.Linear(6, 4)
        self.dec = nn.Linear(2, 6)
        self.as_dict = as_dict

    def forward(self, x: torch.Tensor):
        mu, logvar = self.enc(x).chunk(2, dim=-1)
        recon = self.dec(mu)  # no sampling: the mean's decoding
        if self.as_dict:
            return {"recon": recon, "mu": mu, "logvar": logvar}
        return recon, mu, logvar


def vae_loss(output, x: torch.Tensor) -> torch.Tensor:
    recon, mu, logvar = output.values() if isinstance(output, dict) else output
    bce = nn.functional.binary_cross_entropy_with_logits(recon, x, reduction="sum")
    kl = -0.5 * torch.sum(1 + logvar - mu.pow(2) - logvar.exp())
    return bce + kl


def _batch() -> dict[str, torch.Tensor]:
    torch.manual_seed(1)
    return {"x": torch.rand(5, 6)}


@pytest.mark.parametrize(("as_dict", "names"), [(False, ["0", "1", "2"]), (True, ["recon", "mu", "logvar"])])
def test_each_output_is_recorded_by_name_and_the_first_is_the_logits(tmp_path, as_dict, names):
    model = TinyVae(as_dict)
    path = record(model, torch.optim.SGD(model.parameters(), lr=0.01), _batch(), tmp_path / "vae.safetensors",
                  steps=2, loss_fn=vae_loss, target="x")
    trace = open_trace(path)
    assert trace.metadata["outputs"] == names
    for k in range(2):
        assert trace.aliases[f"step{k}.outputs.{names[0]}"] == f"step{k}.logits"
        assert trace.info(f"step{k}.outputs.{names[1]}").shape == (5, 2)
    # the loss is the function's of all three outputs, as the loop computed it
    with torch.no_grad():
        fresh = TinyVae(as_dict)
        expected = vae_loss(fresh(_batch()["x"]), _batch()["x"])
    assert np.isclose(float(trace.array("step0.loss")), float(expected), rtol=1e-6)


def test_with_the_default_cross_entropy_a_tuple_is_still_refused(tmp_path):
    model = TinyVae()
    with pytest.raises(BurnsideError, match="not the logits tensor"):
        record(model, torch.optim.SGD(model.parameters(), lr=0.01), {"x": torch.rand(5, 6), "y": torch.zeros(5)},
               tmp_path / "vae.safetensors", steps=1)


def _as_port(tmp_path, path, drop, name="port.safetensors"):
    trace = open_trace(path)
    tensors = {n: np.array(trace.array(n)) for n in trace.names if not drop(n)}
    metadata = {k: v for k, v in trace.metadata.items() if k not in ("modules", "activations", "layer_inputs")}
    return write_trace(tmp_path / name, tensors, {**metadata, "framework": "burn", "framework_version": "0.22.1"})


def test_a_port_recording_the_other_outputs_by_name_is_compared_on_each(tmp_path):
    """The burn side returns the reconstruction from its step (recorded as the logits) and records mu and logvar
    with `step.output("1", ..)`: no output is missing, and a logvar that differs is a row that FAILs."""
    model = TinyVae()
    path = record(model, torch.optim.SGD(model.parameters(), lr=0.01), _batch(), tmp_path / "vae.safetensors",
                  steps=1, loss_fn=vae_loss, target="x", activations=False, layer_inputs=False)
    port = _as_port(tmp_path, path, drop=lambda n: n.endswith("outputs.0"))
    comparison = compare_with_evidence(open_trace(path), open_trace(port))
    assert comparison.passed and not comparison.only_in_a, comparison.only_in_a
    assert {"step0.outputs.1", "step0.outputs.2"} <= {r.name for r in comparison.rows}

    trace = open_trace(path)
    tensors = {n: np.array(trace.array(n)) for n in trace.names if not n.endswith("outputs.0")}
    tensors["step0.outputs.2"] = tensors["step0.outputs.2"] * 0.5  # exp(0.5 * logvar) slip shows in logvar's use
    metadata = {k: v for k, v in trace.metadata.items() if k not in ("modules", "activations", "layer_inputs")}
    off = write_trace(tmp_path / "off.safetensors", tensors, {**metadata, "framework": "burn",
                                                              "framework_version": "0.22.1"})
    comparison = compare_with_evidence(open_trace(path), open_trace(off))
    assert not comparison.passed
    assert [r.name for r in comparison.rows if r.stats.out_of_tol][:1] == ["step0.outputs.2"]
