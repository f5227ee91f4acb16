"""D018 gradient accumulation differs.

## What it does
Finds a port whose loop accumulates gradients otherwise than the PyTorch loop
(`burnside.torch.record(..., accumulate=M)`: M micro-batches' `backward()` into the same
`.grad`, then one `optimizer.step()`), and says how, from the traces' metadata and numbers:

- the two traces declare another number of micro-batches per step (metadata `accumulate`;
  a port that knows no accumulation has none);
- the port steps its optimizer after every micro-batch: micro-batch 0 of step 0 agrees, a
  later micro-batch of the same step does not (the parameters moved between them), and where
  the optimizer counts its steps (Adam's `step`) the port's count is M times PyTorch's;
- the port's accumulated gradient is PyTorch's divided by M (the mean where PyTorch's `.grad`
  is the sum) while every micro-batch's loss agrees, or M times it: the step-0 gradients are
  an exact multiple, measured by least squares over every parameter;
- the port divides each micro-batch's loss by M where PyTorch's `loss_fn` does not (or the
  other way round): every micro-batch loss, and the gradient, is that multiple.

## Why is this bad?
Accumulating M micro-batches is one optimizer step on the sum of their gradients. A port that
steps every micro-batch takes M steps where PyTorch takes one: Adam moves each weight about M
times as far. A port that averages trains with gradients M times smaller: SGD's steps are M times
shorter, Adam's moments and its `eps` see another scale. Every micro-batch's forward pass can
agree at step 0 while the update is wrong from the first step on.

## Example
```rust
for j in 0..m {
    let (logits, loss) = forward_loss(&model, &mut recorder.micro_step(k, j, &init, &device))?;
    let grads = GradientsParams::from_grads((loss / m as f32).backward(), &model); // PyTorch: loss.backward()
    model = optim.step(lr, model, grads);                                        // PyTorch: after the M
}
```

## Use instead
```rust
let mut accumulator = GradientsAccumulator::new();
for j in 0..m {
    let (logits, loss) = forward_loss(&model, &mut recorder.micro_step(k, j, &init, &device))?;
    accumulator.accumulate(&model, GradientsParams::from_grads(loss.backward(), &model));
}
model = optim.step(lr, model, accumulator.grads());             // one step on the sum
// or let `Training::new(spec).with_accumulation(m)` run the loop
```
"""

from __future__ import annotations

from burnside.compare import Comparison
from burnside.diagnose.diagnosis import Diagnosis
from burnside.forensics.evidence import evidence_of
from burnside.rule import Severity
from burnside.trace import parse_name

ID = "D018"
NAME = "gradient-accumulation"
TITLE = "gradient accumulation differs"
SEVERITY = Severity.ERROR
PRECEDENCE = 80  # accumulation: before the update and forward differences it explains
#: The micro-batches' losses and the updates that follow from another accumulation are its symptoms.
SUPERSEDES = ("D009", "D010")

_ACCUMULATE = ("`Training::new(spec).with_accumulation({m})` (the closure then computes one micro-batch; burn's "
               "`GradientsAccumulator` sums the {m} gradients and the optimizer steps once), or in a loop of your own "
               "`let mut acc = GradientsAccumulator::new();` then per micro-batch "
               "`acc.accumulate(&model, GradientsParams::from_grads(loss.backward(), &model))` and after the {m} "
               "`model = optim.step(lr, model, acc.grads())`, recorded with `TraceRecorder::with_accumulation({m})`")


def _accumulate(side) -> int:
    value = side.metadata.get("accumulate")
    return value if type(value) is int else 1


def _declared(comparison: Comparison, torch_side, port) -> Diagnosis:
    m_t, m_p = _accumulate(torch_side), _accumulate(port)
    evidence = (f"{torch_side.name} sums the gradients of {m_t} micro-batch(es) per optimizer step, {port.name} of "
                f"{m_p} (metadata accumulate {m_t if m_t > 1 else 'absent'} against "
                f"{m_p if m_p > 1 else 'absent'})")
    if m_t > 1:
        fix = "accumulate as the PyTorch loop does: " + _ACCUMULATE.format(m=m_t)
        if m_p > 1:
            fix += f" (not {m_p})"
    else:
        fix = ("step once per batch as the PyTorch loop does: drop `with_accumulation` (`Training::new(spec)` calls "
               "the closure once per step and steps on its gradients)")
    return Diagnosis(ID, TITLE, evidence, fix)


def _steps_each(comparison: Comparison, torch_side, port, m: int) -> Diagnosis | None:
    """The port's parameters moved between micro-batches of step 0: micro-batch 0 agrees, a later one not."""
    rows = {r.name: r for r in comparison.rows}
    first = rows.get("step0.micro_logits.0")
    if first is None or not first.passed or comparison.drift_before(0) != 0.0:
        return None
    later = next((j for j in range(1, m) if (row := rows.get(f"step0.micro_logits.{j}")) is not None
                  and not row.passed), None)
    if later is None:
        return None
    counts = ""
    for row in comparison.rows:
        parsed = parse_name(row.name)
        if parsed is not None and parsed.step == 0 and parsed.stage == "optim" and parsed.slot == "step":
            counts = (f"; the optimizer's step count after step 0 differs ({row.name}, off by {row.stats.max_abs:g}: "
                      f"the port counts {1 + row.stats.max_abs:g} steps where PyTorch counts 1)")
            break
    evidence = (f"{port.name} steps its optimizer between micro-batches: at step 0, micro-batch 0's logits agree "
                f"and micro-batch {later}'s do not (step0.micro_logits.{later}), from the same parameters before "
                f"the step{counts}; PyTorch takes one optimizer step after all {m}")
    fix = ("step once per optimizer step, after the " + str(m) + " micro-batches, on their summed gradients: "
           + _ACCUMULATE.format(m=m))
    return Diagnosis(ID, TITLE, evidence, fix)


def _scaled(comparison: Comparison, torch_side, port, side: str, m: int) -> Diagnosis | None:
    """The port's loss or accumulated gradient is PyTorch's times M or divided by M, from the numbers."""
    fit = evidence_of(comparison).accumulation
    if fit is None:
        return None

    def towards_torch(factor: float | None) -> float | None:
        # the fit is A over B: with the PyTorch trace as B, turn it round
        return None if factor is None else (factor if side == "a" else 1.0 / factor)

    loss = towards_torch(fit.loss_factor)
    grads = towards_torch(fit.grads_factor)
    if grads is None:
        return None
    ratio = fit.grads_ratio if side == "a" else 1.0 / fit.grads_ratio  # type: ignore[operator]
    if loss is not None and abs(loss - grads) <= 1e-9 * max(loss, grads):
        if grads > 1:
            evidence = (f"every micro-batch loss of {port.name} is {torch_side.name}'s divided by {m}, and so is its "
                        f"accumulated gradient (step 0: PyTorch's gradients are {ratio:.6g} x the port's)")
            fix = (f"return the loss as PyTorch's loss_fn does, without the division by {m}: the PyTorch loop calls "
                   "`backward()` on each micro-batch's loss as it is and its `.grad` is their sum; divide only if "
                   "PyTorch's loss_fn divides by M too")
        else:
            evidence = (f"every micro-batch loss of {port.name} is {m} times {torch_side.name}'s, and so is its "
                        f"accumulated gradient (step 0: PyTorch's gradients are {ratio:.6g} x the port's): PyTorch's "
                        f"loss_fn divides each loss by {m}")
            fix = (f"divide each micro-batch's loss by {m} in the closure, as PyTorch's loss_fn does "
                   f"(`Ok((logits, loss / {m}.0))`), before `backward`; the accumulator then sums the scaled gradients "
                   "as PyTorch's `.grad` does")
        return Diagnosis(ID, TITLE, evidence, fix)
    if loss is not None:
        return None
    if grads > 1:
        evidence = (f"{port.name}'s accumulated gradient is the mean of the {m} micro-batches' where "
                    f"{torch_side.name}'s is their sum: every micro-batch loss agrees, and at step 0 PyTorch's "
                    f"gradients are {ratio:.6g} x the port's (an exact multiple, {m})")
        fix = (f"sum the gradients as PyTorch's `.grad` does: `backward()` on each loss as the closure returns it "
               f"(not `loss / {m}`), `GradientsAccumulator::accumulate` per micro-batch and `optim.step` on "
               f"`accumulator.grads()` as it is (never divided by {m}); `Training::with_accumulation({m})` does this")
    else:
        evidence = (f"{port.name}'s accumulated gradient is {m} times {torch_side.name}'s while every micro-batch loss "
                    f"agrees (step 0: PyTorch's gradients are {ratio:.6g} x the port's): the PyTorch loop averages "
                    f"where the port sums")
        fix = (f"scale as the PyTorch loop does: divide each micro-batch's loss by {m} before `backward` "
               "(`(loss / M).backward()`), as PyTorch's averaging does, then accumulate with `GradientsAccumulator`")
    return Diagnosis(ID, TITLE, evidence, fix)


def check(comparison: Comparison) -> list[Diagnosis]:
    """One diagnosis when the port accumulates gradients otherwise than PyTorch's loop: declared otherwise,
    stepping every micro-batch, or the loss or the accumulated gradient scaled by M."""
    for side, torch_side, port in (("a", comparison.a, comparison.b), ("b", comparison.b, comparison.a)):
        if torch_side.framework != "pytorch" or port.framework == "pytorch" or comparison.forward:
            continue
        if comparison.accumulation:
            return [_declared(comparison, torch_side, port)]
        m = _accumulate(torch_side)
        if m < 2:
            return []
        found = _steps_each(comparison, torch_side, port, m) or _scaled(comparison, torch_side, port, side, m)
        return [found] if found is not None else []
    return []
