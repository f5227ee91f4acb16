"""Names from what the port loaded (`burnside.compare.renames.param_renames`): B's start tensors named after
the tensor of A's whose bytes they hold, a packed attention slice by slice, constants placed by the module
their siblings name, and a name that contradicts the bytes (query and key swapped by a loader) kept as a
loading fault, which D014 names."""

from __future__ import annotations

import numpy as np

from burnside.compare import compare_traces
from burnside.compare.renames import param_renames
from burnside.diagnose import diagnose
from burnside.trace import open_trace, write_trace


def _forward(path, params: dict, framework: str):
    tensors = {f"step0.params_before.{k}": v for k, v in params.items()}
    tensors["step0.inputs.x"] = np.ones((2, 4), np.float32)
    tensors["step0.outputs.output"] = np.ones((2, 4), np.float32)
    meta = {"kind": "forward", "mode": "inference", "framework": framework, "steps": 1, "params": list(params),
            "framework_version": "0", "device": "cpu", "dtype": "float32"}
    write_trace(path, tensors, meta)
    return open_trace(path)


def _bert_like(rng):
    a = {}
    for i in range(2):
        for role in ("query", "key", "value"):
            a[f"encoder.layer.{i}.attention.self.{role}.weight"] = rng.standard_normal((4, 4)).astype(np.float32)
            a[f"encoder.layer.{i}.attention.self.{role}.bias"] = np.zeros(4, np.float32)
        a[f"encoder.layer.{i}.attention.output.LayerNorm.weight"] = np.ones(4, np.float32)
        a[f"encoder.layer.{i}.attention.output.LayerNorm.bias"] = np.zeros(4, np.float32)
    return a


def _burn_packed(a, swap_layer=None):
    """B as burnside-trace records burn's MultiHeadAttention: q, k, v stacked as `in_proj_*`, names its own."""
    b = {}
    for i in range(2):
        roles = ["query", "key", "value"]
        if i == swap_layer:
            roles = ["key", "query", "value"]  # the loader's mapping sends key to query and query to key
        for kind in ("weight", "bias"):
            b[f"encoder.layers.{i}.mha.in_proj_{kind}"] = np.concatenate(
                [a[f"encoder.layer.{i}.attention.self.{r}.{kind}"] for r in roles])
        b[f"encoder.layers.{i}.norm_1.weight"] = a[f"encoder.layer.{i}.attention.output.LayerNorm.weight"]
        b[f"encoder.layers.{i}.norm_1.bias"] = a[f"encoder.layer.{i}.attention.output.LayerNorm.bias"]
    return b


def test_a_packed_attention_and_renamed_layers_are_named_from_the_bytes_they_hold(tmp_path):
    a = _bert_like(np.random.default_rng(0))
    ta = _forward(tmp_path / "a.safetensors", a, "pytorch")
    tb = _forward(tmp_path / "b.safetensors", _burn_packed(a), "burn")
    renames = param_renames(ta, tb)
    names = {(r.b, r.part, r.a) for found in renames.by_b.values() for r in found}
    assert ("encoder.layers.1.mha.in_proj_weight", (2, 3), "encoder.layer.1.attention.self.value.weight") in names
    # zero biases (constants) go where their weight's module is
    assert ("encoder.layers.0.mha.in_proj_bias", (1, 3), "encoder.layer.0.attention.self.key.bias") in names
    assert ("encoder.layers.1.norm_1.weight", None, "encoder.layer.1.attention.output.LayerNorm.weight") in names
    comparison = compare_traces(ta, tb)
    assert comparison.passed, (comparison.only_in_a, comparison.only_in_b, comparison.loading)
    assert not diagnose(comparison)


def test_query_and_key_swapped_by_the_loader_is_a_loading_fault_named_as_such(tmp_path):
    a = _bert_like(np.random.default_rng(1))
    ta = _forward(tmp_path / "a.safetensors", a, "pytorch")
    tb = _forward(tmp_path / "b.safetensors", _burn_packed(a, swap_layer=1), "burn")
    comparison = compare_traces(ta, tb)
    assert not comparison.passed
    faults = {f.tensor: f for f in comparison.loading}
    fault = faults["encoder.layer.1.attention.self.query.weight"]
    assert fault.kind == "other_tensor"
    assert "holds the checkpoint's encoder.layer.1.attention.self.key.weight" in fault.evidence
    found = diagnose(comparison)
    assert found and found[0].rule == "D014" and "another tensor of the checkpoint loaded" in found[0].evidence
    assert "encoder.layer.0" not in found[0].evidence  # the layer loaded right is not named
