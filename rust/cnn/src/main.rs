//! The burn port of `burnside.examples.cnn`: Conv2d -> BatchNorm2d -> ReLU -> MaxPool2d ->
//! Linear, Adam (lr 0.01), written the way rust/README.md tells a user to port a model.
//!
//! ```text
//! cnn --init INIT -o OUT [--steps N] [--bug bn-eps|bn-momentum|first-batch]
//! ```
//!
//! Each step trains on its own batch from the init file (`InitFile::float_input_at`), which is
//! the one batch of every step when the PyTorch side fed one, and step k's when it fed a batch
//! per step.
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
use burn::optim::GradientsParams;
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Tap, TraceError, TraceRecorder};

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
    let mut model = init.load_module(Cnn::new(&device, bug.as_deref())?)?;
    // `--bug first-batch` reads step 0's batch for every step, as a port written for one batch does.
    let step_of = |step: usize| {
        if bug.as_deref() == Some("first-batch") {
            0
        } else {
            step
        }
    };
    let ce = CrossEntropyLossConfig::new().init(&device);
    let spec = OptimizerSpec::adam(LR);
    let mut optim = spec.init();
    let mut recorder = TraceRecorder::new(spec.clone());
    let mut losses = Vec::with_capacity(args.steps);

    burnside_trace::step_done(0, args.steps);
    for step in 0..args.steps {
        let x = init.float_input_at::<4>(step_of(step), "x", &device)?;
        let y = init.int_input_at::<1>(step_of(step), "y", &device)?;
        recorder.input(step, "x", x.to_data())?;
        recorder.input(step, "y", y.to_data())?;
        recorder.params_before(step, &model)?;
        let logits = model.forward(x, recorder.tap(step))?;
        recorder.logits(step, &logits)?;
        let loss = ce.forward(logits, y);
        recorder.loss(step, &loss)?;
        losses.push(loss.clone().into_scalar::<f32>());
        let grads = GradientsParams::from_grads(loss.backward(), &model);
        recorder.grads(step, &model, &grads)?;
        model = optim.step(spec.lr(), model, grads);
        recorder.params_after(step, &model)?;
        recorder.optim(step, &model, &optim)?;
        burnside_trace::step_done(step + 1, args.steps);
    }
    // PyTorch's loss after training is that of the last step's batch
    let last = step_of(args.steps - 1);
    let (x, y) = (
        init.float_input_at::<4>(last, "x", &device)?,
        init.int_input_at::<1>(last, "y", &device)?,
    );
    let loss_after = ce.forward(model.forward(x, Tap::off())?, y);
    recorder.loss_after(args.steps - 1, &loss_after)?;
    recorder.write(&args.out)?;

    let loss_after: f32 = loss_after.into_scalar();
    println!("losses {losses:?}  loss_after {loss_after}");
    println!(
        "JSON: {}",
        serde_json::json!({"trace": args.out, "losses": losses, "loss_after": loss_after})
    );
    Ok(())
}
