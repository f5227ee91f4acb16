"""Verdicts and diagnoses that agree, on real PyTorch runs: constant buffers, tied weights, diverged runs,
updates as small as their rounding, optimizer settings the recorded steps do not show, optimizer-state names."""

from __future__ import annotations

from io import StringIO

import numpy as np
import torch
from rich.console import Console
from torch import nn

from burnside.compare.pairing import pair_renamed, rename_rules
from burnside.diagnose import diagnose
from burnside.diagnose.rules.d012_trains_frozen_parameters import UNTIED_TITLE
from burnside.pipeline import compare_with_evidence
from burnside.report.table import render
from burnside.torch import record
from burnside.trace import open_trace, write_trace


def _as_port(tmp_path, path, name="port.safetensors", drop=lambda n: False, **meta):
    """The trace of a PyTorch run rewritten as a burn port's (its tensors less ``drop``'s, metadata overridden)."""
    trace = open_trace(path)
    tensors = {n: np.asarray(trace.array(n)) for n in trace.names if not drop(n)}
    metadata = {k: v for k, v in trace.metadata.items() if k not in ("buffers", "buffers_nonpersistent", "tied",
                                                                     "modules", "activations")}
    return write_trace(tmp_path / name, tensors, {**metadata, "framework": "burn", "framework_version": "0.22.1",
                                                  **meta})


def _judge(a, b):
    comparison = compare_with_evidence(open_trace(a), open_trace(b))
    found = diagnose(comparison)
    out = StringIO()
    render(comparison, found, Console(file=out, width=400))
    return comparison, {d.rule: d for d in found}, out.getvalue()


class _Block(nn.Module):
    """A nanoGPT-style attention block: a causal mask registered as a buffer (``persistent`` or not)."""

    def __init__(self, persistent: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.c_attn = nn.Linear(8, 24)
        self.c_proj = nn.Linear(8, 8)
        self.head = nn.Linear(8, 5)
        self.register_buffer("bias", torch.tril(torch.ones(6, 6)).view(1, 6, 6), persistent=persistent)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        q, k, v = self.c_attn(x).split(8, dim=2)
        att = (q @ k.transpose(-2, -1)) / 8 ** 0.5
        att = att.masked_fill(self.bias[:, :x.shape[1], :x.shape[1]] == 0, float("-inf")).softmax(-1)
        return self.head(self.c_proj(att @ v)).mean(1)


def _block_run(tmp_path, persistent: bool):
    torch.manual_seed(1)
    batch = {"x": torch.randn(3, 6, 8), "y": torch.randint(0, 5, (3,))}
    model = _Block(persistent)
    return record(model, torch.optim.SGD(model.parameters(), lr=0.1), batch,
                  tmp_path / f"block{persistent}.safetensors",
                  steps=2)


def test_a_causal_mask_registered_non_persistent_is_a_constant_the_port_may_compute_inline(tmp_path):
    a = _block_run(tmp_path, persistent=False)
    assert open_trace(a).metadata["buffers_nonpersistent"] == ["bias"]
    b = _as_port(tmp_path, a, drop=lambda n: ".buffers." in n)
    comparison, found, text = _judge(a, b)
    assert comparison.passed and not found, (sorted(found), text)
    assert comparison.constants_only_in_a == ["step0.buffers.bias", "step1.buffers.bias"]
    assert "constant buffers only in A (registered with persistent=False" in text and "only in A: step" not in text
    # a port that records the mask too has it compared
    kept = _as_port(tmp_path, a, name="kept.safetensors")
    assert any(r.name == "step1.buffers.bias" for r in compare_with_evidence(open_trace(a), open_trace(kept)).rows)


def test_a_persistent_constant_buffer_the_port_computes_inline_passes(tmp_path):
    # nanoGPT keeps its causal mask in the state_dict (persistent): the same at every step, a constant the port
    # computes inline, and the layers that read it are compared
    a = _block_run(tmp_path, persistent=True)
    assert "buffers_nonpersistent" not in open_trace(a).metadata
    b = _as_port(tmp_path, a, drop=lambda n: ".buffers." in n)
    comparison, found, text = _judge(a, b)
    assert comparison.passed and not found, (sorted(found), text)
    assert comparison.constants_only_in_a == ["step0.buffers.bias", "step1.buffers.bias"]
    assert comparison.persistent_constants == ["bias"]
    assert "constant buffers only in A (persistent, in the state_dict, and the same at every step recorded; B " \
        "computes them inline), not compared: bias" in text, text
    assert "only in A: step" not in text and "buffer only in A" not in text


class _Running(nn.Module):
    """A model with a buffer its forward pass updates while training (a running mean of its input)."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc = nn.Linear(8, 5)
        self.register_buffer("seen", torch.zeros(8))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        if self.training:
            with torch.no_grad():
                self.seen.mul_(0.9).add_(0.1 * x.mean(0))
        return self.fc(x - self.seen)


def test_a_persistent_buffer_the_run_changes_missing_on_the_port_is_named_with_its_fix(tmp_path):
    torch.manual_seed(1)
    batch = {"x": torch.randn(3, 8), "y": torch.randint(0, 5, (3,))}
    model = _Running()
    a = record(model, torch.optim.SGD(model.parameters(), lr=0.1), batch, tmp_path / "running.safetensors", steps=2)
    b = _as_port(tmp_path, a, drop=lambda n: ".buffers." in n)
    comparison, _, text = _judge(a, b)
    assert not comparison.passed
    assert comparison.persistent_constants == []
    assert "buffer only in A: seen (2 step(s)) is a persistent buffer" in text
    assert 'init.buffer(\\"seen\\")' in text or 'init.buffer("seen")' in text
    assert "only in A: step0.buffers.seen" not in text


class _Gpt(nn.Module):
    """Token embedding, one Linear, and a head tied to the embedding (``lm_head.weight = wte.weight``) or, as an
    untied port, a separate head initialised from it."""

    def __init__(self, tied: bool) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.wte = nn.Embedding(11, 6)
        self.fc = nn.Linear(6, 6)
        self.lm_head = nn.Linear(6, 11, bias=False)
        if tied:
            self.lm_head.weight = self.wte.weight
        else:
            self.lm_head.weight = nn.Parameter(self.wte.weight.detach().clone())

    def forward(self, idx: torch.Tensor) -> torch.Tensor:
        return self.lm_head(torch.tanh(self.fc(self.wte(idx)))).mean(1)


def test_an_untied_head_is_named_as_untied_with_burns_tying_never_as_frozen(tmp_path):
    torch.manual_seed(3)
    batch = {"x": torch.randint(0, 11, (4, 5)), "y": torch.randint(0, 11, (4,))}
    paths = {}
    for tied in (True, False):
        model = _Gpt(tied)
        paths[tied] = record(model, torch.optim.SGD(model.parameters(), lr=0.5), batch,
                             tmp_path / f"gpt{tied}.safetensors", steps=2)
    assert open_trace(paths[True]).metadata["tied"] == {"lm_head.weight": "wte.weight"}
    comparison, found, text = _judge(paths[True], _as_port(tmp_path, paths[False]))
    assert not comparison.passed
    assert "D012" in found and found["D012"].title == UNTIED_TITLE, sorted(found)
    assert "keeps lm_head.weight as its own parameter where PyTorch ties it to wte.weight" in found["D012"].evidence
    assert "x.matmul(self.wte.weight.val().transpose().unsqueeze())" in found["D012"].fix
    assert "freeze them" not in text
    # the tied port itself: no diagnosis
    comparison, found, _ = _judge(paths[True], _as_port(tmp_path, paths[True], name="tied.safetensors"))
    assert comparison.passed and not found


def test_a_forward_port_holding_a_tied_head_as_its_own_copy_passes_and_one_left_unloaded_is_named(tmp_path):
    """Inference: a port that holds the tied head as a parameter of its own, set from the embedding's weight after
    loading (the checkpoint holds the tensor once), holds a copy bit for bit: OK, no diagnosis (a Llama-3.2 port
    had FAILed on "only in B: lm_head.weight"); one whose head burn-store left at its initialisation is named as
    the tied tensor not loaded, with the tying as the fix."""
    from burnside.torch import record_forward

    torch.manual_seed(3)
    batch = {"idx": torch.randint(0, 11, (4, 5))}
    tied = record_forward(_Gpt(True), batch, tmp_path / "tied.safetensors")
    copied = record_forward(_Gpt(False), batch, tmp_path / "copied.safetensors")
    fresh_model = _Gpt(False)
    with torch.no_grad():
        fresh_model.lm_head.weight.copy_(torch.randn(11, 6))
    fresh = record_forward(fresh_model, batch, tmp_path / "fresh.safetensors")
    assert open_trace(tied).metadata["tied"] == {"lm_head.weight": "wte.weight"}
    comparison, found, text = _judge(tied, _as_port(tmp_path, copied, name="copied-port.safetensors"))
    assert comparison.passed and not found, text
    assert comparison.tied_copies == ["lm_head.weight = wte.weight"]
    assert "tied in A, a copy in B (its own parameter, bit for bit the one A ties it to): lm_head.weight = " \
        "wte.weight" in text
    comparison, found, text = _judge(tied, _as_port(tmp_path, fresh, name="fresh-port.safetensors"))
    assert not comparison.passed and "D012" not in found, sorted(found)
    assert "D014" in found, sorted(found)
    assert "PyTorch ties lm_head.weight to wte.weight" in found["D014"].evidence
    assert "model.lm_head.weight = Param::from_tensor(model.wte.weight.val().transpose())" in found["D014"].fix
    assert "only in B" not in text


def _sgd_run(path, lr, weight_decay=0.01, steps=4):
    from burnside.examples.a1 import a1_data, a1_model

    x, y = a1_data()
    model = a1_model()
    return record(model, torch.optim.SGD(model.parameters(), lr=lr, weight_decay=weight_decay), {"x": x, "y": y},
                  path, steps=steps)


def test_a_port_that_diverges_to_nan_is_named_as_diverged_never_as_a_discarded_step(tmp_path):
    a = _sgd_run(tmp_path / "a.safetensors", 0.1)
    # the port's lr blows up (its metadata says PyTorch's): infinity at step 1, NaN from then on
    b = _as_port(tmp_path, _sgd_run(tmp_path / "b0.safetensors", 1e19), optimizer=open_trace(a).optimizer)
    comparison, found, text = _judge(a, b)
    assert not comparison.passed and comparison.diverged == ["b"]
    assert "D016" in found and "D001" not in found, sorted(found)
    first = comparison.b.first_nonfinite
    assert (f"B (burn) diverged at step {comparison.b.diverged_at}: {first} is its first tensor"
            in found["D016"].evidence)
    assert "the port diverges where pytorch trains" in found["D016"].fix
    nan_rows = [line for line in text.splitlines() if line.startswith("step3.loss ")]
    assert nan_rows and "max|diff|=NaN" in nan_rows[0] and "ulps=NaN" in nan_rows[0], nan_rows
    assert "ulps=  0" not in " ".join(line for line in text.splitlines() if "non-finite" in line)
    assert "(nanx)" not in text


def test_every_report_prints_a_nan_row_as_nan(tmp_path):
    import json

    from burnside.report.html import html_report
    from burnside.report.json_report import comparison_json
    from burnside.report.junit import comparison_junit

    a = _sgd_run(tmp_path / "a.safetensors", 0.1)
    b = _as_port(tmp_path, _sgd_run(tmp_path / "b0.safetensors", 1e19), optimizer=open_trace(a).optimizer)
    comparison, found, _ = _judge(a, b)
    junit = comparison_junit(comparison, list(found.values()))
    assert "max|diff|=NaN ulps=NaN" in junit and "ulps=0 " not in junit
    page = html_report(comparison, list(found.values()))
    assert "<td>NaN</td>" in page and "<td>nan</td>" not in page
    rows = {r["name"]: r for r in json.loads(comparison_json(comparison, list(found.values())))["tensors"]}
    assert rows["step3.loss"]["nan_one_side"] == 1  # elements NaN on one side only


def test_both_runs_diverging_bit_for_bit_is_no_proof_of_parity(tmp_path):
    a = _sgd_run(tmp_path / "a.safetensors", 1e19)
    comparison, found, _ = _judge(a, _as_port(tmp_path, a))
    assert not comparison.passed and comparison.diverged == ["a", "b"]
    assert set(found) == {"D016"}, sorted(found)
    assert "both runs diverge" in found["D016"].fix


class _Shifted(nn.Module):
    """fc1 over 6 tokens, a shift per token added to every feature, LayerNorm, fc2: the shift's gradient is zero
    in exact arithmetic (LayerNorm takes each token's mean out), ~1e-9 of rounding in float32, so only weight
    decay moves it, by less than a few ulps of its values."""

    def __init__(self) -> None:
        super().__init__()
        torch.manual_seed(0)
        self.fc1 = nn.Linear(4, 8)
        self.shift = nn.Parameter(torch.linspace(0.3, 3.1, 6).view(6, 1))
        self.norm = nn.LayerNorm(8, elementwise_affine=False)
        self.fc2 = nn.Linear(8, 3)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.fc2(self.norm(self.fc1(x) + self.shift)).mean(1)


def test_a_parameter_moved_only_by_weight_decay_replays_within_its_rounding(tmp_path):
    torch.manual_seed(4)
    batch = {"x": torch.randn(16, 6, 4), "y": torch.randint(0, 3, (16,))}
    runs = {}
    for momentum in (0.0, 0.9):
        model = _Shifted()
        opt = torch.optim.SGD(model.parameters(), lr=0.05, weight_decay=1e-4, momentum=momentum)
        runs[momentum] = record(model, opt, batch, tmp_path / f"shift{momentum}.safetensors", steps=3)
    trace = open_trace(runs[0.0])
    grad = np.abs(np.asarray(trace.array("step0.grads.shift"))).max()
    moved = np.abs(np.asarray(trace.array("step0.params_after.shift"))
                   - np.asarray(trace.array("step0.params_before.shift")))
    assert grad < 1e-6 and moved.max() < 128 * np.spacing(np.float32(3.1)), (grad, moved)  # decay-sized, rounding-sized
    for momentum, path in runs.items():
        comparison, found, _ = _judge(path, _as_port(tmp_path, path, name=f"port{momentum}.safetensors"))
        assert comparison.passed and not found, (momentum, sorted(found))
        for side in (comparison.evidence.optimizer_a, comparison.evidence.optimizer_b):  # each replays its own steps
            assert side.mismatch_step is None, (momentum, side.mismatch_what, side.mismatch_residual)


def test_an_optimizer_setting_the_recorded_steps_do_not_show_still_fails_the_verdict(tmp_path):
    """Momentum's dampening shows from the second step on: over one step the numbers agree, the declared
    optimizers do not, and the verdict says FAIL with D005 rather than OK beside a diagnosis."""
    from burnside.examples.a1 import a1_data, a1_model

    x, y = a1_data()
    model = a1_model()
    a = record(model, torch.optim.SGD(model.parameters(), lr=0.1, momentum=0.9), {"x": x, "y": y},
               tmp_path / "a.safetensors", steps=1)
    b = _as_port(tmp_path, a, optimizer={**open_trace(a).optimizer, "dampening": 0.1})
    comparison, found, text = _judge(a, b)
    assert not comparison.failed_rows
    assert not comparison.passed and comparison.optimizer_differences == ["dampening"]
    assert "D005" in found and "dampening: pytorch 0.0, burn 0.1" in found["D005"].evidence
    assert "the optimizers are declared otherwise (dampening; D005 below)" in text
    # declared alike: OK, no diagnosis
    comparison, found, _ = _judge(a, _as_port(tmp_path, a, name="same.safetensors"))
    assert comparison.passed and not found


def test_optimizer_state_pairs_only_within_its_slot(tmp_path):
    """A port that records Adam's state under other slot names: `optim.step.X` is never paired with
    `optim.avg.X` and printed as the same name on both sides."""
    from burnside.examples.a1 import a1_data, a1_model

    x, y = a1_data()
    model = a1_model()
    trace = open_trace(record(model, torch.optim.Adam(model.parameters(), lr=0.01), {"x": x, "y": y},
                              tmp_path / "adam.safetensors", steps=1))
    only_a = [n for n in trace.names if ".optim." in n]
    only_b = [n.replace(".optim.exp_avg.", ".optim.avg.").replace(".optim.exp_avg_sq.", ".optim.avg_sq.")
              for n in only_a if ".optim.step." not in n]
    pairs, _, _ = pair_renamed(only_a, only_b)
    assert all(p.a.split(".")[2] == "step" or p.a.split(".")[2] != p.b.split(".")[2] or p.a == p.b for p in pairs)
    assert not any(p.a.split(".")[2] == "step" for p in pairs), pairs
    assert all(a != b for a, b, _ in rename_rules(pairs))


def test_a_forward_trace_names_no_loading_fault_for_a_constant_buffer_the_port_computes(tmp_path):
    """An inference port of the same block: the mask is outside the state_dict, so not loading it is no D014."""
    from burnside.torch import record_forward

    torch.manual_seed(5)
    a = record_forward(_Block(False), [{"x": torch.randn(2, 6, 8)}], tmp_path / "forward.safetensors")
    assert open_trace(a).metadata["buffers_nonpersistent"] == ["bias"]
    comparison, found, _ = _judge(a, _as_port(tmp_path, a, drop=lambda n: ".buffers." in n, kind="forward"))
    assert comparison.passed and not comparison.loading and not found
    assert comparison.constants_only_in_a == ["step0.buffers.bias"]
