//! ResNet in burn, laid out as torchvision's `torchvision.models.resnet`: a stem (7x7 conv, BatchNorm,
//! ReLU, 3x3 max pool), four stages of residual blocks (basic or bottleneck), global average pooling
//! and a linear classifier.
//!
//! ```no_run
//! use burn::tensor::{Device, Tensor};
//! use resnet_burn::{ResNet, weights};
//!
//! let device = Device::default();
//! let model = weights::load_torchvision(ResNet::resnet18(1000, &device), "resnet18.pt", &device)?;
//! let logits = model.forward(Tensor::zeros([1, 3, 224, 224], &device));
//! # Ok::<(), weights::LoadError>(())
//! ```

pub mod block;
pub mod resnet;
pub mod weights;

pub use block::{BasicBlock, Bottleneck, Downsample, ResidualBlock, Stage};
pub use resnet::ResNet;
