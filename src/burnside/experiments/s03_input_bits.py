"""S3: inputs computed in f32 on the Rust side are not the PyTorch side's inputs."""

from __future__ import annotations

import numpy as np

from burnside.experiments import Context, Experiment, ExperimentResult, record_a1_pair


def run(ctx: Context) -> ExperimentResult:
    """burn's A1 built with `0.1 * k as f32 - 0.5`: the comparison must catch the start first."""
    from burnside.compare import Tolerance, Tolerances, float_ulps
    from burnside.trace import open_trace

    parity = record_a1_pair(ctx, "a1-f32-inputs", f32_inputs=True, tolerances=Tolerances(Tolerance(atol=1e-6)))
    torch_trace, burn_trace = open_trace(parity.torch_trace), open_trace(parity.burn_trace)
    x_torch = np.asarray(torch_trace.array("step0.inputs.x")).ravel()
    x_burn = np.asarray(burn_trace.array("step0.inputs.x")).ravel()
    x_ulps = float_ulps(x_torch, x_burn)
    differing = np.flatnonzero(x_ulps)
    for k in differing:
        ctx.console.print(f"x[{k:>2}]  python {float(x_torch[k]):.17g}  rust f32 {float(x_burn[k]):.17g}  "
                          f"({int(x_ulps[k])} ulp)")
    bias_torch = np.asarray(torch_trace.array("step0.params_before.fc1.bias"))
    bias_burn = np.asarray(burn_trace.array("step0.params_before.fc1.bias"))
    bias_ulps = float_ulps(bias_torch, bias_burn)
    for o in np.flatnonzero(bias_ulps):
        ctx.console.print(f"fc1.bias[{o}]  python {float(bias_torch[o]):.17g}  rust f32 {float(bias_burn[o]):.17g}")
    other_params_equal = all(
        np.array_equal(np.asarray(torch_trace.array(n)), np.asarray(burn_trace.array(n)))
        for n in ("step0.params_before.fc1.weight", "step0.params_before.fc2.weight", "step0.params_before.fc2.bias"))

    comparison = parity.comparison
    flagged = [row.name for row in comparison.start_mismatch]
    ctx.console.print(f"start not bit-identical: {', '.join(flagged)}")
    diagnoses = parity.diagnoses
    for d in diagnoses:
        ctx.console.print(f"{d.rule} {d.title}: {d.evidence}")
    return ExperimentResult(
        claims=[
            (f"{len(differing)} of 16 inputs differ, by {int(x_ulps.max())} ulps at most",
             len(differing) == 7 and int(x_ulps[differing].min()) >= 1 and int(x_ulps.max()) <= 3),
            ("fc1.bias[5] differs by 1 ulp, and nothing else in the parameters",
             list(np.flatnonzero(bias_ulps)) == [5] and int(bias_ulps[5]) == 1 and other_params_equal),
            ("the comparison flags inputs.x and params_before.fc1.bias as not bit-identical",
             any(n.endswith("inputs.x") for n in flagged)
             and any(n.endswith("params_before.fc1.bias") for n in flagged)),
            ("a diagnosis names the starting point (D006)", any(d.rule == "D006" for d in diagnoses)),
        ],
    )


EXPERIMENT = Experiment("S3", "input bit-identity: f32 arithmetic on the Rust side", "000", ("torch", "burn"), run)
