"""Optimizer forensics: what optimizer a trace's own numbers show, next to what its metadata says.

Each step is replayed in float64 from the side's own recorded tensors (params before, gradients,
the previous step's optimizer state) with the declared optimizer; a step whose recorded update
(or state) the replay does not reproduce is where the update differs from the declared optimizer.
The effective settings are measured by least squares from the same tensors:

- SGD: `after - before = -lr * (g + wd * before)` (step 0, or any step without momentum);
  momentum: `buf_k = momentum * buf_{k-1} + (1 - dampening) * g_k`, `after - before = -lr * buf_k`.
- Adam/AdamW: `exp_avg_0 = (1 - beta_1) g`, `exp_avg_sq_0 = (1 - beta_2) g^2`, and at step 0
  `|m_hat / delta| = sqrt(v_hat) / lr + eps / lr` (a line in sqrt(v_hat)): lr and eps.

A learning-rate schedule (`lr_per_step` in the metadata: the lr each step used) replays each step
with its own lr.

Gradient clipping (`clip_grad_norm` in the metadata, PyTorch's `clip_grad_norm_`) scales step k's
gradients by `c_k = min(1, max_norm / (||g_k|| + 1e-6))`, `||g_k||` the norm of all the recorded
(unclipped) gradients of the step together; the replay scales them so. For Adam the scale each step
actually applied is measured too, from both moments with the declared betas (`exp_avg` moves by
`(1 - beta_1) s g`, `exp_avg_sq` by `(1 - beta_2) s^2 g^2`): where the two agree on an `s` other than
`c_k`, the updates show other clipping, reported as the `clip_grad_norm` they imply (`s ||g_k||`, or
infinity for none).
"""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from burnside.trace import Trace

#: Elements of each tensor the replay reads (the first ones, flat): an optimizer setting shows in
#: every element, and this keeps forensics memory-bounded and fast on multi-GB traces.
SAMPLE = 1 << 16
#: A replayed update (or state) further than this, relative to the tensor's update (state), is not
#: the declared optimizer. Correct A1 ports stay below 2e-4 (burn's f32 Adam constants: 1.3e-5 in
#: exp_avg_sq; an SGD update's f32 rounding 6e-5); the smallest bug measured is 3e-2.
REPLAY_TOLERANCE = 1e-3


@dataclass
class OptimizerForensics:
    """What one trace's updates show about its optimizer."""

    declared: dict
    measured: dict[str, float] = field(default_factory=dict)
    #: the first step whose update or state the declared optimizer does not reproduce
    mismatch_step: int | None = None
    mismatch_what: str = ""  # e.g. "params_after.fc1.weight"
    mismatch_residual: float = 0.0

    def to_dict(self) -> dict:
        """For `--json`."""
        return {"measured": self.measured, "mismatch_step": self.mismatch_step, "mismatch_what": self.mismatch_what,
                "mismatch_residual": self.mismatch_residual}


def _get(trace: Trace, name: str) -> np.ndarray | None:
    if name not in trace:
        return None
    values = np.array(trace.values(name).reshape(-1)[:SAMPLE], dtype=np.float64)
    trace.release(name)
    return values


def _num(config: dict, key: str, default: float) -> float:
    value = config.get(key, default)
    return float(value) if isinstance(value, (int, float)) and not isinstance(value, bool) else default


def _relative(actual: np.ndarray, expected: np.ndarray, scale: np.ndarray) -> float:
    size = float(np.max(np.abs(scale))) if scale.size else 0.0
    err = float(np.max(np.abs(actual - expected))) if actual.size else 0.0
    if size == 0.0:
        return 0.0 if err == 0.0 else math.inf
    return err / size


def measure_optimizer(trace: Trace) -> OptimizerForensics:
    """Replay each step of ``trace`` with its declared optimizer and measure the effective settings
    (see `_measure`); a NaN or infinity in a diverged run's tensors is evidence of nothing, not a warning."""
    with np.errstate(invalid="ignore", over="ignore", divide="ignore"):
        return _measure(trace)


def _measure(trace: Trace) -> OptimizerForensics:
    """The replay and the fits, step by step.

    Reads the first SAMPLE elements of one parameter's tensors of one step at a time. Traces without params, gradients or
    a known optimizer (sgd, adam, adamw) give an empty result.
    """
    config = trace.optimizer if isinstance(trace.optimizer, dict) else {}
    result = OptimizerForensics(declared=config)
    name = config.get("name")
    params = [p for p in (trace.metadata.get("params") or []) if isinstance(p, str)]
    if name not in ("sgd", "adam", "adamw") or not params:
        return result
    lr = _num(config, "lr", 0.0)
    clip = _num(config, "clip_grad_norm", 0.0)
    fits: dict[str, list[np.ndarray]] = {}
    steps = max(trace.steps, 0)
    norms: dict[int, float] = {}

    def norm(k: int) -> float:
        if k not in norms:
            norms[k] = _grad_norm(trace, k, params)
        return norms[k]

    schedule = config.get("lr_per_step")
    schedule = [float(x) for x in schedule] if isinstance(schedule, list) and len(schedule) >= steps else None
    base_lr = lr
    overrides = group_settings(config)
    for k in range(steps):
        # the declared clipping's factor for this step; 1 without clipping
        coef = min(1.0, clip / (norm(k) + 1e-6)) if clip > 0 else 1.0
        for p in params:
            # a parameter of another group replays with its group's settings (a schedule scales every group's
            # lr alike); the fits measure the first group's, so they take its parameters only
            own = overrides.get(p)
            cfg = {**config, **own} if own else config
            group_lr = _num(cfg, "lr", base_lr)
            lr = (schedule[k] * (group_lr / base_lr if base_lr else 1.0)) if schedule is not None else group_lr
            wd = _num(cfg, "weight_decay", 0.0)
            fit_to = fits if not own else {}
            needed = (f"step{k}.params_before.{p}", f"step{k}.params_after.{p}", f"step{k}.grads.{p}")
            if not all(n in trace for n in needed) or len({trace.info(n).shape for n in needed}) != 1:
                continue
            before = _get(trace, f"step{k}.params_before.{p}")
            after = _get(trace, f"step{k}.params_after.{p}")
            grad = _get(trace, f"step{k}.grads.{p}")
            if before is None or after is None or grad is None or before.shape != grad.shape:
                continue
            if name == "sgd":
                found = _replay_sgd(trace, cfg, k, p, before, after, coef * grad, lr, wd, fit_to)
            else:
                found = _replay_adam(trace, cfg, name, k, p, before, after, coef * grad, lr, wd, fit_to)
                _scale_pairs(trace, cfg, name, k, p, grad, fit_to)
            if found is not None and result.mismatch_step is None:
                result.mismatch_step, result.mismatch_what, result.mismatch_residual = k, found[0], found[1]
    result.measured = _fit(name, fits)
    if name != "sgd":
        clipped = _clipping(fits, steps, clip, norm)
        if clipped is not None:
            # the scale explains the moments; betas fitted to scaled gradients would only restate it
            result.measured.pop("beta_1", None)
            result.measured.pop("beta_2", None)
            result.measured["clip_grad_norm"] = clipped
    return result


def group_settings(config: dict) -> dict[str, dict]:
    """Parameter name -> the settings its group declares otherwise than the first group (`groups`)."""
    found: dict[str, dict] = {}
    groups = config.get("groups")
    for group in groups if isinstance(groups, list) else []:
        if not isinstance(group, dict) or not isinstance(group.get("params"), list):
            continue
        own = {k: v for k, v in group.items() if k != "params"}
        if own:
            found.update({p: own for p in group["params"] if isinstance(p, str)})
    return found


#: Elements per read when a step's gradient norm is taken over whole tensors.
_NORM_CHUNK = 1 << 20


def _grad_norm(trace: Trace, k: int, params: list[str]) -> float:
    """The L2 norm of all of step ``k``'s recorded gradients together, in float64, read in chunks."""
    total = 0.0
    for p in params:
        name = f"step{k}.grads.{p}"
        if name not in trace:
            continue
        flat = trace.values(name).reshape(-1)
        for start in range(0, flat.size, _NORM_CHUNK):
            chunk = np.asarray(flat[start:start + _NORM_CHUNK], dtype=np.float64)
            total += float(np.dot(chunk, chunk))
        trace.release(name)
    return math.sqrt(total)


def _scale_pairs(trace, config, name, k, p, grad, fits) -> None:
    """Step ``k``'s (raw gradient, moment move) pairs of one parameter, for the scale the step applied."""
    decoupled = name == "adamw" or config.get("weight_decay_kind") == "decoupled"
    if not decoupled and _num(config, "weight_decay", 0.0) != 0:
        return  # an L2 term inside the moments: the gradient's scale is not separable from it
    betas = config.get("betas") if isinstance(config.get("betas"), list) else [0.9, 0.999]
    b1, b2 = (float(b) for b in betas[:2])
    m, v = _get(trace, f"step{k}.optim.exp_avg.{p}"), _get(trace, f"step{k}.optim.exp_avg_sq.{p}")
    if m is None or v is None or m.shape != grad.shape or v.shape != grad.shape:
        return
    pm = _get(trace, f"step{k - 1}.optim.exp_avg.{p}") if k > 0 else np.zeros_like(m)
    pv = _get(trace, f"step{k - 1}.optim.exp_avg_sq.{p}") if k > 0 else np.zeros_like(v)
    if pm is None or pv is None or pm.shape != m.shape or pv.shape != v.shape:
        return
    fits.setdefault(f"scale_m{k}", []).append(np.stack([(1 - b1) * grad, m - b1 * pm], axis=1))
    fits.setdefault(f"scale_v{k}", []).append(np.stack([(1 - b2) * grad * grad, v - b2 * pv], axis=1))


def _clipping(fits: dict[str, list[np.ndarray]], steps: int, clip: float, norm) -> float | None:
    """The `clip_grad_norm` the moments show where it is not the declared one (infinity: no clipping),
    or None: the declared clipping (or none) is what they show, or they show no single scale."""
    for k in range(steps):
        scales = []
        for key, root in ((f"scale_m{k}", False), (f"scale_v{k}", True)):
            if not fits.get(key):
                break
            pairs = np.concatenate(fits[key])
            pairs = pairs[np.all(np.isfinite(pairs), axis=1)]
            x, y = pairs[:, 0], pairs[:, 1]
            xx = float(np.dot(x, x))
            if xx == 0:
                break
            factor = float(np.dot(x, y) / xx)
            if factor <= 0 or not _fits(x[:, None], y, np.array([factor])):
                break
            scales.append(math.sqrt(factor) if root else factor)
        if len(scales) != 2 or abs(scales[0] - scales[1]) > 1e-3 * max(scales):
            continue  # no one scale explains both moments: the betas differ, or no gradient moved them
        scale = scales[0]
        # the step's gradient norm is a full pass over its gradients: read only when clipping is declared, or
        # when the scale is reported as the clipping it implies
        declared = min(1.0, clip / (norm(k) + 1e-6)) if clip > 0 else 1.0
        if abs(scale - declared) <= 1e-3 * declared:
            continue
        return math.inf if abs(scale - 1.0) <= 1e-3 else scale * norm(k)
    return None


def _replay_sgd(trace, config, k, p, before, after, grad, lr, wd, fits) -> tuple[str, float] | None:
    momentum, dampening = _num(config, "momentum", 0.0), _num(config, "dampening", 0.0)
    d = grad + wd * before
    buf = _get(trace, f"step{k}.optim.momentum_buffer.{p}")
    prev = _get(trace, f"step{k - 1}.optim.momentum_buffer.{p}") if k > 0 else None
    if momentum and buf is not None:
        step_dir = d + momentum * buf if config.get("nesterov") else buf
        if prev is not None:
            # buf_k = momentum * buf_{k-1} + (1 - dampening) * (g + wd * p): the parameter's column keeps
            # weight decay from being read as dampening
            fits.setdefault("momentum_x", []).append(np.stack([prev.ravel(), grad.ravel(), before.ravel()], axis=1))
            fits.setdefault("momentum_y", []).append(buf.ravel())
        else:
            # the first buffer is the decayed gradient itself, in PyTorch and in burn: g + wd * p
            fits.setdefault("buffer0_x", []).append(np.stack([grad.ravel(), before.ravel()], axis=1))
            fits.setdefault("buffer0_y", []).append(buf.ravel())
        fits.setdefault("lr_x", []).append(step_dir.ravel())
        fits.setdefault("lr_y", []).append((after - before).ravel())
        expected_buf = d if prev is None else momentum * prev + (1 - dampening) * d
        residual = _relative(buf, expected_buf, expected_buf)
        if residual > REPLAY_TOLERANCE:
            return f"optim.momentum_buffer.{p}", residual
    else:
        step_dir = d
        if k == 0 or not momentum:
            fits.setdefault("sgd_x", []).append(np.stack([grad.ravel(), before.ravel()], axis=1))
            fits.setdefault("sgd_y", []).append((after - before).ravel())
    expected = before - lr * step_dir
    residual = _relative(after, expected, after - before if np.any(after != before) else lr * step_dir)
    return (f"params_after.{p}", residual) if residual > REPLAY_TOLERANCE else None


def _replay_adam(trace, config, name, k, p, before, after, grad, lr, wd, fits) -> tuple[str, float] | None:
    betas = config.get("betas") if isinstance(config.get("betas"), list) else [0.9, 0.999]
    b1, b2 = (float(b) for b in betas[:2])
    eps = _num(config, "eps", 1e-8)
    decoupled = name == "adamw" or config.get("weight_decay_kind") == "decoupled"
    d = grad if decoupled else grad + wd * before
    m, v = _get(trace, f"step{k}.optim.exp_avg.{p}"), _get(trace, f"step{k}.optim.exp_avg_sq.{p}")
    pm = _get(trace, f"step{k - 1}.optim.exp_avg.{p}") if k > 0 else None
    pv = _get(trace, f"step{k - 1}.optim.exp_avg_sq.{p}") if k > 0 else None
    if m is None or v is None:
        return None
    if k == 0:
        fits.setdefault("beta1", []).append(np.stack([d.ravel(), m.ravel()], axis=1))
        fits.setdefault("beta2", []).append(np.stack([(d * d).ravel(), v.ravel()], axis=1))
        # AdamW decays the parameter first, by the declared lr * weight decay: what is left is Adam's step
        delta = (after - before * (1 - lr * wd) if decoupled else after - before).ravel()
        # at step 0 the bias-corrected moments are d and d^2 whatever the betas
        keep = (delta != 0) & (d.ravel() != 0)
        fits.setdefault("eps_x", []).append(np.abs(d.ravel()[keep]))
        fits.setdefault("eps_y", []).append(np.abs(d.ravel()[keep] / delta[keep]))
    expected_m = (1 - b1) * d if pm is None else b1 * pm + (1 - b1) * d
    expected_v = (1 - b2) * d * d if pv is None else b2 * pv + (1 - b2) * d * d
    for slot, actual, expected in (("exp_avg", m, expected_m), ("exp_avg_sq", v, expected_v)):
        residual = _relative(actual, expected, expected)
        if residual > REPLAY_TOLERANCE:
            return f"optim.{slot}.{p}", residual
    t = k + 1
    m_hat, v_hat = m / (1 - b1**t), v / (1 - b2**t)
    expected = before * (1 - lr * wd if decoupled else 1.0) - lr * m_hat / (np.sqrt(v_hat) + eps)
    residual = _relative(after, expected, after - before)
    return (f"params_after.{p}", residual) if residual > REPLAY_TOLERANCE else None


#: A least-squares fit whose residual exceeds this (relative to the data) explains nothing: its
#: settings are not reported (clipping or a double step fit no optimizer of the declared form).
FIT_TOLERANCE = 1e-3


def _fits(x: np.ndarray, y: np.ndarray, coef: np.ndarray) -> bool:
    size = float(np.max(np.abs(y))) if y.size else 0.0
    return size > 0 and float(np.max(np.abs(x @ coef - y))) <= FIT_TOLERANCE * size


def _fit(name: str, fits: dict[str, list[np.ndarray]]) -> dict[str, float]:
    measured: dict[str, float] = {}

    def cat(key: str) -> np.ndarray | None:
        return np.concatenate(fits[key]) if fits.get(key) else None

    def finite(x: np.ndarray | None, y: np.ndarray | None) -> tuple[np.ndarray | None, np.ndarray | None]:
        # A NaN or an infinity (a diverged run, a broken port) is no evidence of a setting, and
        # LAPACK's least squares fails on one: fit the finite rows only.
        if x is None or y is None:
            return x, y
        finite_x = np.isfinite(x)
        keep = np.isfinite(y) & (np.all(finite_x, axis=1) if x.ndim > 1 else finite_x)
        return x[keep], y[keep]

    if name == "sgd":
        x, y = finite(cat("sgd_x"), cat("sgd_y"))
        if x is not None and np.any(x[:, 0]):
            coef = np.linalg.lstsq(x, y, rcond=None)[0]
            if coef[0] != 0 and _fits(x, y, coef):
                measured["lr"] = float(-coef[0])
                measured["weight_decay"] = float(coef[1] / coef[0])
        x, y = finite(cat("buffer0_x"), cat("buffer0_y"))
        if x is not None and x.shape[0] >= 2 and np.any(x[:, 0]):
            coef = np.linalg.lstsq(x, y, rcond=None)[0]
            if coef[0] != 0 and _fits(x, y, coef):
                measured["weight_decay"] = float(coef[1] / coef[0])
        x, y = finite(cat("momentum_x"), cat("momentum_y"))
        if x is not None and x.shape[0] >= 3:
            coef = np.linalg.lstsq(x, y, rcond=None)[0]
            if _fits(x, y, coef):
                measured["momentum"] = float(coef[0])
                measured["dampening"] = float(1 - coef[1])
                if coef[1] != 0 and "weight_decay" not in measured:
                    measured["weight_decay"] = float(coef[2] / coef[1])
        x, y = finite(cat("lr_x"), cat("lr_y"))
        if x is not None and np.dot(x, x) > 0:
            lr = float(np.dot(x, y) / np.dot(x, x))
            if _fits(x[:, None], y, np.array([lr])):
                measured["lr"] = -lr
    else:
        for key, out in (("beta1", "beta_1"), ("beta2", "beta_2")):
            pairs = cat(key)
            if pairs is not None:
                pairs = pairs[np.all(np.isfinite(pairs), axis=1)]
            if pairs is not None and np.dot(pairs[:, 0], pairs[:, 0]) > 0:
                factor = float(np.dot(pairs[:, 0], pairs[:, 1]) / np.dot(pairs[:, 0], pairs[:, 0]))
                if _fits(pairs[:, :1], pairs[:, 1], np.array([factor])):
                    measured[out] = 1 - factor
        x, y = finite(cat("eps_x"), cat("eps_y"))
        if x is not None and x.size >= 2:
            slope, intercept = np.polyfit(x, y, 1)
            if slope > 0 and _fits(np.stack([x, np.ones_like(x)], axis=1), y, np.array([slope, intercept])):
                measured["lr"] = float(1 / slope)
                measured["eps"] = float(intercept / slope)
    return measured
