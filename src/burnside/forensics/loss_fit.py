"""Which loss each side computed, measured from its own recorded outputs and targets (D017).

When a step's loss is the first tensor to differ and its logits agree, the loss function differs. Each side's
loss at every step is recomputed here from what its loss function was given: the input and target the PyTorch
recorder found inside the loss (`step{k}.loss_inputs.*`: a gathered Q-value and a TD target, a masked output),
the PyTorch side's for a port that records none (they are the same tensors where everything before the loss
agrees), else `step{k}.logits` and `step{k}.inputs.{target}` (the PyTorch trace's metadata `target`, else `y`),
under candidate losses: cross-entropy (mean, sum, label smoothing
solved for, an ignored target value -100 or 0 left out of the mean, a class weighting), MSE and L1 (mean, sum),
SmoothL1 with its beta and Huber with its delta (each solved for), BCE-with-logits (mean, sum). A candidate with a
free setting explains a side only when the setting solved at each step agrees (or, from one step, is a round
number). A sum where the other side averages over the batch is D010's (the loss ratio is the batch size), and
is left to it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from burnside.trace import Trace, parse_name

if TYPE_CHECKING:
    from burnside.compare.comparison import Comparison

#: How close a recomputed loss must be to the recorded one (relative): float32 rounding of a reduction.
_CLOSE = 2e-5


@dataclass(frozen=True)
class LossKind:
    """One loss as measured: what it is (`cross-entropy with label smoothing 0.1`), how it is written in burn."""

    name: str
    burn: str
    residual: float  # the worst relative difference from the recorded loss over the steps fitted
    #: what it was recomputed from: `logits` (the side's logits and the batch's target), `loss_inputs` (what the
    #: side's loss function was given), `other` (what the other side's loss function was given)
    read: str = "logits"
    steps: int = 1  # the steps it was fitted on


@dataclass(frozen=True)
class LossFit:
    """The loss each side computed, as its own outputs and targets reproduce it."""

    step: int
    a: LossKind | None
    b: LossKind | None
    steps: int  # how many steps each side was fitted on
    weighting: str | None = None  # a side only a class weighting explains (its evidence), when none fits

    @property
    def named(self) -> bool:
        """Whether the two losses are told apart: both measured and different, or one explained only by a weighting."""
        return (self.a is not None and self.b is not None and self.a.name != self.b.name) or self.weighting is not None


def _log_softmax(x: np.ndarray) -> np.ndarray:
    shifted = x - x.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


def _close(value: float, loss: float) -> float:
    return abs(value - loss) / max(abs(loss), 1e-12)


def _round(value: float) -> bool:
    return abs(value - round(value, 2)) < 1e-4 * max(1.0, abs(value))


def _solve_monotone(f, loss: float, lo: float, hi: float) -> float | None:
    """The x in [lo, hi] (geometric bisection) where the monotone f(x) = loss, None if loss is outside f's range."""
    f_lo, f_hi = f(lo), f(hi)
    if not min(f_lo, f_hi) <= loss <= max(f_lo, f_hi):
        return None
    rising = f_hi > f_lo
    for _ in range(200):
        mid = np.sqrt(lo * hi)
        if (f(mid) < loss) == rising:
            lo = mid
        else:
            hi = mid
    return float(np.sqrt(lo * hi))


def _classification(logits: np.ndarray, t: np.ndarray) -> tuple[list[tuple[str, str, float | None]], dict]:
    """(name, burn, value) candidates; a setting solved is carried in the name's `{}` and returned apart."""
    logp = _log_softmax(logits.reshape(-1, logits.shape[-1]))
    t = t.reshape(-1).astype(np.int64)
    classes = logp.shape[1]
    valid = (t >= 0) & (t < classes)
    nll = np.zeros(len(t))
    nll[valid] = -logp[valid, t[valid]]
    smooth = -logp.mean(axis=1)
    out: list = []
    solved: dict = {}
    if valid.all():
        out += [("cross-entropy (mean)", "CrossEntropyLossConfig::new().init(&device)", nll.mean()),
                (f"cross-entropy summed over the {len(t)} rows",
                 "burn's CrossEntropyLoss averages: multiply its loss by the number of rows", nll.sum())]
        solved["smoothing"] = (nll.mean(), smooth.mean())
        means = [nll[t == c].mean() for c in range(classes) if (t == c).any()]
        solved["weighting"] = (min(means), max(means))
    for ignore in (-100, 0):
        kept = t != ignore
        if kept.any() and not kept.all() and valid[kept].all():
            pad = (f".with_pad_tokens(Some(vec![{ignore}]))" if ignore >= 0 else
                   ".with_pad_tokens(Some(vec![PAD])) with the ignored rows' target set to PAD (burn's targets are "
                   "class indices: -100 is none)")
            out.append((f"cross-entropy ignoring target {ignore} (mean over the other {int(kept.sum())} of "
                        f"{len(t)} rows)", f"CrossEntropyLossConfig::new(){pad}.init(&device)", nll[kept].mean()))
            # label smoothing over the rows kept, as PyTorch's cross_entropy(label_smoothing=, ignore_index=) takes
            # both: solved jointly, as the smoothing alone is
            solved[f"smoothing_ignore_{ignore}"] = (nll[kept].mean(), smooth[kept].mean(), int(kept.sum()), len(t))
    return out, solved


def _regression(out: np.ndarray, t: np.ndarray) -> tuple[list[tuple[str, str, float]], dict]:
    e = out.astype(np.float64) - t.astype(np.float64)
    a = np.abs(e)
    cands = [("MSE (mean)", "MseLoss::new().forward(output, target, Reduction::Mean)", float((e * e).mean())),
             ("MSE (sum)", "MseLoss::new().forward(output, target, Reduction::Sum)", float((e * e).sum())),
             ("L1 (mean)", "(output - target).abs().mean()", float(a.mean())),
             ("L1 (sum)", "(output - target).abs().sum()", float(a.sum()))]
    if ((t == 0) | (t == 1)).all():
        x = out.astype(np.float64)
        bce = np.maximum(x, 0) - x * t + np.log1p(np.exp(-np.abs(x)))
        cands += [("BCE-with-logits (mean)", "BinaryCrossEntropyLossConfig::new().with_logits(true).init(&device)",
                   float(bce.mean())),
                  ("BCE-with-logits (sum)", "BinaryCrossEntropyLossConfig::new().with_logits(true) (burn's averages: "
                   "multiply by the number of elements)", float(bce.sum()))]

    def smooth_l1(beta: float) -> float:
        return float(np.where(a < beta, 0.5 * e * e / beta, a - 0.5 * beta).mean())

    def huber(delta: float) -> float:
        return float(np.where(a <= delta, 0.5 * e * e, delta * (a - 0.5 * delta)).mean())

    return cands, {"smooth_l1": smooth_l1, "huber": huber}


def _loss_operands(trace: Trace, k: int, target: str, seen: Trace | None
                   ) -> tuple[np.ndarray, np.ndarray, str] | None:
    """What step ``k``'s loss function was given: the input and target the PyTorch recorder found inside the loss
    (`step{k}.loss_inputs.*`, in this trace or, for a port that records none, in ``seen``, the other side's: the
    same tensors wherever everything before the loss agrees, so only at the step where the loss parts first:
    ``seen`` is None at the others), else the logits and the batch's target."""
    for source, read in ((trace, "loss_inputs"), (seen, "other")):
        names = (f"step{k}.loss_inputs.input", f"step{k}.loss_inputs.target")
        if source is not None and all(n in source for n in names):
            return (np.asarray(source.values(names[0]), dtype=np.float64), np.asarray(source.values(names[1])), read)
    names = (f"step{k}.logits", f"step{k}.inputs.{target}")
    if not all(n in trace for n in names):
        return None
    return np.asarray(trace.values(names[0]), dtype=np.float64), np.asarray(trace.values(names[1])), "logits"


def _fit_side(trace: Trace, target: str, steps: list[int], seen: Trace | None = None
              ) -> tuple[LossKind | None, str | None]:
    """The candidate that reproduces this side's loss at every step (a solved setting agreeing across steps),
    computed on what its loss function was given (`_loss_operands`)."""
    per_step, read = _per_step(trace, target, steps, seen)
    if not per_step:
        return None, None
    # a fixed candidate reproducing every step
    for i, (name, burn, _) in enumerate(per_step[0][0]):
        worst = max((_close(c[i][2], loss) if i < len(c) and c[i][1] == burn else np.inf)
                    for c, _, loss in per_step)
        if worst < _CLOSE:
            return LossKind(name, burn, worst, read, len(per_step)), None
    kind = per_step[0][1]["kind"]
    # one free setting, solved per step
    for name, values in _solved_settings(per_step, kind).items():
        found = _with_setting(name, values, per_step, read)
        if found is not None:
            return found, None
    if kind == "classification" and "weighting" in per_step[0][1]:
        lo, hi = per_step[0][1]["weighting"]
        loss = per_step[0][2]
        if lo <= loss <= hi:
            return None, (f"no unweighted cross-entropy reproduces its loss {loss:.6g}, which lies within what a class "
                          f"weighting gives (the per-class mean losses, {lo:.4g} to {hi:.4g})")
    return None, None


def _per_step(trace: Trace, target: str, steps: list[int], seen: Trace | None
              ) -> tuple[list[tuple[list, dict, float]], str]:
    """Each step's candidates, solvable settings and recorded loss, from the first step on while its operands are
    read as the first step's were and are finite; and what they were read from (`_loss_operands`)."""
    per_step: list[tuple[list, dict, float]] = []
    read = "logits"
    for k in steps:
        operands = _loss_operands(trace, k, target, seen if k == steps[0] else None)
        if operands is None or f"step{k}.loss" not in trace:
            break
        logits, t, read_k = operands
        if k == steps[0]:
            read = read_k
        elif read_k != read:
            break
        loss = float(np.asarray(trace.values(f"step{k}.loss"), dtype=np.float64).reshape(-1)[0])
        if not np.isfinite(loss) or not np.isfinite(logits).all():
            break
        if np.issubdtype(t.dtype, np.integer) and logits.ndim >= 2 and logits.shape[:-1] == t.shape:
            cands, solved = _classification(logits, t)
            solved["kind"] = "classification"
        elif logits.shape == t.shape:
            cands, solved = _regression(logits, t.astype(np.float64))
            solved["kind"] = "regression"
        else:
            break
        per_step.append((cands, solved, loss))
    return per_step, read


def _solved_settings(per_step: list[tuple[list, dict, float]], kind: str) -> dict[str, list[float]]:
    """Each free setting's value solved at each step where it can be: a label smoothing (classification), SmoothL1's
    beta and Huber's delta (regression)."""
    settings: dict[str, list[float]] = {}
    for _, solved, loss in per_step:
        if kind == "classification":
            for name in [key for key in solved if key.startswith("smoothing")]:
                plain, uniform = solved[name][:2]
                if abs(uniform - plain) > 1e-9:
                    settings.setdefault(name, []).append((loss - plain) / (uniform - plain))
        if kind == "regression":
            for name, lo, hi in (("smooth_l1", 1e-6, 1e4), ("huber", 1e-6, 1e4)):
                value = _solve_monotone(solved[name], loss, lo, hi)
                if value is not None:
                    settings.setdefault(name, []).append(value)
    return settings


def _with_setting(name: str, values: list[float], per_step: list[tuple[list, dict, float]], read: str
                  ) -> LossKind | None:
    """The loss with the setting ``name`` at the value solved at every step, when the values agree across steps
    (or, from one step, are a round number) and are in range."""
    if len(values) != len(per_step) or not all(0 < v for v in values):
        return None
    spread = (max(values) - min(values)) / max(abs(np.mean(values)), 1e-12)
    value = float(np.mean(values))
    if name.startswith("smoothing") and not value < 1:
        return None
    if not ((len(values) > 1 and spread < 1e-3) or (len(values) == 1 and _round(value))):
        return None
    shown = f"{round(value, 4):g}"
    if "e" not in shown and "." not in shown:
        shown += ".0"  # a Rust f32 literal: `with_beta(1)` does not compile
    if name.startswith("smoothing_ignore_"):
        ignore = int(name.removeprefix("smoothing_ignore_"))
        _, _, kept, rows = per_step[0][1][name]
        pad = (f".with_pad_tokens(Some(vec![{ignore}]))" if ignore >= 0 else
               ".with_pad_tokens(Some(vec![PAD])) with the ignored rows' target set to PAD (burn's targets "
               "are class indices: -100 is none)")
        return LossKind(f"cross-entropy with label smoothing {shown} ignoring target {ignore} (mean over the "
                        f"other {kept} of {rows} rows)",
                        f"CrossEntropyLossConfig::new().with_smoothing(Some({shown})){pad}.init(&device)",
                        spread, read, len(per_step))
    kind_name, burn = {
        "smoothing": (f"cross-entropy with label smoothing {shown}",
                      f"CrossEntropyLossConfig::new().with_smoothing(Some({shown})).init(&device)"),
        "smooth_l1": (f"SmoothL1 with beta {shown} (mean)",
                      f"SmoothL1LossConfig::new().with_beta({shown}).init().forward_with_reduction(output, "
                      f"target, Reduction::Mean)"),
        "huber": (f"Huber with delta {shown} (mean)",
                  f"HuberLossConfig::new({shown}).init().forward(output, target, Reduction::Mean)"),
    }[name]
    return LossKind(kind_name, burn, spread, read, len(per_step))


def measure_loss(a: Trace, b: Trace, comparison: Comparison) -> LossFit | None:
    """Each side's loss as its own logits and targets reproduce it, when the first divergence is a step's loss
    and that step's logits agree; None otherwise, or when the difference is a sum against a mean over the batch
    (D010 names that)."""
    first = comparison.first_divergence
    parsed = parse_name(first.name) if first is not None else None
    if parsed is None or parsed.stage != "loss":
        return None
    k = parsed.step
    logits = next((r for r in comparison.rows if r.name == f"step{k}.logits"), None)
    if logits is None or not logits.passed:
        return None
    la, lb = comparison.a.losses.get(k), comparison.b.losses.get(k)
    batch = logits.shape[0] if logits.shape else None
    if la and lb and batch:
        ratio = lb / la
        if abs(ratio - batch) < 1e-3 * batch or abs(ratio * batch - 1) < 1e-3 or \
                abs(1 / ratio - batch) < 1e-3 * batch:
            return None  # a sum where the other averages over the batch: D010
    target = next((t.metadata.get("target") for t in (a, b) if isinstance(t.metadata.get("target"), str)), "y")
    steps = list(range(k, comparison.steps))
    fit_a, weighted_a = _fit_side(a, target, steps, seen=b)
    fit_b, weighted_b = _fit_side(b, target, steps, seen=a)
    weighting = None
    if fit_a is None and weighted_a is not None and fit_b is not None:
        weighting = f"{comparison.side_name('a')}: {weighted_a}"
    elif fit_b is None and weighted_b is not None and fit_a is not None:
        weighting = f"{comparison.side_name('b')}: {weighted_b}"
    if fit_a is None and fit_b is None:
        return None
    return LossFit(k, fit_a, fit_b, len(steps), weighting)
