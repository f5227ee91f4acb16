"""The inference examples, `burnside run classifier` and `burnside run encoder`: a pretrained PyTorch model saved
as a real ``.pt``, its eval-mode forward passes recorded with `record_forward`, and its burn port (rust/classifier,
rust/encoder) loading that checkpoint through burn-store and recording the same batches on a device without
autodiff. The faithful ports are OK with every loaded tensor bit-identical; each ``--bug`` FAILs, first at the
layer it is in.

Only the two example crates are built (a second or so each once warm); PyTorch's side and its float64 reference
are recorded once per example.
"""

from __future__ import annotations

import subprocess
import sys

import pytest

from burnside.compare.tolerance import Tolerance, Tolerances
from burnside.pipeline import Parity, record_and_compare
from burnside.targets import get_target
from burnside.trace import open_trace

BATCHES = 3


@pytest.fixture(scope="module")
def run_case(tmp_path_factory):
    """``run_case(name, bug=None) -> Parity``: the burn port of example ``name`` (with ``bug``) against the
    PyTorch trace and its float64 reference, recorded once per example, judged as `burnside run` judges."""
    root = tmp_path_factory.mktemp("inference")
    recorded: dict[str, tuple] = {}
    cases: dict[tuple, Parity] = {}

    def run(name: str, bug: str | None = None) -> Parity:
        target = get_target(name)
        run_dir = root / name
        run_dir.mkdir(exist_ok=True)
        if name not in recorded:
            torch_trace = target.record_torch(run_dir / f"{name}.torch.safetensors", steps=BATCHES)
            reference = target.record_reference(run_dir / f"{name}.reference.safetensors", steps=BATCHES)
            recorded[name] = (torch_trace, reference)
        if (name, bug) not in cases:
            torch_trace, reference = recorded[name]

            def burn_side(path, torch_path):
                return target.record_burn(path, torch_path, steps=BATCHES, bug=bug, console=None)

            cases[name, bug] = record_and_compare(
                torch_trace, burn_side, torch_out=torch_trace,
                burn_out=run_dir / f"{name}-{bug or 'faithful'}.burn.safetensors",
                tolerances=Tolerances(Tolerance(atol=target.atol)), reference=reference)
        return cases[name, bug]

    return run


def first_diverging_layer(parity: Parity, batch: int = 0) -> str | None:
    """The first module, in PyTorch's execution order, whose output at ``batch`` is out of tolerance or of another
    shape than PyTorch's."""
    comparison = parity.comparison
    failed = {r.name for r in comparison.rows if not r.passed} | {p.name for p in comparison.structure}
    order = open_trace(parity.torch_trace).metadata["activations"]
    return next((m for m in order if f"step{batch}.activations.{m}" in failed), None)


def loading_faults(parity: Parity) -> set[str]:
    """The loaded tensors (``step0.params_before.*``, ``step0.buffers.*``) that are not PyTorch's, bit for bit."""
    return {r.name.split(".", 1)[1] for r in parity.comparison.rows
            if r.stage in ("params_before", "buffers") and r.stats.max_abs != 0} | \
           {p.name.split(".", 1)[1] for p in parity.comparison.structure if p.name.startswith("step0.")
            and p.name.split(".")[1] in ("params_before", "buffers")}


def table(parity: Parity) -> str:
    """What failed, as the assertion message shows it."""
    c = parity.comparison
    rows = [f"{r.name} max_abs={r.stats.max_abs:.3g}" for r in c.rows if not r.passed]
    rows += [f"{p.name}: {p.what} A {p.a} B {p.b}" for p in c.structure]
    rows += [f"{d.rule} {d.title}: {d.evidence}" for d in parity.diagnoses]
    return "\n".join(rows) + f"\nworst={c.worst:.3g}"


@pytest.mark.parametrize("name", ["classifier", "encoder"])
def test_the_faithful_port_loads_the_checkpoint_bit_for_bit_and_is_ok(run_case, name):
    parity = run_case(name)
    assert parity.passed, table(parity)
    burn = open_trace(parity.burn_trace)
    torch = open_trace(parity.torch_trace)
    assert burn.metadata["kind"] == torch.metadata["kind"] == "forward"
    assert burn.metadata["mode"] == "inference" and torch.metadata["mode"] == "eval"
    assert burn.metadata["steps"] == torch.metadata["steps"] == BATCHES
    assert not [n for n in burn.names if ".grads." in n or ".params_after." in n]
    # what burn-store loaded from the .pt is the state_dict PyTorch saved, parameters and running statistics
    loaded = [r for r in parity.comparison.rows if r.stage in ("params_before", "buffers")]
    assert {r.name for r in loaded} == {n for n in torch.names if n.startswith(("step0.params_before.",
                                                                                 "step0.buffers."))
                                         and not n.endswith("num_batches_tracked")}  # which burn does not keep
    assert all(r.stats.max_abs == 0 for r in loaded), table(parity)
    # every module PyTorch ran, every batch, within the examples' measured 1e-5 (the outputs within 1e-6)
    compared = {r.name for r in parity.comparison.rows}
    for k in range(BATCHES):
        assert {f"step{k}.activations.{m}" for m in torch.metadata["activations"]} <= compared
        assert f"step{k}.outputs.output" in compared
    assert parity.comparison.worst < 1e-6


def test_the_pretrained_running_statistics_are_neither_fresh_nor_the_batches_own(run_case):
    """What makes `bn-train` and `no-running-stats` visible: the checkpoint's statistics are far from 0/1 and from
    the statistics of the batches the forward passes see."""
    import torch

    from burnside.examples import classifier

    model = classifier.pretrained()
    x = classifier.batches(1)[0]["x"]
    with torch.no_grad():
        conv1 = model.conv1(x)
    batch_mean, batch_var = conv1.mean((0, 2, 3)), conv1.var((0, 2, 3), unbiased=False)
    assert (model.bn1.running_mean - batch_mean).abs().max() > 0.5
    assert (model.bn1.running_var - batch_var).abs().max() > 0.5
    assert model.bn1.running_mean.abs().max() > 0.5 and (model.bn1.running_var - 1).abs().max() > 0.5
    assert int(model.bn1.num_batches_tracked) == 500


@pytest.mark.parametrize(("name", "bug", "layer", "loaded_wrong", "cause"), [
    ("classifier", "bn-train", "bn1", set(), ("D015", "B (burn)'s with the batch statistics")),
    ("classifier", "stride", "conv2", set(), ("D011", "stride")),
    ("classifier", "padding", "conv1", set(), ("D011", "padding")),
    ("classifier", "no-running-stats", "bn1", {"buffers.bn1.running_mean", "buffers.bn1.running_var",
                                               "buffers.bn2.running_mean", "buffers.bn2.running_var"},
     ("D014", "a fresh BatchNorm's")),
    ("classifier", "dropout-on", "dropout", set(), ("D013", "active at inference")),
    ("encoder", "ln-eps", "ln", set(), ("D011", "epsilon")),
    ("encoder", "gelu-tanh", "gelu", set(), ("D011", "tanh")),
    ("encoder", "gates", "gru", {"params_before.gru.weight_ih_l0", "params_before.gru.weight_hh_l0",
                                 "params_before.gru.bias_ih_l0", "params_before.gru.bias_hh_l0"},
     ("D014", "gate order")),
    ("encoder", "transposed", "head", {"params_before.head.weight"}, ("D014", "where they needed a transpose")),
    ("encoder", "time-axis", "gru", set(), ("D011", "B (burn) reads [seq, batch, features]")),
])
def test_each_bug_fails_first_at_its_layer_with_its_cause_named(run_case, name, bug, layer, loaded_wrong, cause):
    parity = run_case(name, bug)
    assert not parity.passed, f"--bug {bug} passed"
    assert first_diverging_layer(parity) == layer, table(parity)
    assert loading_faults(parity) == loaded_wrong, table(parity)
    assert parity.diagnoses, f"--bug {bug}: nothing named\n{table(parity)}"
    first = parity.diagnoses[0]
    rule, words = cause
    assert first.rule == rule and words in f"{first.title}: {first.evidence}", table(parity)


def test_bn_train_runs_on_an_autodiff_device_and_says_so(run_case):
    burn = open_trace(run_case("classifier", "bn-train").burn_trace)
    assert burn.metadata["mode"] == "autodiff"


@pytest.mark.parametrize("name", ["classifier", "encoder"])
def test_burnside_run_is_ok_and_a_bug_fails(tmp_path, name):
    command = [sys.executable, "-c", "from burnside.cli import main; main()", "run", name, "--out-dir", str(tmp_path)]
    ok = subprocess.run(command, capture_output=True, text=True, timeout=600)
    assert ok.returncode == 0, ok.stdout + ok.stderr
    assert any(line.startswith("worst=") and line.endswith(" OK") for line in ok.stdout.splitlines()), ok.stdout
    assert (tmp_path / name / f"{name}.pt").is_file()
    # what PyTorch fed each layer and the buffers burn does not keep: a line per stage, not a line per tensor
    unrecorded = [line.split(": ", 1)[1].split()[1] for line in ok.stdout.splitlines()
                  if line.startswith("not recorded in B (optional, not compared): ")]
    assert "layer_inputs" in unrecorded and len(unrecorded) == len(set(unrecorded)), ok.stdout
    bug = get_target(name).bugs[0]
    failed = subprocess.run([*command, "--bug", bug], capture_output=True, text=True, timeout=600)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert any(line.startswith("worst=") and line.endswith(" FAIL") for line in failed.stdout.splitlines())


def test_a_padding_slip_is_one_shape_line_before_the_verdict(run_case):
    # every layer after the slip, in every batch, is of another shape: one line says so, with the first few
    parity = run_case("classifier", "padding")
    proc = subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", "compare",
                           str(parity.torch_trace), str(parity.burn_trace), "--reference", str(parity.reference_trace)],
                          capture_output=True, text=True, timeout=600)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    shapes = [line for line in proc.stdout.splitlines() if "mismatch" in line]
    assert len(parity.comparison.structure) == 6 * BATCHES
    assert len(shapes) == 1 and shapes[0].startswith(
        f"shape mismatch in {6 * BATCHES} activations tensors: step0.activations.conv1 (A [8, 16, 16, 16], "
        "B [8, 16, 14, 14]), "), proc.stdout
    assert shapes[0].endswith(" more (`--json` lists them all under structure, the HTML report (--report) too)")


def test_the_port_refuses_a_missing_or_unreadable_checkpoint_in_one_line(run_case, tmp_path):
    from burnside.burn.locate import target_dir

    parity = run_case("encoder")
    binary = target_dir() / "release" / "encoder"
    init = parity.burn_trace.parent / "init.safetensors"
    not_a_checkpoint = tmp_path / "model.pt"
    not_a_checkpoint.write_text("not a checkpoint")
    for checkpoint in (tmp_path / "missing.pt", not_a_checkpoint):
        proc = subprocess.run([str(binary), "--init", str(init), "-o", str(tmp_path / "out.safetensors"),
                               "--checkpoint", str(checkpoint)], capture_output=True, text=True, timeout=60)
        assert proc.returncode != 0
        last = proc.stderr.strip().splitlines()[-1]
        assert last.startswith("encoder: ") and str(checkpoint) in last, proc.stderr
    proc = subprocess.run([str(binary), "--init", str(init), "-o", str(tmp_path / "out.safetensors")],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 2 and "missing --checkpoint" in proc.stderr.strip().splitlines()[-1]
