"""The PyTorch model the crate ports: torchvision's own ResNet with basic blocks, one per stage (a ResNet-10),
and 10 classes. Nothing here is written for the port: it is `torchvision.models.resnet` as installed.
"""

from __future__ import annotations

from torchvision.models.resnet import BasicBlock, ResNet


def build() -> ResNet:
    return ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10)
