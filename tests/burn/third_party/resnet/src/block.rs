//! Residual blocks: torchvision's `BasicBlock` (two 3x3 convs) and `Bottleneck` (1x1, 3x3, 1x1,
//! the stride on the 3x3: "ResNet v1.5"), each with an optional projection of the shortcut.

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, PaddingConfig2d, Relu};
use burn::tensor::{Device, Tensor};

/// The epsilon of every BatchNorm of the network.
#[cfg(not(feature = "bug-bn-eps"))]
pub const BN_EPS: f64 = 1e-5;
#[cfg(feature = "bug-bn-eps")]
pub const BN_EPS: f64 = 1e-3;

pub(crate) fn batch_norm(channels: usize, device: &Device) -> BatchNorm {
    BatchNormConfig::new(channels)
        .with_epsilon(BN_EPS)
        .init(device)
}

pub(crate) fn conv(
    in_channels: usize,
    out_channels: usize,
    kernel: usize,
    stride: usize,
    device: &Device,
) -> Conv2d {
    let pad = kernel / 2;
    Conv2dConfig::new([in_channels, out_channels], [kernel, kernel])
        .with_stride([stride, stride])
        .with_padding(PaddingConfig2d::Explicit(pad, pad, pad, pad))
        .with_bias(false)
        .init(device)
}

/// One block of a stage.
#[derive(Module, Debug)]
#[allow(clippy::large_enum_variant)]
pub enum ResidualBlock {
    Basic(BasicBlock),
    Bottleneck(Bottleneck),
}

impl ResidualBlock {
    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        match self {
            Self::Basic(block) => block.forward(x),
            Self::Bottleneck(block) => block.forward(x),
        }
    }
}

/// The shortcut's projection when a block changes the resolution or the width: a strided 1x1
/// conv and a BatchNorm (torchvision's `downsample` Sequential).
#[derive(Module, Debug)]
pub struct Downsample {
    pub conv: Conv2d,
    pub bn: BatchNorm,
}

impl Downsample {
    pub fn new(in_channels: usize, out_channels: usize, stride: usize, device: &Device) -> Self {
        // burn's Conv2dConfig strides 1 unless told
        #[cfg(feature = "bug-downsample-stride")]
        let stride = {
            let _ = stride;
            1
        };
        Self {
            conv: Conv2dConfig::new([in_channels, out_channels], [1, 1])
                .with_stride([stride, stride])
                .with_bias(false)
                .init(device),
            bn: batch_norm(out_channels, device),
        }
    }

    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        self.bn.forward(self.conv.forward(x))
    }
}

/// Two 3x3 convs, each followed by a BatchNorm, the first by a ReLU; the shortcut added, then a ReLU.
#[derive(Module, Debug)]
pub struct BasicBlock {
    pub conv1: Conv2d,
    pub bn1: BatchNorm,
    pub relu: Relu,
    pub conv2: Conv2d,
    pub bn2: BatchNorm,
    pub downsample: Option<Downsample>,
}

impl BasicBlock {
    pub const EXPANSION: usize = 1;

    pub fn new(in_channels: usize, channels: usize, stride: usize, device: &Device) -> Self {
        let downsample = (stride != 1 || in_channels != channels)
            .then(|| Downsample::new(in_channels, channels, stride, device));
        Self {
            conv1: conv(in_channels, channels, 3, stride, device),
            bn1: batch_norm(channels, device),
            relu: Relu::new(),
            conv2: conv(channels, channels, 3, 1, device),
            bn2: batch_norm(channels, device),
            downsample,
        }
    }

    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let identity = match &self.downsample {
            Some(downsample) => downsample.forward(x.clone()),
            None => x.clone(),
        };
        let out = self.relu.forward(self.bn1.forward(self.conv1.forward(x)));
        let out = self.bn2.forward(self.conv2.forward(out));
        let out = out + identity;
        #[cfg(not(feature = "bug-no-relu-after-add"))]
        let out = self.relu.forward(out);
        out
    }
}

/// 1x1 (reduce), 3x3 (strided), 1x1 (expand, 4x), each followed by a BatchNorm; ReLUs between
/// them and after the shortcut's add.
#[derive(Module, Debug)]
pub struct Bottleneck {
    pub conv1: Conv2d,
    pub bn1: BatchNorm,
    pub conv2: Conv2d,
    pub bn2: BatchNorm,
    pub conv3: Conv2d,
    pub bn3: BatchNorm,
    pub relu: Relu,
    pub downsample: Option<Downsample>,
}

impl Bottleneck {
    pub const EXPANSION: usize = 4;

    pub fn new(in_channels: usize, channels: usize, stride: usize, device: &Device) -> Self {
        let out_channels = channels * Self::EXPANSION;
        let downsample = (stride != 1 || in_channels != out_channels)
            .then(|| Downsample::new(in_channels, out_channels, stride, device));
        Self {
            conv1: conv(in_channels, channels, 1, 1, device),
            bn1: batch_norm(channels, device),
            conv2: conv(channels, channels, 3, stride, device),
            bn2: batch_norm(channels, device),
            conv3: conv(channels, out_channels, 1, 1, device),
            bn3: batch_norm(out_channels, device),
            relu: Relu::new(),
            downsample,
        }
    }

    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        let identity = match &self.downsample {
            Some(downsample) => downsample.forward(x.clone()),
            None => x.clone(),
        };
        let out = self.relu.forward(self.bn1.forward(self.conv1.forward(x)));
        let out = self.relu.forward(self.bn2.forward(self.conv2.forward(out)));
        let out = self.bn3.forward(self.conv3.forward(out));
        self.relu.forward(out + identity)
    }
}

/// One of the four stages (torchvision's `layer1` ... `layer4`): its blocks in order, the first
/// one strided.
#[derive(Module, Debug)]
pub struct Stage {
    pub blocks: Vec<ResidualBlock>,
}

impl Stage {
    /// `count` blocks of `channels` (their output is `channels * expansion` wide), fed
    /// `in_channels`, the first with `stride`.
    pub fn new(
        in_channels: usize,
        channels: usize,
        count: usize,
        stride: usize,
        bottleneck: bool,
        device: &Device,
    ) -> Self {
        let expansion = if bottleneck {
            Bottleneck::EXPANSION
        } else {
            BasicBlock::EXPANSION
        };
        let blocks = (0..count)
            .map(|i| {
                let (fed, stride) = if i == 0 {
                    (in_channels, stride)
                } else {
                    (channels * expansion, 1)
                };
                if bottleneck {
                    ResidualBlock::Bottleneck(Bottleneck::new(fed, channels, stride, device))
                } else {
                    ResidualBlock::Basic(BasicBlock::new(fed, channels, stride, device))
                }
            })
            .collect();
        Self { blocks }
    }

    pub fn forward(&self, x: Tensor<4>) -> Tensor<4> {
        self.blocks.iter().fold(x, |x, block| block.forward(x))
    }
}
