"""Convolutions, transposed convolutions, pooling, interpolation, pixel shuffle, unfold and fold: each built
with PyTorch's defaults and with explicit strides, paddings (PyTorch's ``padding='same'``: burn's
``PaddingConfig*::Same``), dilations, groups and no bias, against burn-nn's twin (rust/conformance:
cases/conv.rs)."""

from __future__ import annotations

import torch.nn.functional as F
from torch import nn

from burnside.conformance.case import Case, Hypothesis


def _set(layer: nn.Module, **values) -> nn.Module:
    """``layer`` with attributes changed (the float64 run of what burn computes)."""
    for key, value in values.items():
        setattr(layer, key, value)
    return layer


class _Interpolate(nn.Module):
    """``F.interpolate(x, size, mode=..., antialias=...)`` as a module (nn.Upsample has no antialias)."""

    def __init__(self, size: tuple[int, int], mode: str, antialias: bool) -> None:
        super().__init__()
        self.size, self.mode, self.antialias = size, mode, antialias

    def forward(self, x):
        return F.interpolate(x, size=self.size, mode=self.mode, align_corners=False, antialias=self.antialias)


_ALIGN = Hypothesis("default", "burn's Interpolate1d/2dConfig align_corners defaults to true; PyTorch's "
                    "align_corners=None means false (half-pixel centres)",
                    lambda layer: _set(layer, align_corners=True),
                    "Interpolate2dConfig::new().with_align_corners(false) (Interpolate1dConfig likewise)")

_RECOMPUTE = Hypothesis("framework", "burn turns scale_factor into an output size and maps coordinates by "
                        "in/out sizes; PyTorch maps by 1/scale_factor (burn = recompute_scale_factor=True)",
                        lambda layer: _set(layer, recompute_scale_factor=True),
                        "give burn output_size and PyTorch recompute_scale_factor=True, or use a scale "
                        "that divides the size exactly")

_ANTIALIAS = Hypothesis("framework", "burn's interpolate has no antialias: it downsamples by sampling (PyTorch "
                        "antialias=False)", lambda layer: _set(layer, antialias=False))

_REFLECT = Hypothesis("framework", "burn's Conv2d has no padding_mode: it pads with zeros",
                      lambda layer: _set(layer, padding_mode="zeros"),
                      "pad the input with x.pad([(1, 1), (1, 1)], PadMode::Reflect) and build the Conv2d "
                      "with PaddingConfig2d::Valid")

#: burn-nn's `calculate_same_padding` takes no dilation: a dilated `Same` convolution's output is smaller than its
#: input, and the port fails on the first use of it (docs/burn-issues/same-padding-ignores-dilation.md).
_SAME_DILATION = Hypothesis("not comparable", "burn bug: PaddingConfig::Same ignores the dilation, so the output is "
                            "smaller than the input (docs/burn-issues/same-padding-ignores-dilation.md)",
                            fix="pad explicitly: PaddingConfig2d::Explicit with dilation * (kernel - 1) / 2 a side",
                            failure="incompatible shapes")


CASES = [
    # -- convolutions
    Case("conv1d/default", "nn.Conv1d(3, 4, 3), defaults", lambda: nn.Conv1d(3, 4, 3), (2, 3, 10), ci=True),
    Case("conv1d/stride2-pad1-dil2", "nn.Conv1d(3, 4, 3, stride=2, padding=1, dilation=2)",
         lambda: nn.Conv1d(3, 4, 3, stride=2, padding=1, dilation=2), (2, 3, 11)),
    Case("conv1d/same-even-kernel", "nn.Conv1d(3, 4, 4, padding='same') (asymmetric: 1 left, 2 right)",
         lambda: nn.Conv1d(3, 4, 4, padding="same"), (2, 3, 9)),
    Case("conv1d/same-dilation2", "nn.Conv1d(3, 4, 3, padding='same', dilation=2)",
         lambda: nn.Conv1d(3, 4, 3, padding="same", dilation=2), (2, 3, 9), hypotheses=(_SAME_DILATION,)),
    Case("conv2d/same-dilation2", "nn.Conv2d(2, 3, 3, padding='same', dilation=2)",
         lambda: nn.Conv2d(2, 3, 3, padding="same", dilation=2), (1, 2, 6, 6), hypotheses=(_SAME_DILATION,)),
    Case("conv1d/groups2-no-bias", "nn.Conv1d(4, 6, 3, groups=2, bias=False)",
         lambda: nn.Conv1d(4, 6, 3, groups=2, bias=False), (2, 4, 8)),
    Case("conv2d/default", "nn.Conv2d(2, 3, 3), defaults", lambda: nn.Conv2d(2, 3, 3), (2, 2, 6, 6), ci=True),
    Case("conv2d/stride2-pad1", "nn.Conv2d(2, 4, 3, stride=2, padding=1)",
         lambda: nn.Conv2d(2, 4, 3, stride=2, padding=1), (2, 2, 7, 7)),
    Case("conv2d/rect-stride-pad-dil", "nn.Conv2d(2, 3, (2, 3), stride=(1, 2), padding=(1, 0), dilation=(2, 1))",
         lambda: nn.Conv2d(2, 3, (2, 3), stride=(1, 2), padding=(1, 0), dilation=(2, 1)), (1, 2, 6, 7)),
    Case("conv2d/same-rect-kernel", "nn.Conv2d(2, 3, (3, 4), padding='same')",
         lambda: nn.Conv2d(2, 3, (3, 4), padding="same"), (1, 2, 5, 6)),
    Case("conv2d/depthwise-no-bias", "nn.Conv2d(4, 4, 3, groups=4, bias=False)",
         lambda: nn.Conv2d(4, 4, 3, groups=4, bias=False), (1, 4, 5, 5)),
    Case("conv2d/padding-reflect", "nn.Conv2d(2, 3, 3, padding=1, padding_mode='reflect')",
         lambda: nn.Conv2d(2, 3, 3, padding=1, padding_mode="reflect"), (1, 2, 5, 5), hypotheses=(_REFLECT,)),
    Case("conv3d/default", "nn.Conv3d(2, 2, 3), defaults", lambda: nn.Conv3d(2, 2, 3), (1, 2, 4, 5, 5)),
    Case("conv3d/stride-pad-dil", "nn.Conv3d(2, 3, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 1), "
         "dilation=(1, 1, 2))",
         lambda: nn.Conv3d(2, 3, (3, 2, 3), stride=(1, 2, 1), padding=(1, 0, 1), dilation=(1, 1, 2)),
         (1, 2, 4, 5, 6)),
    Case("conv3d/same-groups2-no-bias", "nn.Conv3d(2, 4, 3, padding='same', groups=2, bias=False)",
         lambda: nn.Conv3d(2, 4, 3, padding="same", groups=2, bias=False), (1, 2, 3, 4, 4)),
    # -- transposed convolutions
    Case("conv_transpose1d/default", "nn.ConvTranspose1d(3, 2, 3), defaults", lambda: nn.ConvTranspose1d(3, 2, 3),
         (2, 3, 5)),
    Case("conv_transpose1d/stride2-pad1-outpad1", "nn.ConvTranspose1d(3, 2, 3, stride=2, padding=1, output_padding=1)",
         lambda: nn.ConvTranspose1d(3, 2, 3, stride=2, padding=1, output_padding=1), (2, 3, 5)),
    Case("conv_transpose1d/groups2-dil2-no-bias", "nn.ConvTranspose1d(4, 6, 3, groups=2, dilation=2, bias=False)",
         lambda: nn.ConvTranspose1d(4, 6, 3, groups=2, dilation=2, bias=False), (1, 4, 5)),
    Case("conv_transpose2d/default", "nn.ConvTranspose2d(2, 3, 3), defaults", lambda: nn.ConvTranspose2d(2, 3, 3),
         (1, 2, 4, 4), ci=True),
    Case("conv_transpose2d/stride2-pad1-outpad1", "nn.ConvTranspose2d(2, 2, 3, stride=2, padding=1, output_padding=1)",
         lambda: nn.ConvTranspose2d(2, 2, 3, stride=2, padding=1, output_padding=1), (1, 2, 3, 4)),
    Case("conv_transpose2d/rect-groups2-dil", "nn.ConvTranspose2d(4, 2, (2, 3), stride=(2, 1), padding=(0, 1), "
         "dilation=(1, 2), groups=2)",
         lambda: nn.ConvTranspose2d(4, 2, (2, 3), stride=(2, 1), padding=(0, 1), dilation=(1, 2), groups=2),
         (1, 4, 3, 4)),
    Case("conv_transpose3d/default", "nn.ConvTranspose3d(2, 2, 2), defaults", lambda: nn.ConvTranspose3d(2, 2, 2),
         (1, 2, 3, 3, 3)),
    Case("conv_transpose3d/stride2-outpad1-groups2", "nn.ConvTranspose3d(2, 4, 3, stride=2, padding=1, "
         "output_padding=1, groups=2)",
         lambda: nn.ConvTranspose3d(2, 4, 3, stride=2, padding=1, output_padding=1, groups=2), (1, 2, 2, 3, 2)),
    # -- pooling
    Case("max_pool1d/default", "nn.MaxPool1d(3) (stride = kernel)", lambda: nn.MaxPool1d(3), (2, 3, 10)),
    Case("max_pool1d/stride1-pad1-dil2", "nn.MaxPool1d(3, stride=1, padding=1, dilation=2)",
         lambda: nn.MaxPool1d(3, stride=1, padding=1, dilation=2), (2, 3, 8)),
    Case("max_pool1d/ceil-mode", "nn.MaxPool1d(3, stride=2, ceil_mode=True)",
         lambda: nn.MaxPool1d(3, stride=2, ceil_mode=True), (2, 3, 10)),
    Case("max_pool1d/ceil-mode-last-window-in-pad", "nn.MaxPool1d(2, stride=3, padding=1, ceil_mode=True) of "
         "length 5 (PyTorch drops a last window that starts in the padding)",
         lambda: nn.MaxPool1d(2, stride=3, padding=1, ceil_mode=True), (2, 3, 5)),
    Case("max_pool2d/default", "nn.MaxPool2d(2) (stride = kernel)", lambda: nn.MaxPool2d(2), (1, 2, 6, 6), ci=True),
    Case("max_pool2d/stride-pad-dil", "nn.MaxPool2d((3, 2), stride=(2, 1), padding=1, dilation=(1, 2))",
         lambda: nn.MaxPool2d((3, 2), stride=(2, 1), padding=1, dilation=(1, 2)), (1, 2, 7, 6)),
    Case("max_pool2d/ceil-mode-pad1", "nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True)",
         lambda: nn.MaxPool2d(3, stride=2, padding=1, ceil_mode=True), (1, 2, 6, 6)),
    Case("avg_pool1d/default", "nn.AvgPool1d(3) (stride = kernel)", lambda: nn.AvgPool1d(3), (2, 3, 9)),
    Case("avg_pool1d/pad1-count-pad", "nn.AvgPool1d(3, stride=2, padding=1) (count_include_pad=True)",
         lambda: nn.AvgPool1d(3, stride=2, padding=1), (2, 3, 9)),
    Case("avg_pool1d/pad1-exclude-pad", "nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False)",
         lambda: nn.AvgPool1d(3, stride=2, padding=1, count_include_pad=False), (2, 3, 9)),
    Case("avg_pool1d/ceil-mode-pad1", "nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True)",
         lambda: nn.AvgPool1d(3, stride=2, padding=1, ceil_mode=True), (2, 3, 10)),
    Case("avg_pool1d/ceil-mode-last-window-in-pad", "nn.AvgPool1d(2, stride=3, padding=1, ceil_mode=True) of "
         "length 5 (PyTorch drops a last window that starts in the padding)",
         lambda: nn.AvgPool1d(2, stride=3, padding=1, ceil_mode=True), (2, 3, 5)),
    Case("avg_pool2d/default", "nn.AvgPool2d(2) (stride = kernel)", lambda: nn.AvgPool2d(2), (1, 2, 6, 6), ci=True),
    Case("avg_pool2d/pad1-count-pad", "nn.AvgPool2d(3, stride=2, padding=1) (count_include_pad=True)",
         lambda: nn.AvgPool2d(3, stride=2, padding=1), (1, 2, 7, 7)),
    Case("avg_pool2d/pad1-exclude-pad", "nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False)",
         lambda: nn.AvgPool2d(3, stride=2, padding=1, count_include_pad=False), (1, 2, 7, 7)),
    Case("avg_pool2d/ceil-mode-pad1", "nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True)",
         lambda: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True), (1, 2, 6, 6)),
    Case("avg_pool2d/ceil-mode-exclude-pad", "nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, "
         "count_include_pad=False)",
         lambda: nn.AvgPool2d(3, stride=2, padding=1, ceil_mode=True, count_include_pad=False), (1, 2, 6, 6)),
    Case("adaptive_avg_pool1d/divides", "nn.AdaptiveAvgPool1d(4) of length 8", lambda: nn.AdaptiveAvgPool1d(4),
         (2, 3, 8)),
    Case("adaptive_avg_pool1d/not-divides", "nn.AdaptiveAvgPool1d(3) of length 7 (overlapping windows)",
         lambda: nn.AdaptiveAvgPool1d(3), (2, 3, 7)),
    Case("adaptive_avg_pool1d/upsample", "nn.AdaptiveAvgPool1d(5) of length 3", lambda: nn.AdaptiveAvgPool1d(5),
         (2, 3, 3)),
    Case("adaptive_avg_pool2d/divides", "nn.AdaptiveAvgPool2d((3, 2)) of 6x4", lambda: nn.AdaptiveAvgPool2d((3, 2)),
         (1, 2, 6, 4)),
    Case("adaptive_avg_pool2d/not-divides", "nn.AdaptiveAvgPool2d((3, 4)) of 7x5",
         lambda: nn.AdaptiveAvgPool2d((3, 4)), (1, 2, 7, 5)),
    # -- interpolation (nn.Upsample, as F.interpolate)
    Case("interpolate1d/nearest", "nn.Upsample(size=7), nearest (defaults)", lambda: nn.Upsample(size=7), (2, 3, 4)),
    Case("interpolate1d/linear-default", "nn.Upsample(size=7, mode='linear') (align_corners=False)",
         lambda: nn.Upsample(size=7, mode="linear"), (2, 3, 4), hypotheses=(_ALIGN,)),
    Case("interpolate1d/linear-align-corners", "nn.Upsample(size=7, mode='linear', align_corners=True)",
         lambda: nn.Upsample(size=7, mode="linear", align_corners=True), (2, 3, 4)),
    Case("interpolate1d/linear-half-pixel", "nn.Upsample(size=7, mode='linear', align_corners=False), burn "
         "with_align_corners(false)",
         lambda: nn.Upsample(size=7, mode="linear", align_corners=False), (2, 3, 4)),
    Case("interpolate2d/nearest", "nn.Upsample(size=(7, 9)), nearest (defaults)", lambda: nn.Upsample(size=(7, 9)),
         (1, 2, 4, 5), ci=True),
    Case("interpolate2d/nearest-down", "nn.Upsample(size=(3, 2)), nearest, downsampling 7x5",
         lambda: nn.Upsample(size=(3, 2)), (1, 2, 7, 5)),
    Case("interpolate2d/nearest-scale2", "nn.Upsample(scale_factor=2), nearest", lambda: nn.Upsample(scale_factor=2),
         (1, 2, 3, 4)),
    Case("interpolate2d/nearest-scale1p7", "nn.Upsample(scale_factor=1.7), nearest, of 5x5 (burn: with_scale_factor)",
         lambda: nn.Upsample(scale_factor=1.7), (1, 2, 5, 5), hypotheses=(_RECOMPUTE,)),
    Case("interpolate2d/nearest-exact", "nn.Upsample(size=(7, 9), mode='nearest-exact') (burn: NearestExact)",
         lambda: nn.Upsample(size=(7, 9), mode="nearest-exact"), (1, 2, 4, 5),
         hypotheses=(Hypothesis("not comparable", "burn bug: burn-nn offers InterpolateMode::NearestExact, but the CPU "
                                "backend (burn-flex) panics on it (docs/burn-issues/flex-nearest-exact-unsupported.md)",
                                failure="unsupported mode NearestExact"),)),
    Case("interpolate2d/bilinear-default", "nn.Upsample(size=(7, 9), mode='bilinear') (align_corners=False)",
         lambda: nn.Upsample(size=(7, 9), mode="bilinear"), (1, 2, 4, 5), hypotheses=(_ALIGN,)),
    Case("interpolate2d/bilinear-align-corners", "nn.Upsample(size=(7, 9), mode='bilinear', align_corners=True)",
         lambda: nn.Upsample(size=(7, 9), mode="bilinear", align_corners=True), (1, 2, 4, 5)),
    Case("interpolate2d/bilinear-half-pixel", "nn.Upsample(size=(7, 9), mode='bilinear', align_corners=False), "
         "burn with_align_corners(false)",
         lambda: nn.Upsample(size=(7, 9), mode="bilinear", align_corners=False), (1, 2, 4, 5)),
    Case("interpolate2d/bilinear-down", "nn.Upsample(size=(3, 4), mode='bilinear', align_corners=False), "
         "downsampling 7x9",
         lambda: nn.Upsample(size=(3, 4), mode="bilinear", align_corners=False), (1, 2, 7, 9)),
    Case("interpolate2d/bilinear-scale1p5", "nn.Upsample(scale_factor=1.5, mode='bilinear', align_corners=False) "
         "of 5x5 (burn: with_scale_factor)",
         lambda: nn.Upsample(scale_factor=1.5, mode="bilinear", align_corners=False), (1, 2, 5, 5),
         hypotheses=(_RECOMPUTE,)),
    Case("interpolate2d/bilinear-antialias", "F.interpolate(size=(3, 4), mode='bilinear', antialias=True), "
         "downsampling 7x9",
         lambda: _Interpolate((3, 4), "bilinear", True), (1, 2, 7, 9), hypotheses=(_ANTIALIAS,)),
    Case("interpolate2d/bicubic-default", "nn.Upsample(size=(7, 9), mode='bicubic') (align_corners=False)",
         lambda: nn.Upsample(size=(7, 9), mode="bicubic"), (1, 2, 4, 5), hypotheses=(_ALIGN,)),
    Case("interpolate2d/bicubic-align-corners", "nn.Upsample(size=(7, 9), mode='bicubic', align_corners=True)",
         lambda: nn.Upsample(size=(7, 9), mode="bicubic", align_corners=True), (1, 2, 4, 5)),
    Case("interpolate2d/bicubic-half-pixel", "nn.Upsample(size=(7, 9), mode='bicubic', align_corners=False), "
         "burn with_align_corners(false)",
         lambda: nn.Upsample(size=(7, 9), mode="bicubic", align_corners=False), (1, 2, 4, 5)),
    Case("interpolate2d/bicubic-down", "nn.Upsample(size=(3, 4), mode='bicubic', align_corners=False), "
         "downsampling 7x9",
         lambda: nn.Upsample(size=(3, 4), mode="bicubic", align_corners=False), (1, 2, 7, 9)),
    # -- pixel shuffle, unfold, fold
    Case("pixel_shuffle/factor2", "nn.PixelShuffle(2)", lambda: nn.PixelShuffle(2), (1, 8, 3, 3)),
    Case("pixel_shuffle/factor3", "nn.PixelShuffle(3)", lambda: nn.PixelShuffle(3), (2, 9, 2, 2)),
    Case("pixel_unshuffle/factor2", "nn.PixelUnshuffle(2)", lambda: nn.PixelUnshuffle(2), (1, 2, 4, 6)),
    Case("unfold/default", "nn.Unfold(kernel_size=2), defaults", lambda: nn.Unfold(2), (1, 2, 4, 5)),
    Case("unfold/stride-pad-dil", "nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=(2, 1))",
         lambda: nn.Unfold((2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), (1, 2, 5, 6)),
    Case("fold/default", "nn.Fold(output_size=(4, 5), kernel_size=2), defaults",
         lambda: nn.Fold((4, 5), 2), (1, 8, 12)),
    Case("fold/stride-pad-dil", "nn.Fold((5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)) "
         "(overlapping blocks summed)",
         lambda: nn.Fold((5, 6), (2, 3), dilation=(1, 2), padding=1, stride=(2, 1)), (1, 12, 12)),
]
