"""A1's PyTorch side: the seed's MLP, weights and batch, rebuilt from its printed numbers.

The burn side of A1 (building and running `train-step`) is `burnside.burn.a1`.

Every value is computed in Python floats (f64) with the C library's sin/cos, as
Rust's f64 does, and rounded to f32 exactly once, so both sides start bit-identical.
"""

from __future__ import annotations

import math

import numpy as np

from burnside.optimizers import OPTIMIZERS, a1_optimizers

#: The seed's published numbers, which the A1 reconstruction must reproduce.
SEED_SGD_LOSSES = (1.1400575637817383, 1.105960726737976, 1.0757620334625244)
SEED_FC2_BIAS_GRAD = (0.11327312141656876, 0.03841985762119293, -0.1516929566860199)
SEED_ADAM_LOSSES = (1.14005756, 1.10198629, 1.06721914, 1.03404224, 1.00236571)
SGD_LR = 0.1
ADAM_LR = 0.01
ADAM_EPS = 1e-8
MOMENTUM = 0.9
ADAMW_WEIGHT_DECAY = 0.01
#: RMSprop's and Adagrad's learning rate (PyTorch's default for both); their other settings are PyTorch's defaults.
RMSPROP_LR = 0.01
ADAGRAD_LR = 0.01
#: Adafactor's learning rate (PyTorch's default, the cap of its relative step).
ADAFACTOR_LR = 0.01
#: Muon's learning rate and lr adjustment. "match_rms_adamw" (0.2 sqrt(max(A, B))) reads a matrix's shape the same
#: way in either layout; PyTorch's default "original" (sqrt(max(1, A/B))) is fan-out over fan-in, which burn's
#: Muon reads from its transposed Linear weight [d_in, d_out] (docs/compare.md): A1's runs use the symmetric one.
MUON_LR = 0.02
MUON_ADJUST_LR_FN = "match_rms_adamw"
#: L-BFGS's learning rate and iterations per step; its other settings are PyTorch's defaults. With PyTorch's lr 1 and
#: 20 iterations A1's loss reaches 2e-5 within a step, where the parameters are ill-determined and float32 runs part
#: from the float64 one by 0.75; lr 0.1 and 5 iterations stay within 1.5e-6 of it.
LBFGS_LR = 0.1
LBFGS_MAX_ITER = 5
#: The optimizers A1 trains with on both sides (`burnside run a1 --optim`).
OPTIMS = a1_optimizers()
#: What `burnside run --help` says A1 is: the model and each optimizer with the settings `a1_optimizer` gives it.
TITLE = ("the seed's two-Linear MLP (SGD lr 0.1, with momentum 0.9, Adam or AdamW lr 0.01, eps 1e-8, RMSprop or "
         "Adagrad lr 0.01, Adafactor lr 0.01, Muon lr 0.02, L-BFGS lr 0.1)")
#: The parameters A1's Muon trains: torch.optim.Muon takes only 2-D parameters, so the biases are frozen (no gradient
#: on either side) and keep their start.
MUON_PARAMS = ("fc1.weight", "fc2.weight")
LABELS = (0, 2, 1, 2)


def a1_arrays() -> dict[str, np.ndarray]:
    """Inputs and initial parameters in PyTorch layout, as f32 (labels i64)."""
    x = [[0.1 * (4 * b + f) - 0.5 for f in range(4)] for b in range(4)]
    fc1_w = [[0.5 * math.sin(4 * o + i + 1) for i in range(4)] for o in range(8)]
    fc1_b = [0.01 * o for o in range(8)]
    fc2_w = [[0.5 * math.cos(8 * o + i + 1) for i in range(8)] for o in range(3)]
    fc2_b = [-0.02 * o for o in range(3)]
    def f32(values) -> np.ndarray:  # computed in f64, rounded to f32 exactly once
        return np.array(values, dtype=np.float64).astype(np.float32)

    return {
        "x": f32(x),
        "y": np.array(LABELS, dtype=np.int64),
        "fc1.weight": f32(fc1_w),
        "fc1.bias": f32(fc1_b),
        "fc2.weight": f32(fc2_w),
        "fc2.bias": f32(fc2_b),
    }


def a1_f32_arithmetic_inputs() -> dict[str, np.ndarray]:
    """The S3 mistake: x and biases computed in f32 arithmetic (`0.1 * k as f32 - 0.5` in Rust)."""
    k = np.arange(16, dtype=np.float32)
    o8 = np.arange(8, dtype=np.float32)
    return {
        "x": (np.float32(0.1) * k - np.float32(0.5)).reshape(4, 4),
        "fc1.bias": np.float32(0.01) * o8,
    }


def a1_model():
    """The A1 MLP (fc1 -> ReLU -> fc2) with the A1 weights."""
    import torch
    from torch import nn

    class Mlp(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.fc1 = nn.Linear(4, 8)
            self.fc2 = nn.Linear(8, 3)

        def forward(self, x: torch.Tensor) -> torch.Tensor:
            return self.fc2(torch.relu(self.fc1(x)))

    arrays = a1_arrays()
    model = Mlp()
    with torch.no_grad():
        for name, p in model.named_parameters():
            p.copy_(torch.from_numpy(arrays[name]))
    return model


def a1_data():
    """The A1 batch: x [4, 4] f32 and labels y [4] i64."""
    import torch

    arrays = a1_arrays()
    return torch.from_numpy(arrays["x"]), torch.from_numpy(arrays["y"])


#: The PyTorch settings `NAME:key=value,...` may give A1's optimizers (the same on the burn side).
SETTINGS = {name: o.a1_settings for name, o in OPTIMIZERS.items() if o.a1_settings}
#: Settings that are counts (given to PyTorch as int).
_COUNTS = ("ns_steps", "max_iter", "history_size")


def optimizer_settings(optim: str) -> tuple[str, dict]:
    """``"rmsprop:momentum=0.9,centered=true"`` -> ``("rmsprop", {"momentum": 0.9, "centered": True})``: one of
    OPTIMS and, for RMSprop and Adagrad, PyTorch keyword settings (`SETTINGS`) over A1's, which rust/a1's
    `optimizer_named` reads the same way."""
    name, _, rest = optim.partition(":")
    if name not in OPTIMS:
        raise ValueError(f"unknown optimizer {name!r}; use one of {', '.join(OPTIMS)}")
    settings: dict = {}
    for item in filter(None, rest.split(",")):
        key, eq, value = item.partition("=")
        if not eq or key not in SETTINGS.get(name, ()):
            raise ValueError(f"{optim!r}: {item!r} is no setting of {name} "
                             f"(expected key=value, key one of {', '.join(SETTINGS.get(name, ())) or 'none'})")
        settings[key] = (value == "true" if value in ("true", "false") else int(value) if key in _COUNTS
                         else float(value))
    return name, settings


def a1_optimizer(model, optim: str):
    """A1's optimizers: SGD lr 0.1 (plain or momentum 0.9), Adam or AdamW lr 0.01 (eps 1e-8, AdamW decay 0.01),
    RMSprop or Adagrad lr 0.01 with PyTorch's defaults (RMSprop momentum 0, eps 1e-8; Adagrad eps 1e-10), Adafactor
    lr 0.01, Muon lr 0.02 on the two weights (`MUON_PARAMS`, adjust_lr_fn "match_rms_adamw", weight decay 0.1),
    L-BFGS lr 0.1 with 5 iterations a step, each with PyTorch's defaults otherwise, or the
    settings an ``optim`` of the form ``NAME:key=value,...`` gives them (`optimizer_settings`)."""
    import torch

    optim, settings = optimizer_settings(optim)
    if optim == "sgd":
        return torch.optim.SGD(model.parameters(), lr=SGD_LR)
    if optim == "momentum":
        return torch.optim.SGD(model.parameters(), lr=SGD_LR, momentum=MOMENTUM)
    if optim == "adam":
        return torch.optim.Adam(model.parameters(), lr=ADAM_LR, eps=ADAM_EPS)
    if optim == "adamw":
        return torch.optim.AdamW(model.parameters(), lr=ADAM_LR, eps=ADAM_EPS, weight_decay=ADAMW_WEIGHT_DECAY)
    if optim == "rmsprop":
        return torch.optim.RMSprop(model.parameters(), **{"lr": RMSPROP_LR, **settings})
    if optim == "adagrad":
        return torch.optim.Adagrad(model.parameters(), **{"lr": ADAGRAD_LR, **settings})
    if optim == "adafactor":
        return torch.optim.Adafactor(model.parameters(), **{"lr": ADAFACTOR_LR, **settings})
    if optim == "muon":
        params = dict(model.named_parameters())
        for name in set(params) - set(MUON_PARAMS):
            # frozen: a parameter no optimizer holds would keep collecting gradients (zero_grad clears the optimizer's)
            params[name].requires_grad_(False)
        return torch.optim.Muon([params[n] for n in MUON_PARAMS],
                                **{"lr": MUON_LR, "adjust_lr_fn": MUON_ADJUST_LR_FN, **settings})
    if optim == "lbfgs":
        return torch.optim.LBFGS(model.parameters(), **{"lr": LBFGS_LR, "max_iter": LBFGS_MAX_ITER, **settings})
    raise ValueError(f"unknown optimizer {optim!r}; use one of {', '.join(OPTIMS)}")


def torch_losses(steps: int, optim: str = "sgd") -> list[float]:
    """The PyTorch side's loss before each of ``steps`` steps on A1 (the seed's step_helper.py loop)."""
    import torch
    from torch import nn

    x, y = a1_data()
    model = a1_model()
    opt = a1_optimizer(model, optim)
    losses = []

    def closure():  # L-BFGS re-evaluates the loss (other optimizers step on the loop's gradients)
        opt.zero_grad()
        again = nn.functional.cross_entropy(model(x), y)
        again.backward()
        return again

    for _ in range(steps):
        loss = nn.functional.cross_entropy(model(x), y)
        opt.zero_grad()
        loss.backward()
        opt.step(closure) if isinstance(opt, torch.optim.LBFGS) else opt.step()
        losses.append(loss.item())
    return losses


def record_torch(path, *, steps: int = 1, optim: str = "sgd", progress=None):
    """Record the A1 PyTorch side (the seed's train_step.py) into a trace at ``path``.

    ``progress`` (a `burnside.progress.StepProgress`) is told the steps done.
    """
    from burnside.torch import record

    # No torch.use_deterministic_algorithms: it imports torch._dynamo (~2 s), and A1's CPU
    # kernels (addmm, relu, cross_entropy) are deterministic already.
    model = a1_model()
    x, y = a1_data()
    # No activations: A1's trace is the seed's table, tensor for tensor, and its burn side
    # (train-step) predates activation recording.
    return record(model, a1_optimizer(model, optim), {"x": x, "y": y}, path, steps=steps,
                  metadata={"model": "a1"}, activations=False, progress=progress)


def record_reference(path, *, steps: int = 1, optim: str = "sgd", progress=None):
    """Record A1's float64 reference (and its f32-constants variant, for Adam) at ``path``."""
    from burnside.recording.reference import record_reference as record_double

    model = a1_model()
    x, y = a1_data()
    return record_double(model, a1_optimizer(model, optim), {"x": x, "y": y}, path, steps=steps,
                         metadata={"model": "a1"}, progress=progress)
