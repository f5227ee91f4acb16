//! The burn port of `burnside.examples.cnn`: Conv2d -> BatchNorm2d -> ReLU -> MaxPool2d ->
//! Linear, Adam (lr 0.01), written the way rust/README.md tells a user to port a model.
//!
//! ```text
//! cnn --init INIT -o OUT [--steps N] [--bug bn-eps|bn-momentum|first-batch]
//! ```
//!
//! Each step trains on its own batch from the init file (`step.float_input`), which is the one
//! batch of every step when the PyTorch side fed one, and step k's when it fed a batch per step.
//!
//! `--bug` builds one layer wrong on purpose, to show the comparison naming that layer:
//! `bn-eps` gives BatchNorm an epsilon of 1e-3 (PyTorch's is 1e-5), `bn-momentum` a running-
//! statistics momentum of 0.9 (TensorFlow's convention for PyTorch's 0.1). `first-batch` reads
//! step 0's batch once and trains every step on it, the port a data loader's loop needs not to be.

use std::error::Error;

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::pool::{MaxPool2d, MaxPool2dConfig};
use burn::nn::{BatchNorm, BatchNormConfig, Linear, LinearConfig, PaddingConfig2d};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Tap, TraceError, Training};

const LR: f64 = 0.01;

#[derive(Module, Debug)]
struct Cnn {
    conv: Conv2d,
    bn: BatchNorm,
    pool: MaxPool2d,
    fc: Linear,
}

impl Cnn {
    fn new(device: &Device, bug: Option<&str>) -> Result<Self, String> {
        let mut bn = BatchNormConfig::new(4);
        match bug {
            None => {}
            Some("bn-eps") => bn = bn.with_epsilon(1e-3),
            Some("bn-momentum") => bn = bn.with_momentum(0.9),
            Some("first-batch") => {}
            Some(other) => {
                return Err(format!(
                    "--bug {other}: expected bn-eps, bn-momentum or first-batch"
                ));
            }
        }
        Ok(Self {
            // No bias before a training-mode BatchNorm, as in the PyTorch model: it cancels.
            conv: Conv2dConfig::new([2, 4], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .with_bias(false)
                .init(device),
            bn: bn.init(device),
            pool: MaxPool2dConfig::new([2, 2]).init(),
            fc: LinearConfig::new(64, 3).init(device),
        })
    }

    fn forward(&self, x: Tensor<4>, mut tap: Tap) -> Result<Tensor<2>, TraceError> {
        let x = self.conv.forward(x);
        tap.activation("conv", &x)?;
        let x = self.bn.forward(x);
        tap.activation("bn", &x)?;
        let x = relu(x);
        tap.activation("relu", &x)?;
        let x = self.pool.forward(x);
        tap.activation("pool", &x)?;
        let x = self.fc.forward(x.flatten(1, 3));
        tap.activation("fc", &x)?;
        Ok(x)
    }
}

fn main() {
    burnside_trace::run_port("cnn", run);
}

fn run(mut args: PortArgs) -> Result<(), Box<dyn Error>> {
    let bug = args.value("--bug")?;
    args.finish()?;
    let device = Device::default().autodiff();
    let init = InitFile::read(&args.init)?;
    let model = init.load_module(Cnn::new(&device, bug.as_deref())?)?;
    let first_batch = bug.as_deref() == Some("first-batch");
    let ce = CrossEntropyLossConfig::new().init(&device);
    let training = Training::new(OptimizerSpec::adam(LR)).with_loss_fn("cross_entropy");
    training.run(&args, &init, &device, model, |model, step| {
        let (x, y) = if first_batch {
            // the bug: step 0's batch for every step, as a port written for one batch reads it
            let x = init.float_input_at::<4>(0, "x", &device)?;
            let y = init.int_input_at::<1>(0, "y", &device)?;
            step.record_input("x", x.to_data())?;
            step.record_input("y", y.to_data())?;
            (x, y)
        } else {
            (step.float_input::<4>("x")?, step.int_input::<1>("y")?)
        };
        let logits = model.forward(x, step.tap())?;
        let loss = ce.forward(logits.clone(), y);
        Ok((logits, loss))
    })?;
    Ok(())
}
