"""The normalisation layers and Embedding: BatchNorm (training and eval mode, running statistics recorded as
buffers), LayerNorm, GroupNorm, InstanceNorm, RMSNorm, LocalResponseNorm, Embedding.

Several cases feed a small-variance input (``x_scale=1e-3``: a variance of about 1e-6, below the default epsilon
1e-5), where an epsilon added outside the square root, or a different epsilon, changes every output.
"""

from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from burnside.conformance.case import Case, Hypothesis

#: Embedding cases: a vocabulary of 10, rows of 4, ids of shape (3, 5).
_VOCAB, _DIM, _IDS = 10, 4, (3, 5)


def _ids(generator: torch.Generator) -> dict[str, torch.Tensor]:
    """Token ids that hold the padding id 0 several times (and every other id at most a few)."""
    ids = torch.randint(0, _VOCAB, _IDS, generator=generator)
    ids[:, 0] = 0
    return {"ids": ids}


def _embed(layer: nn.Module, x: torch.Tensor | None, batch: dict[str, torch.Tensor]) -> torch.Tensor:
    return layer(batch["ids"])


def _without(attribute: str):
    """A hypothesis change: the PyTorch layer with ``attribute`` set to None (an option burn does not have)."""
    def change(layer: nn.Module) -> nn.Module:
        setattr(layer, attribute, None)
        return layer
    return change


class BurnLocalResponseNorm(nn.Module):
    """Local response normalisation as burn-nn 0.22.1 computes it (local_response.rs): the channel window is
    padded ``(size - 1) // 2`` before and ``size // 2`` after, where PyTorch pads ``size // 2`` before and
    ``(size - 1) // 2`` after; the two agree for an odd ``size``, and for an even one burn's window is one
    channel later."""

    def __init__(self, layer: nn.LocalResponseNorm) -> None:
        super().__init__()
        self.size, self.alpha, self.beta, self.k = layer.size, layer.alpha, layer.beta, layer.k

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        n, c = x.shape[:2]
        squared = (x * x).reshape(n, c, -1).transpose(1, 2).reshape(-1, 1, c)
        padded = F.pad(squared, ((self.size - 1) // 2, self.size // 2))
        average = F.avg_pool1d(padded, self.size, stride=1)
        average = average.reshape(n, -1, c).transpose(1, 2).reshape(x.shape)
        return x / (average * self.alpha + self.k).pow(self.beta)


CASES = [
    # BatchNorm in training mode: normalised by the batch's statistics; running_mean and running_var are
    # buffers recorded after the step. burn updates running_var with the biased variance (the referee's
    # variant burn-batchnorm: such a case is `framework`, catalogued).
    Case("batch_norm1d/train-default", "nn.BatchNorm1d(4), training mode, defaults, input (8, 4)",
         lambda: nn.BatchNorm1d(4), (8, 4)),
    Case("batch_norm1d/train-momentum-eps", "nn.BatchNorm1d(3, eps=1e-3, momentum=0.3), training mode, input (4, 3, 5)",
         lambda: nn.BatchNorm1d(3, eps=1e-3, momentum=0.3), (4, 3, 5)),
    Case("batch_norm2d/train", "nn.BatchNorm2d(3), training mode, defaults, input (2, 3, 4, 4)",
         lambda: nn.BatchNorm2d(3), (2, 3, 4, 4)),
    Case("batch_norm2d/train-small-var", "nn.BatchNorm2d(3), training mode, input of variance ~1e-6 (below eps)",
         lambda: nn.BatchNorm2d(3), (2, 3, 4, 4), x_scale=1e-3),
    Case("batch_norm2d/train-momentum-1", "nn.BatchNorm2d(3, momentum=1.0, eps=1e-4), training mode",
         lambda: nn.BatchNorm2d(3, momentum=1.0, eps=1e-4), (2, 3, 3, 3)),
    Case("batch_norm2d/train-3-steps", "nn.BatchNorm2d(3), training mode, three SGD steps (the running statistics "
         "carried from step to step)", lambda: nn.BatchNorm2d(3), (2, 3, 3, 3), steps=3),
    # eval mode: normalised by the running statistics (burn: the module's `training` flag disabled on the
    # autodiff device, so its forward takes the inference path and still trains gamma and beta). A training
    # trace's init file carries no buffers, so both sides start from the initial statistics (mean 0, var 1):
    # eps is what is checked (1 / sqrt(1 + eps)).
    Case("batch_norm1d/eval", "nn.BatchNorm1d(4).eval(), initial running statistics, input (6, 4)",
         lambda: nn.BatchNorm1d(4).eval(), (6, 4)),
    Case("batch_norm2d/eval-eps", "nn.BatchNorm2d(3, eps=1e-2).eval(), initial running statistics",
         lambda: nn.BatchNorm2d(3, eps=1e-2).eval(), (2, 3, 3, 3)),

    Case("batch_norm1d/eval-3d", "nn.BatchNorm1d(3, eps=1e-3).eval(), input (2, 3, 5)",
         lambda: nn.BatchNorm1d(3, eps=1e-3).eval(), (2, 3, 5)),
    # options burn's BatchNorm does not have: the burn side is BatchNormConfig::new(C), as a port would write it
    Case("batch_norm2d/no-affine", "nn.BatchNorm2d(3, affine=False); burn BatchNormConfig::new(3) (no affine option)",
         lambda: nn.BatchNorm2d(3, affine=False), (2, 3, 3, 3),
         hypotheses=(Hypothesis("framework", "burn's BatchNorm has no affine option: it always has gamma and beta, "
                                "which a PyTorch BatchNorm(affine=False) has no weights to load into",
                                fix="load gamma = 1 and beta = 0 (and keep them frozen) for PyTorch's affine=False",
                                failure="`layer.gamma` -> `layer.weight`"),)),
    Case("batch_norm1d/no-running-stats", "nn.BatchNorm1d(4, track_running_stats=False); burn BatchNormConfig::new(4) "
         "(no such option)", lambda: nn.BatchNorm1d(4, track_running_stats=False), (8, 4)),

    # LayerNorm
    Case("layer_norm/no-bias", "nn.LayerNorm(16, bias=False)", lambda: nn.LayerNorm(16, bias=False), (2, 3, 16)),
    Case("layer_norm/no-affine", "nn.LayerNorm(16, elementwise_affine=False); burn: burn::tensor::module::layer_norm "
         "with a constant gamma of ones (burn's LayerNorm always has a trained gamma)",
         lambda: nn.LayerNorm(16, elementwise_affine=False), (4, 16)),
    Case("layer_norm/small-var", "nn.LayerNorm(16), defaults, input of variance ~1e-6 (below eps 1e-5)",
         lambda: nn.LayerNorm(16), (2, 3, 16), x_scale=1e-3),
    Case("layer_norm/eps-1e-3-small-var", "nn.LayerNorm(8, eps=1e-3), input of variance ~1e-6",
         lambda: nn.LayerNorm(8, eps=1e-3), (4, 8), x_scale=1e-3),

    # GroupNorm
    Case("group_norm/groups-1", "nn.GroupNorm(1, 4), input (2, 4, 3)", lambda: nn.GroupNorm(1, 4), (2, 4, 3)),
    Case("group_norm/groups-2", "nn.GroupNorm(2, 4), input (2, 4, 3, 3)", lambda: nn.GroupNorm(2, 4), (2, 4, 3, 3)),
    Case("group_norm/groups-c", "nn.GroupNorm(4, 4) (a group per channel), input (2, 4, 5)",
         lambda: nn.GroupNorm(4, 4), (2, 4, 5)),
    Case("group_norm/no-affine", "nn.GroupNorm(2, 6, affine=False), input (3, 6, 4)",
         lambda: nn.GroupNorm(2, 6, affine=False), (3, 6, 4)),
    Case("group_norm/eps-small-var", "nn.GroupNorm(2, 4, eps=1e-4), input of variance ~1e-6",
         lambda: nn.GroupNorm(2, 4, eps=1e-4), (2, 4, 6), x_scale=1e-3),

    # InstanceNorm: PyTorch's default is affine=False, burn's InstanceNormConfig affine=true.
    Case("instance_norm1d/default", "nn.InstanceNorm1d(4), defaults (affine=False); burn InstanceNormConfig::new(4)",
         lambda: nn.InstanceNorm1d(4), (2, 4, 6),
         hypotheses=(Hypothesis("default", "burn's InstanceNormConfig affine defaults to true (gamma and beta), "
                                "nn.InstanceNorm1d/2d's affine to False (no weights to load)",
                                fix="InstanceNormConfig::new(c).with_affine(false)",
                                failure="`layer.gamma` -> `layer.weight`"),)),
    Case("instance_norm1d/no-affine", "nn.InstanceNorm1d(4); burn InstanceNormConfig::new(4).with_affine(false)",
         lambda: nn.InstanceNorm1d(4), (2, 4, 6)),
    Case("instance_norm1d/affine", "nn.InstanceNorm1d(4, affine=True)", lambda: nn.InstanceNorm1d(4, affine=True),
         (2, 4, 6)),
    Case("instance_norm2d/affine", "nn.InstanceNorm2d(3, affine=True), input (2, 3, 4, 4)",
         lambda: nn.InstanceNorm2d(3, affine=True), (2, 3, 4, 4)),
    Case("instance_norm2d/no-affine-small-var", "nn.InstanceNorm2d(3), input of variance ~1e-6",
         lambda: nn.InstanceNorm2d(3), (2, 3, 3, 3), x_scale=1e-3),

    # RMSNorm (the default case is basic.py's rms_norm/default)
    Case("rms_norm/eps-explicit", "nn.RMSNorm(16, eps=1e-6)", lambda: nn.RMSNorm(16, eps=1e-6), (2, 3, 16)),
    Case("rms_norm/eps-small-var", "nn.RMSNorm(8, eps=1e-5), input of mean square ~1e-6",
         lambda: nn.RMSNorm(8, eps=1e-5), (4, 8), x_scale=1e-3),

    # LocalResponseNorm (no parameters: the input's gradient carries the check)
    Case("local_response_norm/default", "nn.LocalResponseNorm(3), defaults, input (2, 6, 3, 3)",
         lambda: nn.LocalResponseNorm(3), (2, 6, 3, 3)),
    Case("local_response_norm/size-5-explicit", "nn.LocalResponseNorm(5, alpha=0.5, beta=0.6, k=2.0), input (2, 7, 4)",
         lambda: nn.LocalResponseNorm(5, alpha=0.5, beta=0.6, k=2.0), (2, 7, 4)),
    Case("local_response_norm/size-2", "nn.LocalResponseNorm(2, alpha=1.0, beta=0.75, k=1.0) (an even window), "
         "input (2, 5, 3, 3)", lambda: nn.LocalResponseNorm(2, alpha=1.0, beta=0.75, k=1.0), (2, 5, 3, 3),
         hypotheses=(Hypothesis("framework", "burn's LocalResponseNorm pads an even window (size - 1) // 2 before and "
                                "size // 2 after the channel (as ONNX's LRN, and as its docs say), PyTorch size // 2 "
                                "before and (size - 1) // 2 after: burn's window is one channel later "
                                "(burn-nn 0.22.1 local_response.rs)",
                                BurnLocalResponseNorm),)),

    Case("local_response_norm/size-4-3d", "nn.LocalResponseNorm(4, alpha=0.8, beta=0.5, k=1.5) (an even window), "
         "input (2, 6, 5)", lambda: nn.LocalResponseNorm(4, alpha=0.8, beta=0.5, k=1.5), (2, 6, 5),
         hypotheses=(Hypothesis("framework", "burn's LocalResponseNorm pads an even window (size - 1) // 2 before and "
                                "size // 2 after the channel (as ONNX's LRN, and as its docs say), PyTorch size // 2 "
                                "before and (size - 1) // 2 after: burn's window is one channel later "
                                "(burn-nn 0.22.1 local_response.rs)", BurnLocalResponseNorm),)),

    # Embedding (integer ids from the batch; the weight is the only parameter)
    Case("embedding/default", "nn.Embedding(10, 4), ids (3, 5)", lambda: nn.Embedding(_VOCAB, _DIM), None,
         call=_embed, batch=_ids),
    Case("embedding/padding-idx", "nn.Embedding(10, 4, padding_idx=0), ids holding 0; burn EmbeddingConfig::new(10, 4)",
         lambda: nn.Embedding(_VOCAB, _DIM, padding_idx=0), None, call=_embed, batch=_ids,
         hypotheses=(Hypothesis("framework", "burn's Embedding has no padding_idx: the padding row gets a gradient "
                                "and is trained", _without("padding_idx"),
                                "zero the padding row's gradient (or mask the ids' embeddings) in the port"),)),
    Case("embedding/max-norm", "nn.Embedding(10, 4, max_norm=1.0); burn EmbeddingConfig::new(10, 4)",
         lambda: nn.Embedding(_VOCAB, _DIM, max_norm=1.0), None, call=_embed, batch=_ids,
         hypotheses=(Hypothesis("framework", "burn's Embedding has no max_norm: the looked-up rows are not "
                                "renormalised to norm 1", _without("max_norm"),
                                "renormalise the weight's rows in the port before the lookup"),)),
]
