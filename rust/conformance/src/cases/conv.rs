//! Convolutions, transposed convolutions, pooling, interpolation, pixel shuffle, unfold and fold, each
//! built as a port would build PyTorch's layer (burnside.conformance.cases.conv has PyTorch's side).

use burn::nn::conv::{
    Conv1dConfig, Conv2dConfig, Conv3dConfig, ConvTranspose1dConfig, ConvTranspose2dConfig,
    ConvTranspose3dConfig,
};
use burn::nn::interpolate::{Interpolate1dConfig, Interpolate2dConfig, InterpolateMode};
use burn::nn::pool::{
    AdaptiveAvgPool1dConfig, AdaptiveAvgPool2dConfig, AvgPool1dConfig, AvgPool2dConfig, MaxPool1dConfig,
    MaxPool2dConfig,
};
use burn::nn::{
    Fold4dConfig, PaddingConfig1d, PaddingConfig2d, PaddingConfig3d, PixelShuffleConfig, PixelUnshuffleConfig,
    Unfold4dConfig,
};
use burn::tensor::Tensor;

use super::Runner;

pub fn cases() -> Vec<(&'static str, Runner)> {
    vec![
        // -- convolutions
        ("conv1d/default", |c| c.fed(Conv1dConfig::new(3, 4, 3).init(&c.device), |l, x: Tensor<3>| l.forward(x))),
        ("conv1d/stride2-pad1-dil2", |c| {
            let l = Conv1dConfig::new(3, 4, 3)
                .with_stride(2)
                .with_padding(PaddingConfig1d::Explicit(1, 1))
                .with_dilation(2);
            c.fed(l.init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("conv1d/same-even-kernel", |c| {
            let l = Conv1dConfig::new(3, 4, 4).with_padding(PaddingConfig1d::Same);
            c.fed(l.init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("conv1d/same-dilation2", |c| {
            let l = Conv1dConfig::new(3, 4, 3).with_padding(PaddingConfig1d::Same).with_dilation(2);
            c.fed(l.init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("conv2d/same-dilation2", |c| {
            let l = Conv2dConfig::new([2, 3], [3, 3]).with_padding(PaddingConfig2d::Same).with_dilation([2, 2]);
            c.fed(l.init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("conv1d/groups2-no-bias", |c| {
            let l = Conv1dConfig::new(4, 6, 3).with_groups(2).with_bias(false);
            c.fed(l.init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("conv2d/default", |c| {
            c.fed(Conv2dConfig::new([2, 3], [3, 3]).init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("conv2d/stride2-pad1", |c| {
            let l = Conv2dConfig::new([2, 4], [3, 3])
                .with_stride([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1));
            c.fed(l.init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("conv2d/rect-stride-pad-dil", |c| {
            let l = Conv2dConfig::new([2, 3], [2, 3])
                .with_stride([1, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 0, 1, 0))
                .with_dilation([2, 1]);
            c.fed(l.init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("conv2d/same-rect-kernel", |c| {
            let l = Conv2dConfig::new([2, 3], [3, 4]).with_padding(PaddingConfig2d::Same);
            c.fed(l.init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("conv2d/depthwise-no-bias", |c| {
            let l = Conv2dConfig::new([4, 4], [3, 3]).with_groups(4).with_bias(false);
            c.fed(l.init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        // burn's Conv2d has no padding mode: a port that keeps padding 1 pads with zeros.
        ("conv2d/padding-reflect", |c| {
            let l = Conv2dConfig::new([2, 3], [3, 3]).with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1));
            c.fed(l.init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("conv3d/default", |c| {
            c.fed(Conv3dConfig::new([2, 2], [3, 3, 3]).init(&c.device), |l, x: Tensor<5>| l.forward(x))
        }),
        ("conv3d/stride-pad-dil", |c| {
            let l = Conv3dConfig::new([2, 3], [3, 2, 3])
                .with_stride([1, 2, 1])
                .with_padding(PaddingConfig3d::Explicit(1, 0, 1))
                .with_dilation([1, 1, 2]);
            c.fed(l.init(&c.device), |l, x: Tensor<5>| l.forward(x))
        }),
        ("conv3d/same-groups2-no-bias", |c| {
            let l = Conv3dConfig::new([2, 4], [3, 3, 3])
                .with_padding(PaddingConfig3d::Same)
                .with_groups(2)
                .with_bias(false);
            c.fed(l.init(&c.device), |l, x: Tensor<5>| l.forward(x))
        }),
        // -- transposed convolutions
        ("conv_transpose1d/default", |c| {
            c.fed(ConvTranspose1dConfig::new([3, 2], 3).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("conv_transpose1d/stride2-pad1-outpad1", |c| {
            let l = ConvTranspose1dConfig::new([3, 2], 3).with_stride(2).with_padding(1).with_padding_out(1);
            c.fed(l.init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("conv_transpose1d/groups2-dil2-no-bias", |c| {
            let l = ConvTranspose1dConfig::new([4, 6], 3).with_groups(2).with_dilation(2).with_bias(false);
            c.fed(l.init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("conv_transpose2d/default", |c| {
            c.fed(ConvTranspose2dConfig::new([2, 3], [3, 3]).init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("conv_transpose2d/stride2-pad1-outpad1", |c| {
            let l = ConvTranspose2dConfig::new([2, 2], [3, 3])
                .with_stride([2, 2])
                .with_padding([1, 1])
                .with_padding_out([1, 1]);
            c.fed(l.init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("conv_transpose2d/rect-groups2-dil", |c| {
            let l = ConvTranspose2dConfig::new([4, 2], [2, 3])
                .with_stride([2, 1])
                .with_padding([0, 1])
                .with_dilation([1, 2])
                .with_groups(2);
            c.fed(l.init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("conv_transpose3d/default", |c| {
            c.fed(ConvTranspose3dConfig::new([2, 2], [2, 2, 2]).init(&c.device), |l, x: Tensor<5>| l.forward(x))
        }),
        ("conv_transpose3d/stride2-outpad1-groups2", |c| {
            let l = ConvTranspose3dConfig::new([2, 4], [3, 3, 3])
                .with_stride([2, 2, 2])
                .with_padding([1, 1, 1])
                .with_padding_out([1, 1, 1])
                .with_groups(2);
            c.fed(l.init(&c.device), |l, x: Tensor<5>| l.forward(x))
        }),
        // -- pooling
        ("max_pool1d/default", |c| c.fed(MaxPool1dConfig::new(3).init(), |l, x: Tensor<3>| l.forward(x))),
        ("max_pool1d/stride1-pad1-dil2", |c| {
            let l = MaxPool1dConfig::new(3)
                .with_stride(1)
                .with_padding(PaddingConfig1d::Explicit(1, 1))
                .with_dilation(2);
            c.fed(l.init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("max_pool1d/ceil-mode", |c| {
            let l = MaxPool1dConfig::new(3).with_stride(2).with_ceil_mode(true);
            c.fed(l.init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("max_pool1d/ceil-mode-last-window-in-pad", |c| {
            let l = MaxPool1dConfig::new(2)
                .with_stride(3)
                .with_padding(PaddingConfig1d::Explicit(1, 1))
                .with_ceil_mode(true);
            c.fed(l.init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("max_pool2d/default", |c| c.fed(MaxPool2dConfig::new([2, 2]).init(), |l, x: Tensor<4>| l.forward(x))),
        ("max_pool2d/stride-pad-dil", |c| {
            let l = MaxPool2dConfig::new([3, 2])
                .with_strides([2, 1])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_dilation([1, 2]);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("max_pool2d/ceil-mode-pad1", |c| {
            let l = MaxPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_ceil_mode(true);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("avg_pool1d/default", |c| c.fed(AvgPool1dConfig::new(3).init(), |l, x: Tensor<3>| l.forward(x))),
        ("avg_pool1d/pad1-count-pad", |c| {
            let l = AvgPool1dConfig::new(3).with_stride(2).with_padding(PaddingConfig1d::Explicit(1, 1));
            c.fed(l.init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("avg_pool1d/pad1-exclude-pad", |c| {
            let l = AvgPool1dConfig::new(3)
                .with_stride(2)
                .with_padding(PaddingConfig1d::Explicit(1, 1))
                .with_count_include_pad(false);
            c.fed(l.init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("avg_pool1d/ceil-mode-pad1", |c| {
            let l = AvgPool1dConfig::new(3)
                .with_stride(2)
                .with_padding(PaddingConfig1d::Explicit(1, 1))
                .with_ceil_mode(true);
            c.fed(l.init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("avg_pool1d/ceil-mode-last-window-in-pad", |c| {
            let l = AvgPool1dConfig::new(2)
                .with_stride(3)
                .with_padding(PaddingConfig1d::Explicit(1, 1))
                .with_ceil_mode(true);
            c.fed(l.init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("avg_pool2d/default", |c| c.fed(AvgPool2dConfig::new([2, 2]).init(), |l, x: Tensor<4>| l.forward(x))),
        ("avg_pool2d/pad1-count-pad", |c| {
            let l = AvgPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1));
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("avg_pool2d/pad1-exclude-pad", |c| {
            let l = AvgPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_count_include_pad(false);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("avg_pool2d/ceil-mode-pad1", |c| {
            let l = AvgPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_ceil_mode(true);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("avg_pool2d/ceil-mode-exclude-pad", |c| {
            let l = AvgPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_ceil_mode(true)
                .with_count_include_pad(false);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("adaptive_avg_pool1d/divides", |c| {
            c.fed(AdaptiveAvgPool1dConfig::new(4).init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("adaptive_avg_pool1d/not-divides", |c| {
            c.fed(AdaptiveAvgPool1dConfig::new(3).init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("adaptive_avg_pool1d/upsample", |c| {
            c.fed(AdaptiveAvgPool1dConfig::new(5).init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("adaptive_avg_pool2d/divides", |c| {
            c.fed(AdaptiveAvgPool2dConfig::new([3, 2]).init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("adaptive_avg_pool2d/not-divides", |c| {
            c.fed(AdaptiveAvgPool2dConfig::new([3, 4]).init(), |l, x: Tensor<4>| l.forward(x))
        }),
        // -- interpolation: burn's defaults are mode Nearest, align_corners true
        ("interpolate1d/nearest", |c| {
            c.fed(Interpolate1dConfig::new().with_output_size(Some(7)).init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("interpolate1d/linear-default", |c| {
            let l = Interpolate1dConfig::new().with_output_size(Some(7)).with_mode(InterpolateMode::Linear);
            c.fed(l.init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("interpolate1d/linear-align-corners", |c| {
            let l = Interpolate1dConfig::new()
                .with_output_size(Some(7))
                .with_mode(InterpolateMode::Linear)
                .with_align_corners(true);
            c.fed(l.init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("interpolate1d/linear-half-pixel", |c| {
            let l = Interpolate1dConfig::new()
                .with_output_size(Some(7))
                .with_mode(InterpolateMode::Linear)
                .with_align_corners(false);
            c.fed(l.init(), |l, x: Tensor<3>| l.forward(x))
        }),
        ("interpolate2d/nearest", |c| {
            c.fed(Interpolate2dConfig::new().with_output_size(Some([7, 9])).init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("interpolate2d/nearest-down", |c| {
            c.fed(Interpolate2dConfig::new().with_output_size(Some([3, 2])).init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("interpolate2d/nearest-scale2", |c| {
            let l = Interpolate2dConfig::new().with_scale_factor(Some([2.0, 2.0]));
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("interpolate2d/nearest-scale1p7", |c| {
            let l = Interpolate2dConfig::new().with_scale_factor(Some([1.7, 1.7]));
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("interpolate2d/nearest-exact", |c| {
            let l = Interpolate2dConfig::new().with_output_size(Some([7, 9])).with_mode(InterpolateMode::NearestExact);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("interpolate2d/bilinear-default", |c| {
            let l = Interpolate2dConfig::new().with_output_size(Some([7, 9])).with_mode(InterpolateMode::Linear);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("interpolate2d/bilinear-align-corners", |c| {
            let l = Interpolate2dConfig::new()
                .with_output_size(Some([7, 9]))
                .with_mode(InterpolateMode::Linear)
                .with_align_corners(true);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("interpolate2d/bilinear-half-pixel", |c| {
            let l = Interpolate2dConfig::new()
                .with_output_size(Some([7, 9]))
                .with_mode(InterpolateMode::Linear)
                .with_align_corners(false);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("interpolate2d/bilinear-down", |c| {
            let l = Interpolate2dConfig::new()
                .with_output_size(Some([3, 4]))
                .with_mode(InterpolateMode::Linear)
                .with_align_corners(false);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("interpolate2d/bilinear-scale1p5", |c| {
            let l = Interpolate2dConfig::new()
                .with_scale_factor(Some([1.5, 1.5]))
                .with_mode(InterpolateMode::Linear)
                .with_align_corners(false);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        // burn has no antialias: a port resamples as without it.
        ("interpolate2d/bilinear-antialias", |c| {
            let l = Interpolate2dConfig::new()
                .with_output_size(Some([3, 4]))
                .with_mode(InterpolateMode::Linear)
                .with_align_corners(false);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("interpolate2d/bicubic-default", |c| {
            let l = Interpolate2dConfig::new().with_output_size(Some([7, 9])).with_mode(InterpolateMode::Cubic);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("interpolate2d/bicubic-align-corners", |c| {
            let l = Interpolate2dConfig::new()
                .with_output_size(Some([7, 9]))
                .with_mode(InterpolateMode::Cubic)
                .with_align_corners(true);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("interpolate2d/bicubic-half-pixel", |c| {
            let l = Interpolate2dConfig::new()
                .with_output_size(Some([7, 9]))
                .with_mode(InterpolateMode::Cubic)
                .with_align_corners(false);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("interpolate2d/bicubic-down", |c| {
            let l = Interpolate2dConfig::new()
                .with_output_size(Some([3, 4]))
                .with_mode(InterpolateMode::Cubic)
                .with_align_corners(false);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        // -- pixel shuffle, unfold, fold
        ("pixel_shuffle/factor2", |c| c.fed(PixelShuffleConfig::new(2).init(), |l, x: Tensor<4>| l.forward(x))),
        ("pixel_shuffle/factor3", |c| c.fed(PixelShuffleConfig::new(3).init(), |l, x: Tensor<4>| l.forward(x))),
        ("pixel_unshuffle/factor2", |c| {
            c.fed(PixelUnshuffleConfig::new(2).init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("unfold/default", |c| c.fed(Unfold4dConfig::new([2, 2]).init(), |l, x: Tensor<4>| l.forward(x))),
        ("unfold/stride-pad-dil", |c| {
            let l = Unfold4dConfig::new([2, 3]).with_dilation([1, 2]).with_padding([1, 1]).with_stride([2, 1]);
            c.fed(l.init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("fold/default", |c| c.fed(Fold4dConfig::new([4, 5], [2, 2]).init(), |l, x: Tensor<3>| l.forward(x))),
        ("fold/stride-pad-dil", |c| {
            let l = Fold4dConfig::new([5, 6], [2, 3]).with_dilation([1, 2]).with_padding([1, 1]).with_stride([2, 1]);
            c.fed(l.init(), |l, x: Tensor<3>| l.forward(x))
        }),
    ]
}
