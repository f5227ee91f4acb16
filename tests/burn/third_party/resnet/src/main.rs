//! The burnside port of the crate's ResNet: the checkpoint loaded by the crate's own loader,
//! the forward passes of the batches PyTorch ran recorded by burnside-trace.
//!
//! ```text
//! resnet-port --init INIT -o OUT [--batches N] --checkpoint model.pt
//! ```

use burn::tensor::Device;
use burnside_trace::{Inference, InitFile, PortArgs, UsageError};
use resnet_burn::{ResNet, weights};

/// The model torchvision's `ResNet(BasicBlock, [1, 1, 1, 1], num_classes=10)` is.
const CLASSES: usize = 10;

fn main() {
    burnside_trace::run_port("resnet-port", |mut args: PortArgs| {
        let checkpoint = args.value("--checkpoint")?.ok_or_else(|| {
            UsageError("missing --checkpoint PATH (torchvision's state_dict)".into())
        })?;
        args.finish()?;
        #[cfg(not(feature = "bug-bn-autodiff"))]
        let device = Device::default();
        #[cfg(feature = "bug-bn-autodiff")]
        let device = Device::default().autodiff();
        let init = InitFile::read(&args.init)?;
        let model =
            weights::load_torchvision(ResNet::resnet10(CLASSES, &device), &checkpoint, &device)?;
        Inference::new().run(&args, &init, &device, &model, |model, batch| {
            Ok(model.forward(batch.float_input::<4>("x")?))
        })?;
        Ok(())
    });
}
