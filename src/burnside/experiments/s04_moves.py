"""S4: train-one bin `moves`, where the tensors go in one burn optimizer step."""

from __future__ import annotations

import re

from burnside.experiments import Context, Experiment, ExperimentResult

_PARAM_ID = re.compile(r"^[0-9a-z]{13}$")


def run(ctx: Context) -> ExperimentResult:
    """GradientsParams keyed by ParamId; the step returns a new model with the same ids."""
    from burnside.examples.a1 import SEED_FC2_BIAS_GRAD
    from burnside.burn.programs import run_program

    moves = run_program("moves", console=ctx.console if ctx.progress else None)
    ctx.console.print(moves.text, markup=False)
    out = moves.json
    grad_diff = max(abs(a - b) for a, b in zip(out["fc2_bias_grad"], SEED_FC2_BIAS_GRAD))
    ids = list(out["ids"].values())
    return ExperimentResult(
        claims=[
            ("GradientsParams.len() = 4", out["grads_len"] == 4),
            ("each ParamId prints as 13 base32 characters, all different",
             all(_PARAM_ID.match(i) for i in ids) and len(set(ids)) == len(ids)),
            ("get::<2>(id).is_some() for fc1.weight and fc2.weight", out["get_is_some"] == [True, True]),
            (f"fc2.bias grad matches PyTorch's within 1e-6 ({grad_diff:.1e})", grad_diff <= 1e-6),
            ("the step changed fc2.bias", out["fc2_bias_after"] != out["fc2_bias_before"]),
            ("the clone taken before the step keeps the old values", out["clone_after"] == out["fc2_bias_before"]),
            ("fc2.bias ParamId unchanged", out["param_id_unchanged"] is True),
            ("param still require_grad", out["require_grad"] is True),
        ],
    )


EXPERIMENT = Experiment("S4", "train-one moves: GradientsParams, ParamId, what the step returns", "000", ("burn",), run)
