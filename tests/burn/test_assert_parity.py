"""`assert_parity` with the float64 reference, on traces both frameworks really recorded: rounding noise
passes, a porting bug fails with a message that names the side and the layer, as `compare` does."""

from __future__ import annotations

import pytest

from burnside.burn.locate import rust_workspace
from burnside.burn.port import record_port
from burnside.compare import open_reference
from burnside.pipeline import compare_with_evidence
from burnside.examples import cnn
from burnside.testing import MAX_ROWS, assert_parity
from burnside.trace import open_trace

STEPS = 2


@pytest.fixture(scope="module")
def cnn_traces(programs, tmp_path_factory):
    """The CNN example's PyTorch trace, float64 reference, and burn traces of the faithful and bn-eps ports."""
    root = tmp_path_factory.mktemp("cnn")
    torch_trace = cnn.record_torch(root / "torch.safetensors", steps=STEPS)
    reference = cnn.record_torch(root / "reference.safetensors", steps=STEPS, reference=True)
    burn = {bug: record_port(torch_trace, rust_workspace() / "cnn", cnn.BURN_BIN,
                             ["--steps", str(STEPS), *(["--bug", bug] if bug else [])], root / (bug or "faithful"))
            for bug in (None, "bn-eps")}
    return torch_trace, reference, burn


def test_a_faithful_port_passes_with_the_reference_where_a_plain_tolerance_fails(cnn_traces):
    torch_trace, reference, burn = cnn_traces
    with pytest.raises(AssertionError) as caught:
        assert_parity(burn[None], torch_trace)
    # burn's BatchNorm keeps the biased running variance: beyond 1e-6 on its own
    assert "step0.buffers.bn.running_var" in str(caught.value)
    comparison = assert_parity(burn[None], torch_trace, reference=reference)
    beyond = [r for r in comparison.rows if r.stats.out_of_tol]
    assert beyond and all(r.ref.noise for r in beyond)  # passed as noise, not by a wider tolerance
    assert comparison.tolerances.default.atol == 1e-6


def test_a_broken_port_names_its_side_and_layer_and_keeps_the_message_short(cnn_traces):
    torch_trace, reference, burn = cnn_traces
    with pytest.raises(AssertionError) as caught:
        assert_parity(burn["bn-eps"], torch_trace, reference=reference)
    message = str(caught.value)
    lines = message.splitlines()
    assert lines[0] == f"{burn['bn-eps']} does not train like {torch_trace}:"
    assert ("real difference: B (burn) is" in message
            and "from step0.activations.bn (BatchNorm2d) on" in message), message
    comparison = compare_with_evidence(open_trace(torch_trace), open_trace(burn["bn-eps"]),
                                reference=open_reference(reference))
    failing = [r.name for r in comparison.failed_rows]
    rows = [line for line in lines if " n=" in line]
    # the failing rows in pipeline order, up to MAX_ROWS, and a count of the rest; rows that passed (the
    # conv before the bug, running_var judged noise by the reference) are left out
    assert [line.split()[0] for line in rows] == failing[:MAX_ROWS]
    assert len(failing) > MAX_ROWS and all(line.endswith("FAIL") and "B off" in line for line in rows)
    assert f"... and {len(failing) - MAX_ROWS} more rows out of tolerance" in message
    noise = next(r for r in comparison.rows if r.name == "step0.buffers.bn.running_var")
    assert noise.stats.out_of_tol and noise.passed  # beyond 1e-6, rounding by the reference: not shown
    assert any(line.startswith("worst=") and line.endswith(" FAIL") for line in lines)
