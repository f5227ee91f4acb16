"""burn-nn's losses against their `torch.nn.functional` twins, with their options and both reductions where burn
offers them (its `Reduction` enum; an unreduced loss is summed). The input ``x`` (logits, predictions, the first
embedding) is the trained parameter; a second float input (a target, a second embedding, a variance) is a batch
input, as are integer targets.

A loss whose burn side is suspected to compute something else is built as `_Loss(fn)`, a layer holding the loss
function, so a hypothesis can swap in the function burn computes (the loss of a case cannot be changed, its layer
can): `_through` passes ``x`` on unchanged and makes that layer the one `_active` computes the loss with.
"""

from __future__ import annotations

import warnings
from collections.abc import Callable

import torch
import torch.nn.functional as F
from torch import nn

from burnside.conformance.case import Batch, Case, Hypothesis

LossFn = Callable[[torch.Tensor, Batch], torch.Tensor]


class _Loss(nn.Module):
    """A loss function as the layer of a loss case (no parameters, its forward is the identity)."""

    def __init__(self, fn: LossFn) -> None:
        super().__init__()
        self.fn = fn

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x


_CURRENT: list[_Loss] = []  # the layer of the forward the loss is computed on (each forward sets it)


def _through(layer: _Loss, x: torch.Tensor, batch: Batch) -> torch.Tensor:
    _CURRENT[:] = [layer]
    return layer(x)


def _active(out: torch.Tensor, batch: Batch) -> torch.Tensor:
    return _CURRENT[0].fn(out, batch)


def _swappable(fn: LossFn) -> dict:
    """The `Case` arguments of a loss ``fn`` a hypothesis can replace (`Hypothesis(change=_swap(other))`)."""
    return {"layer": lambda: _Loss(fn), "call": _through, "loss": _active}


def _swap(fn: LossFn) -> Callable[[nn.Module], nn.Module]:
    return lambda _layer: _Loss(fn)


def _ints(shape: tuple[int, ...], high: int) -> Callable[[torch.Generator], Batch]:
    return lambda g: {"y": torch.randint(0, high, shape, generator=g)}


def _target(shape: tuple[int, ...]) -> Callable[[torch.Generator], Batch]:
    return lambda g: {"target": torch.randn(shape, generator=g)}


# ---- cross-entropy -------------------------------------------------------------------------------------------

_W5 = [0.5, 1.0, 2.0, 0.25, 1.5]


def _w(values: list[float], like: torch.Tensor) -> torch.Tensor:
    return torch.tensor(values, dtype=like.dtype)


def _pads(g: torch.Generator) -> Batch:
    """Eight targets of five classes, three of them the pad token 0 (the others drawn from 1..4)."""
    y = torch.randint(1, 5, (8,), generator=g)
    y[[0, 3, 6]] = 0
    return {"y": y}


def _kept(y: torch.Tensor) -> torch.Tensor:
    return (y != 0) & (y != 4)


CROSS_ENTROPY = [
    Case("cross_entropy/weights", "F.cross_entropy(logits, y, weight=w)", lambda: None, (6, 5),
         batch=_ints((6,), 5), loss=lambda x, b: F.cross_entropy(x, b["y"], weight=_w(_W5, x)),
         loss_name="cross_entropy"),
    Case("cross_entropy/smoothing", "F.cross_entropy(logits, y, label_smoothing=0.1)", lambda: None, (6, 5),
         batch=_ints((6,), 5), loss=lambda x, b: F.cross_entropy(x, b["y"], label_smoothing=0.1),
         loss_name="cross_entropy"),
    Case("cross_entropy/smoothing-weights", "F.cross_entropy(logits, y, weight=w, label_smoothing=0.2)",
         lambda: None, (6, 5), batch=_ints((6,), 5),
         loss=lambda x, b: F.cross_entropy(x, b["y"], weight=_w(_W5, x), label_smoothing=0.2),
         loss_name="cross_entropy"),
    Case("cross_entropy/pad-token", "F.cross_entropy(logits, y, ignore_index=0), 3 of 8 targets padding",
         lambda: None, (8, 5), batch=_pads, loss=lambda x, b: F.cross_entropy(x, b["y"], ignore_index=0),
         loss_name="cross_entropy"),
    Case("cross_entropy/pad-token-weights", "F.cross_entropy(logits, y, weight=w, ignore_index=0)",
         lambda: None, (8, 5), batch=_pads,
         loss=lambda x, b: F.cross_entropy(x, b["y"], weight=_w(_W5, x), ignore_index=0), loss_name="cross_entropy"),
    Case("cross_entropy/pad-token-smoothing", "F.cross_entropy(logits, y, ignore_index=0, label_smoothing=0.1)",
         lambda: None, (8, 5), batch=_pads,
         loss=lambda x, b: F.cross_entropy(x, b["y"], ignore_index=0, label_smoothing=0.1), loss_name="cross_entropy"),
    Case("cross_entropy/two-pad-tokens", "F.cross_entropy(logits[keep], y[keep]): burn's pad_tokens [0, 4], "
         "PyTorch's ignore_index takes one", lambda: None, (8, 5), batch=_pads,
         loss=lambda x, b: F.cross_entropy(x[_kept(b["y"])], b["y"][_kept(b["y"])]), loss_name="cross_entropy"),
    Case("cross_entropy/probabilities", "F.nll_loss(log(softmax(x)), y): burn's logits=false on probabilities",
         lambda: None, (6, 5), batch=_ints((6,), 5),
         loss=lambda x, b: F.nll_loss(torch.log(F.softmax(x, dim=1)), b["y"]), loss_name="nll_loss"),
    Case("cross_entropy/probabilities-pad-token", "F.nll_loss(log(softmax(x)), y, ignore_index=0)",
         lambda: None, (8, 5), batch=_pads,
         loss=lambda x, b: F.nll_loss(torch.log(F.softmax(x, dim=1)), b["y"], ignore_index=0), loss_name="nll_loss"),
]

# ---- binary cross-entropy ------------------------------------------------------------------------------------

_W3 = [0.5, 2.0, 1.25]


def _bce_targets(shape: tuple[int, ...]) -> Callable[[torch.Generator], Batch]:
    return lambda g: {"y": torch.randint(0, 2, shape, generator=g)}


BINARY_CROSS_ENTROPY = [
    Case("binary_cross_entropy/logits", "F.binary_cross_entropy_with_logits(x, y)", lambda: None, (4, 3),
         batch=_bce_targets((4, 3)), loss=lambda x, b: F.binary_cross_entropy_with_logits(x, b["y"].to(x.dtype)),
         loss_name="binary_cross_entropy_with_logits"),
    Case("binary_cross_entropy/default", "F.binary_cross_entropy(sigmoid(x), y): burn's default logits=false",
         lambda: None, (4, 3), batch=_bce_targets((4, 3)),
         loss=lambda x, b: F.binary_cross_entropy(torch.sigmoid(x), b["y"].to(x.dtype)),
         loss_name="binary_cross_entropy"),
    Case("binary_cross_entropy/logits-weights", "F.binary_cross_entropy_with_logits(x, y, weight=w), w per class",
         lambda: None, (4, 3), batch=_bce_targets((4, 3)),
         loss=lambda x, b: F.binary_cross_entropy_with_logits(x, b["y"].to(x.dtype), weight=_w(_W3, x)),
         loss_name="binary_cross_entropy_with_logits"),
    Case("binary_cross_entropy/probabilities-weights-1d",
         "F.binary_cross_entropy(sigmoid(x), y, weight=w[y]): burn's 1-D weights are per label (0 and 1)",
         lambda: None, (8,), batch=_bce_targets((8,)),
         loss=lambda x, b: F.binary_cross_entropy(torch.sigmoid(x), b["y"].to(x.dtype),
                                                  weight=_w([0.4, 1.6], x)[b["y"]]),
         loss_name="binary_cross_entropy"),
    Case("binary_cross_entropy/logits-smoothing",
         "F.binary_cross_entropy_with_logits(x, y * 0.8 + 0.2 / 3): burn's smoothing 0.2 over 3 classes",
         lambda: None, (4, 3), batch=_bce_targets((4, 3)),
         loss=lambda x, b: F.binary_cross_entropy_with_logits(x, b["y"].to(x.dtype) * 0.8 + 0.2 / 3),
         loss_name="binary_cross_entropy_with_logits"),
]

# ---- regression losses ---------------------------------------------------------------------------------------


def _regression(family: str, config: str, title: str, fn: LossFn, shape=(4, 5), **kw) -> Case:
    return Case(f"{family}/{config}", title, lambda: None, shape, batch=_target(shape), loss=fn,
                loss_name=kw.pop("loss_name", family), **kw)


REGRESSION = [
    _regression("mse_loss", "mean", "F.mse_loss(x, t)", lambda x, b: F.mse_loss(x, b["target"])),
    _regression("mse_loss", "sum", "F.mse_loss(x, t, reduction='sum')",
                lambda x, b: F.mse_loss(x, b["target"], reduction="sum")),
    _regression("mse_loss", "none-summed", "F.mse_loss(x, t, reduction='none').sum(), 3-D",
                lambda x, b: F.mse_loss(x, b["target"], reduction="none").sum(), shape=(2, 3, 4)),
    _regression("huber_loss", "delta-1", "F.huber_loss(x, t), delta 1 (PyTorch's default)",
                lambda x, b: F.huber_loss(x, b["target"])),
    _regression("huber_loss", "delta-0.5-sum", "F.huber_loss(x, t, delta=0.5, reduction='sum')",
                lambda x, b: F.huber_loss(x, b["target"], delta=0.5, reduction="sum")),
    _regression("smooth_l1_loss", "default", "F.smooth_l1_loss(x, t), defaults (beta 1)",
                lambda x, b: F.smooth_l1_loss(x, b["target"])),
    _regression("smooth_l1_loss", "beta-0.5-sum", "F.smooth_l1_loss(x, t, beta=0.5, reduction='sum')",
                lambda x, b: F.smooth_l1_loss(x, b["target"], beta=0.5, reduction="sum")),
    _regression("l1_loss", "mean", "F.l1_loss(x, t): burn's LpLossConfig::l1()",
                lambda x, b: F.l1_loss(x, b["target"])),
    _regression("l1_loss", "sum", "F.l1_loss(x, t, reduction='sum')",
                lambda x, b: F.l1_loss(x, b["target"], reduction="sum")),
    _regression("lp_loss", "p2", "F.mse_loss(x, t): burn's LpLoss p=2", lambda x, b: F.mse_loss(x, b["target"]),
                loss_name="mse_loss"),
    _regression("lp_loss", "p3-sum", "(x - t).abs().pow(3).sum(): burn's LpLoss p=3, no PyTorch function",
                lambda x, b: (x - b["target"]).abs().pow(3).sum(), loss_name="lp_loss"),
]

# ---- KL divergence -------------------------------------------------------------------------------------------


def _kl_target(log: bool) -> Callable[[torch.Generator], Batch]:
    def draw(g: torch.Generator) -> Batch:
        logits = torch.randn(4, 5, generator=g)
        return {"target": F.log_softmax(logits, 1) if log else F.softmax(logits, 1)}
    return draw


def _kl(config: str, title: str, reduction: str | None, log_target: bool = False, **kw) -> Case:
    args = {} if reduction is None else {"reduction": reduction}

    def fn(x: torch.Tensor, b: Batch) -> torch.Tensor:
        with warnings.catch_warnings():  # PyTorch's notice that 'mean' is not the KL divergence: what is tested
            warnings.filterwarnings("ignore", "reduction: 'mean' divides", UserWarning)
            return F.kl_div(F.log_softmax(x, 1), b["target"], log_target=log_target, **args)
    return Case(f"kl_div/{config}", title, x=(4, 5), batch=_kl_target(log_target), loss_name="kl_div",
                **_swappable(fn), **kw)


KL_DIV = [
    _kl("batchmean", "F.kl_div(log_softmax(x), p, reduction='batchmean')", "batchmean"),
    _kl("mean", "F.kl_div(log_softmax(x), p, reduction='mean')", "mean"),
    _kl("sum", "F.kl_div(log_softmax(x), p, reduction='sum')", "sum"),
    _kl("log-target", "F.kl_div(log_softmax(x), log p, reduction='batchmean', log_target=True)", "batchmean", True),
    _kl("default", "F.kl_div(log_softmax(x), p), defaults; burn's Reduction::Auto", None,
        hypotheses=(Hypothesis("default", "burn's Reduction::Auto for KLDivLoss is batchmean (sum / batch size); "
                               "PyTorch's kl_div defaults to reduction='mean' (sum / element count)",
                               _swap(lambda x, b: F.kl_div(F.log_softmax(x, 1), b["target"], reduction="batchmean")),
                               "KLDivLoss::forward(input, target, Reduction::Mean)"),)),
]

# ---- likelihoods ---------------------------------------------------------------------------------------------


def _counts(g: torch.Generator) -> Batch:
    return {"target": torch.poisson(torch.rand(4, 5, generator=g) * 4, generator=g)}


def _variances(g: torch.Generator) -> Batch:
    target = torch.randn(4, 5, generator=g)
    var = torch.rand(4, 5, generator=g) + 0.05
    var[0, 0] = 1e-8  # below eps: clamped on both sides
    return {"target": target, "var": var}


LIKELIHOODS = [
    Case("poisson_nll_loss/default", "F.poisson_nll_loss(x, counts), defaults (log_input, not full)", lambda: None,
         (4, 5), batch=_counts, loss=lambda x, b: F.poisson_nll_loss(x, b["target"]), loss_name="poisson_nll_loss"),
    Case("poisson_nll_loss/full-sum", "F.poisson_nll_loss(x, counts, full=True, reduction='sum')", lambda: None,
         (4, 5), batch=_counts, loss=lambda x, b: F.poisson_nll_loss(x, b["target"], full=True, reduction="sum"),
         loss_name="poisson_nll_loss"),
    Case("poisson_nll_loss/rates", "F.poisson_nll_loss(exp(x), counts, log_input=False)", lambda: None,
         (4, 5), batch=_counts, loss=lambda x, b: F.poisson_nll_loss(torch.exp(x), b["target"], log_input=False),
         loss_name="poisson_nll_loss"),
    Case("gaussian_nll_loss/default", "F.gaussian_nll_loss(x, t, var), defaults (eps 1e-6, not full)", lambda: None,
         (4, 5), batch=_variances, loss=lambda x, b: F.gaussian_nll_loss(x, b["target"], b["var"]),
         loss_name="gaussian_nll_loss"),
    Case("gaussian_nll_loss/full-sum", "F.gaussian_nll_loss(x, t, var, full=True, reduction='sum')", lambda: None,
         (4, 5), batch=_variances, loss=lambda x, b: F.gaussian_nll_loss(x, b["target"], b["var"], full=True,
                                                                        reduction="sum"),
         loss_name="gaussian_nll_loss"),
]

# ---- embedding and margin losses -----------------------------------------------------------------------------


def _pair(shape, sign_shape, ints: bool = False) -> Callable[[torch.Generator], Batch]:
    def draw(g: torch.Generator) -> Batch:
        other = torch.randn(shape, generator=g)
        y = torch.randint(0, 2, sign_shape, generator=g) * 2 - 1
        return {"other": other, "y": y if ints else y.float()}
    return draw


def _signed(shape) -> Callable[[torch.Generator], Batch]:
    return lambda g: {"y": (torch.randint(0, 2, shape, generator=g) * 2 - 1).float()}


def _anchor_first(x: torch.Tensor, positive: torch.Tensor) -> torch.Tensor:
    """The positives with the first replaced by the anchor's own (untrained) value: a duplicate pair."""
    return torch.cat([x[:1].detach(), positive[1:]])


def _triplet(g: torch.Generator) -> Batch:
    return {"positive": torch.randn(4, 6, generator=g), "negative": torch.randn(4, 6, generator=g)}


MARGINS = [
    Case("cosine_embedding_loss/default", "F.cosine_embedding_loss(x, x2, y), defaults (margin 0)", lambda: None,
         (4, 6), batch=_pair((4, 6), (4,), ints=True),
         loss=lambda x, b: F.cosine_embedding_loss(x, b["other"], b["y"]), loss_name="cosine_embedding_loss"),
    Case("cosine_embedding_loss/margin-0.3-sum", "F.cosine_embedding_loss(x, x2, y, margin=0.3, reduction='sum')",
         lambda: None, (6, 4), batch=_pair((6, 4), (6,), ints=True),
         loss=lambda x, b: F.cosine_embedding_loss(x, b["other"], b["y"], margin=0.3, reduction="sum"),
         loss_name="cosine_embedding_loss"),
    Case("hinge_embedding_loss/default", "F.hinge_embedding_loss(x, y), defaults (margin 1)", lambda: None, (4, 5),
         batch=_signed((4, 5)), loss=lambda x, b: F.hinge_embedding_loss(x, b["y"]), loss_name="hinge_embedding_loss"),
    Case("hinge_embedding_loss/margin-0.5-sum", "F.hinge_embedding_loss(x, y, margin=0.5, reduction='sum')",
         lambda: None, (4, 5), batch=_signed((4, 5)),
         loss=lambda x, b: F.hinge_embedding_loss(x, b["y"], margin=0.5, reduction="sum"),
         loss_name="hinge_embedding_loss"),
    Case("margin_ranking_loss/default", "F.margin_ranking_loss(x, x2, y), defaults (margin 0)", lambda: None, (8,),
         batch=_pair((8,), (8,)), loss=lambda x, b: F.margin_ranking_loss(x, b["other"], b["y"]),
         loss_name="margin_ranking_loss"),
    Case("margin_ranking_loss/margin-0.5-sum", "F.margin_ranking_loss(x, x2, y, margin=0.5, reduction='sum'), 2-D",
         lambda: None, (3, 4), batch=_pair((3, 4), (3, 4)),
         loss=lambda x, b: F.margin_ranking_loss(x, b["other"], b["y"], margin=0.5, reduction="sum"),
         loss_name="margin_ranking_loss"),
    Case("multi_margin_loss/default", "F.multi_margin_loss(x, y), defaults (p 1, margin 1)", lambda: None, (6, 5),
         batch=_ints((6,), 5), loss=lambda x, b: F.multi_margin_loss(x, b["y"]), loss_name="multi_margin_loss"),
    Case("multi_margin_loss/p2-margin-0.5-sum", "F.multi_margin_loss(x, y, p=2, margin=0.5, reduction='sum')",
         lambda: None, (6, 5), batch=_ints((6,), 5),
         loss=lambda x, b: F.multi_margin_loss(x, b["y"], p=2, margin=0.5, reduction="sum"),
         loss_name="multi_margin_loss"),
    Case("soft_margin_loss/default", "F.soft_margin_loss(x, y)", lambda: None, (4, 5), batch=_signed((4, 5)),
         loss=lambda x, b: F.soft_margin_loss(x, b["y"]), loss_name="soft_margin_loss"),
    Case("soft_margin_loss/sum", "F.soft_margin_loss(x, y, reduction='sum')", lambda: None, (4, 5),
         batch=_signed((4, 5)), loss=lambda x, b: F.soft_margin_loss(x, b["y"], reduction="sum"),
         loss_name="soft_margin_loss"),
    Case("triplet_margin_loss/default", "F.triplet_margin_loss(x, positive, negative), defaults (margin 1, p 2)",
         x=(4, 6), batch=_triplet, loss_name="triplet_margin_loss",
         **_swappable(lambda x, b: F.triplet_margin_loss(x, b["positive"], b["negative"]))),
    Case("triplet_margin_loss/p1-margin-2-sum",
         "F.triplet_margin_loss(x, positive, negative, p=1, margin=2, reduction='sum')",
         x=(4, 6), batch=_triplet, loss_name="triplet_margin_loss",
         **_swappable(lambda x, b: F.triplet_margin_loss(x, b["positive"], b["negative"], p=1, margin=2.0,
                                                         reduction="sum"))),
    Case("triplet_margin_loss/anchor-is-positive",
         "F.triplet_margin_loss(x, positive, negative), the first positive the anchor itself (a distance of 0)",
         x=(4, 6), batch=_triplet, loss_name="triplet_margin_loss",
         hypotheses=(Hypothesis(
             "framework", "burn's TripletMarginLoss takes the distance as sqrt(sum(d^2)) with no eps (PyTorch's "
             "pairwise_distance adds eps=1e-6): at a zero distance its gradient is 0 * inf = NaN, and the NaN reaches "
             "the anchor even where the hinge is inactive", rule="D016",
             fix="compute the loss by hand with PyTorch's eps: relu(dist(anchor - positive) - dist(anchor - negative) "
                 "+ margin), dist(d) = (d + 1e-6).powi_scalar(2).sum_dim(1).sqrt()"),),
         **_swappable(lambda x, b: F.triplet_margin_loss(x, _anchor_first(x, b["positive"]), b["negative"]))),
]

# ---- CTC ---------------------------------------------------------------------------------------------------


def _ctc_batch(blank: int, impossible: bool = False) -> Callable[[torch.Generator], Batch]:
    """Two sequences of 8 and 6 frames, targets of 3 and 2 labels (never the blank); ``impossible``: the second
    is [2, 2, 2] in 3 frames, which no alignment reaches (repeats need a blank between them): an infinite loss."""
    def draw(g: torch.Generator) -> Batch:
        labels = [c for c in range(5) if c != blank]
        targets = torch.tensor(labels)[torch.randint(0, 4, (2, 3), generator=g)]
        lengths = [8, 6]
        if impossible:
            targets[1] = 2
            lengths = [8, 3]
        return {"targets": targets, "input_lengths": torch.tensor(lengths),
                "target_lengths": torch.tensor([3, 3 if impossible else 2])}
    return draw


def _ctc(**kw) -> LossFn:
    return lambda x, b: F.ctc_loss(F.log_softmax(x, 2), b["targets"], b["input_lengths"], b["target_lengths"], **kw)


CTC = [
    Case("ctc_loss/default", "F.ctc_loss(log_softmax(x), targets, lengths), defaults (blank 0, mean over target "
         "lengths)", lambda: None, (8, 2, 5), batch=_ctc_batch(0), loss=_ctc(), loss_name="ctc_loss"),
    Case("ctc_loss/blank-4-sum", "F.ctc_loss(..., blank=4, reduction='sum')", lambda: None, (8, 2, 5),
         batch=_ctc_batch(4), loss=_ctc(blank=4, reduction="sum"), loss_name="ctc_loss"),
    Case("ctc_loss/zero-infinity", "F.ctc_loss(..., zero_infinity=True), the second sequence impossible",
         lambda: None, (8, 2, 5), batch=_ctc_batch(0, impossible=True), loss=_ctc(zero_infinity=True),
         loss_name="ctc_loss"),
]

CASES = [*CROSS_ENTROPY, *BINARY_CROSS_ENTROPY, *REGRESSION, *KL_DIV, *LIKELIHOODS, *MARGINS, *CTC]
