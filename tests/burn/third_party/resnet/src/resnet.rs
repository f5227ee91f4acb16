//! The network: stem, four stages, pooling, classifier.

use burn::module::Module;
use burn::nn::conv::Conv2d;
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig, MaxPool2d, MaxPool2dConfig};
use burn::nn::{BatchNorm, Linear, LinearConfig, PaddingConfig2d, Relu};
use burn::tensor::{Device, Tensor};

use crate::block::{BasicBlock, Bottleneck, Stage, batch_norm, conv};

#[derive(Module, Debug)]
pub struct ResNet {
    pub conv1: Conv2d,
    pub bn1: BatchNorm,
    pub relu: Relu,
    pub maxpool: MaxPool2d,
    pub layer1: Stage,
    pub layer2: Stage,
    pub layer3: Stage,
    pub layer4: Stage,
    pub avgpool: AdaptiveAvgPool2d,
    pub fc: Linear,
}

impl ResNet {
    /// A ResNet with `blocks` blocks per stage, basic or bottleneck, and `num_classes` outputs.
    pub fn new(blocks: [usize; 4], bottleneck: bool, num_classes: usize, device: &Device) -> Self {
        let expansion = if bottleneck {
            Bottleneck::EXPANSION
        } else {
            BasicBlock::EXPANSION
        };
        let pool_padding = if cfg!(feature = "bug-pool-padding") {
            0
        } else {
            1
        };
        let mut channels = 64;
        let mut stage = |width: usize, count: usize, stride: usize| {
            let stage = Stage::new(channels, width, count, stride, bottleneck, device);
            channels = width * expansion;
            stage
        };
        let layer1 = stage(64, blocks[0], 1);
        let layer2 = stage(128, blocks[1], 2);
        let layer3 = stage(256, blocks[2], 2);
        let layer4 = stage(512, blocks[3], 2);
        Self {
            conv1: conv(3, 64, 7, 2, device),
            bn1: batch_norm(64, device),
            relu: Relu::new(),
            maxpool: MaxPool2dConfig::new([3, 3])
                .with_strides([2, 2])
                .with_padding(PaddingConfig2d::Explicit(
                    pool_padding,
                    pool_padding,
                    pool_padding,
                    pool_padding,
                ))
                .init(),
            layer1,
            layer2,
            layer3,
            layer4,
            avgpool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            fc: LinearConfig::new(512 * expansion, num_classes).init(device),
        }
    }

    pub fn resnet10(num_classes: usize, device: &Device) -> Self {
        Self::new([1, 1, 1, 1], false, num_classes, device)
    }

    pub fn resnet18(num_classes: usize, device: &Device) -> Self {
        Self::new([2, 2, 2, 2], false, num_classes, device)
    }

    pub fn resnet34(num_classes: usize, device: &Device) -> Self {
        Self::new([3, 4, 6, 3], false, num_classes, device)
    }

    pub fn resnet50(num_classes: usize, device: &Device) -> Self {
        Self::new([3, 4, 6, 3], true, num_classes, device)
    }

    /// Images `[batch, 3, height, width]` to logits `[batch, num_classes]`.
    pub fn forward(&self, x: Tensor<4>) -> Tensor<2> {
        let x = self.relu.forward(self.bn1.forward(self.conv1.forward(x)));
        let x = self.maxpool.forward(x);
        let x = self.layer1.forward(x);
        let x = self.layer2.forward(x);
        let x = self.layer3.forward(x);
        let x = self.layer4.forward(x);
        let x = self.avgpool.forward(x).flatten(1, 3);
        self.fc.forward(x)
    }
}
