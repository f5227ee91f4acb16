"""S13: pitb-opt `discard adam`, dropped Adam steps still advance the moments."""

from __future__ import annotations

import numpy as np

from burnside.experiments import Context, Experiment, ExperimentResult

TOL = 1e-6


def run(ctx: Context) -> ExperimentResult:
    """A: 3 dropped then fixed (same Adam); B: fresh; C: 3 dropped then a new Adam. C == B, A drifts."""
    from burnside.examples.a1 import torch_losses
    from burnside.burn.programs import run_program
    from burnside.compare import float_ulps

    run = run_program("discard", ["adam"], console=ctx.console if ctx.progress else None)
    ctx.console.print(run.text, markup=False)
    out = run.json
    torch = torch_losses(5, "adam")
    ctx.console.print(f"PyTorch Adam: {[round(v, 8) for v in torch]}")
    a, b = np.array(out["a"], dtype=np.float32), np.array(out["b"], dtype=np.float32)
    drift = np.abs(a - b)
    ctx.console.print(f"|A - B| by step: {[f'{d:.1e}' for d in drift]}")
    ulps = float_ulps(b, np.array(torch, dtype=np.float32))
    diff = float(np.max(np.abs(b.astype(np.float64) - np.array(torch))))
    return ExperimentResult(
        claims=[
            ("fresh == discarded+new, bit for bit", out["b_bits"] == out["c_bits"]),
            (f"A drifts away from B step by step ({drift[4]:.1e} at step 5)",
             bool(drift[4] > 1e-4 and all(drift[i] < drift[i + 1] for i in range(1, 4)))),
            (f"B matches PyTorch Adam within {TOL:g} ({diff:.1e}, {int(ulps.max())} f32 ulps at most)", diff <= TOL),
        ],
    )


EXPERIMENT = Experiment("S13", "pitb-opt discard adam: A/B/C after dropped Adam steps", "001", ("burn", "torch"), run)
