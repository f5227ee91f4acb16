//! The burn port of `burnside.examples.classifier`, for inference: Conv2d -> BatchNorm2d -> ReLU ->
//! Conv2d (stride 2) -> BatchNorm2d -> ReLU -> AdaptiveAvgPool2d -> Dropout -> Linear, loaded from
//! the PyTorch checkpoint (`torch.save(model.state_dict())`) with burn-store's `PytorchStore`, as
//! production code loads it, and run on a device without autodiff.
//!
//! ```text
//! classifier --init INIT -o OUT --checkpoint PATH [--batches N]
//!            [--bug bn-train|stride|padding|no-running-stats|dropout-on]
//!            [--no-record | --tap-free | --taps-only]
//! ```
//!
//! The init file gives only the batches; the weights come from the checkpoint, so what burn-store
//! loaded is itself part of what the trace shows (`step0.params_before.*`, `step0.buffers.*`).
//!
//! Each `--bug` is a slip a hand port makes, that fails nothing and computes something else:
//! - `bn-train`: the forward passes run on the autodiff device the model was trained on, where
//!   burn's BatchNorm normalizes with each batch's own statistics (PyTorch's `model.train()`), not
//!   the pretrained running ones, and Dropout drops.
//! - `stride`: the second conv's `stride=2` not ported (burn's default is 1).
//! - `padding`: the first conv's `padding=1` not ported (burn's default is no padding).
//! - `no-running-stats`: the checkpoint loaded through a filter that keeps only the learned
//!   parameters (`weight`, `bias`, and BatchNorm's `gamma`/`beta` as burn names them), written to
//!   leave out `num_batches_tracked`, which burn does not keep: it leaves out the running
//!   statistics as well, which stay burn's fresh 0 and 1, and nothing fails.
//! - `dropout-on`: the autodiff device with every BatchNorm frozen (`Module::freeze`, as when
//!   finetuning the head), so Dropout is the only layer in training mode: it drops at inference.
//!
//! What recording costs is measured by `benchmarks/capture_cost.py` with three switches: `--no-record`
//! runs the same forward passes and writes nothing (each output read to the host); `--tap-free` runs the
//! forward with its taps off (`Tap::off()`), so graph capture alone records the layers; `--taps-only`
//! records with `Inference::with_taps_only()` (the eager forward, the taps only). Without any, the forward
//! is tapped and captured, as `burnside run classifier` records it.

use std::error::Error;

use burn::module::Module;
use burn::nn::conv::{Conv2d, Conv2dConfig};
use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
use burn::nn::{
    BatchNorm, BatchNormConfig, Dropout, DropoutConfig, Linear, LinearConfig, PaddingConfig2d,
};
use burn::store::{ModuleSnapshot, PytorchStore};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use burnside_trace::{Inference, InitFile, PortArgs, Step, Tap, TraceError, UsageError, step_done};

const BUGS: [&str; 5] = [
    "bn-train",
    "stride",
    "padding",
    "no-running-stats",
    "dropout-on",
];

#[derive(Module, Debug)]
struct Classifier {
    conv1: Conv2d,
    bn1: BatchNorm,
    conv2: Conv2d,
    bn2: BatchNorm,
    pool: AdaptiveAvgPool2d,
    dropout: Dropout,
    fc: Linear,
}

impl Classifier {
    fn new(device: &Device, bug: Option<&str>) -> Self {
        let padding1 = if bug == Some("padding") { 0 } else { 1 };
        let stride2 = if bug == Some("stride") { 1 } else { 2 };
        Self {
            conv1: Conv2dConfig::new([3, 16], [3, 3])
                .with_padding(PaddingConfig2d::Explicit(
                    padding1, padding1, padding1, padding1,
                ))
                .init(device),
            bn1: BatchNormConfig::new(16).init(device),
            conv2: Conv2dConfig::new([16, 32], [3, 3])
                .with_stride([stride2, stride2])
                .with_padding(PaddingConfig2d::Explicit(1, 1, 1, 1))
                .init(device),
            bn2: BatchNormConfig::new(32).init(device),
            pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
            dropout: DropoutConfig::new(0.1).init(),
            fc: LinearConfig::new(32, 10).init(device),
        }
    }

    /// `[batch, 3, 16, 16]` images in, `[batch, 10]` logits out; each layer's output tapped under
    /// its PyTorch module path.
    fn forward(&self, x: Tensor<4>, mut tap: Tap) -> Result<Tensor<2>, TraceError> {
        let x = self.conv1.forward(x);
        tap.activation("conv1", &x)?;
        let x = self.bn1.forward(x);
        tap.activation("bn1", &x)?;
        let x = relu(x);
        tap.activation("relu1", &x)?;
        let x = self.conv2.forward(x);
        tap.activation("conv2", &x)?;
        let x = self.bn2.forward(x);
        tap.activation("bn2", &x)?;
        let x = relu(x);
        tap.activation("relu2", &x)?;
        let x = self.pool.forward(x);
        tap.activation("pool", &x)?;
        let x = self.dropout.forward(x.flatten(1, 3));
        tap.activation("dropout", &x)?;
        let x = self.fc.forward(x);
        tap.activation("fc", &x)?;
        Ok(x)
    }
}

/// `model` with the PyTorch checkpoint at `path` loaded by burn-store (`PytorchStore` applies
/// burn-store's PyTorch adapter: Linear weights transposed, BatchNorm's `weight`/`bias` as
/// `gamma`/`beta`, `running_mean`/`running_var` into burn's running state). A tensor the module
/// has and the file lacks fails; `num_batches_tracked`, which burn does not keep, is left unused
/// (burn-store does not fail on a tensor of the file nothing uses).
fn load_checkpoint(
    mut model: Classifier,
    path: &str,
    bug: Option<&str>,
) -> Result<Classifier, Box<dyn Error>> {
    let mut store = PytorchStore::from_file(path);
    if bug == Some("no-running-stats") {
        // the bug: a filter meant to leave out `num_batches_tracked` also leaves out the
        // running statistics; filtered tensors are skipped, not missing, so nothing fails
        store = store.with_regex(r"\.(weight|bias|gamma|beta)$");
    }
    // `allow_partial` to list what is missing in one line here, rather than burn-store's table
    let result = model
        .load_from(&mut store.allow_partial(true))
        .map_err(|e| one_line(format!("{path}: cannot load the checkpoint: {e}")))?;
    if !result.missing.is_empty() {
        let missing: Vec<&str> = result.missing.iter().map(|(p, _)| p.as_str()).collect();
        let shown = missing
            .iter()
            .take(4)
            .copied()
            .collect::<Vec<_>>()
            .join(", ");
        let more = missing.len().saturating_sub(4);
        return Err(format!(
            "{path}: not this model's checkpoint: {} of the model's tensors are not in it ({shown}{})",
            missing.len(),
            if more > 0 { format!(" and {more} more") } else { String::new() }
        )
        .into());
    }
    Ok(model)
}

/// A message as one line, for the last line of stderr that `burnside check` reports.
fn one_line(message: String) -> String {
    message.split_whitespace().collect::<Vec<_>>().join(" ")
}

fn main() {
    burnside_trace::run_port("classifier", run);
}

fn run(mut args: PortArgs) -> Result<(), Box<dyn Error>> {
    let bug = args.value("--bug")?;
    let checkpoint = args.value("--checkpoint")?.ok_or_else(|| {
        UsageError(
            "missing --checkpoint PATH (the PyTorch state_dict saved with torch.save)".into(),
        )
    })?;
    let no_record = args.flag("--no-record");
    let tap_free = args.flag("--tap-free");
    let taps_only = args.flag("--taps-only");
    args.finish()?;
    if [no_record, tap_free, taps_only]
        .iter()
        .filter(|on| **on)
        .count()
        > 1
    {
        return Err(UsageError(
            "--no-record, --tap-free and --taps-only exclude each other".into(),
        )
        .into());
    }
    if let Some(other) = bug.as_deref().filter(|b| !BUGS.contains(b)) {
        return Err(UsageError(format!("--bug {other}: expected {}", BUGS.join(", "))).into());
    }
    let bug = bug.as_deref();
    let device = match bug {
        // the bugs: the autodiff device a training loop uses, where layers run in training mode
        Some("bn-train" | "dropout-on") => Device::default().autodiff(),
        _ => Device::default(),
    };
    let init = InitFile::read(&args.init)?;
    let mut model = load_checkpoint(Classifier::new(&device, bug), &checkpoint, bug)?;
    if bug == Some("dropout-on") {
        model.bn1 = model.bn1.freeze();
        model.bn2 = model.bn2.freeze();
    }
    if no_record {
        // the same passes, nothing written; each batch told as `Inference` tells it (`step_done`)
        step_done(0, args.steps);
        for k in 0..args.steps {
            let mut batch = Step::unrecorded(k, &init, &device);
            let x = batch.float_input::<4>("x")?;
            let logits = model.forward(x, Tap::off())?;
            let _ = logits.into_data(); // the values computed and on the host, as recording has them
            step_done(k + 1, args.steps);
        }
        return Ok(());
    }
    let inference = if taps_only {
        Inference::new().with_taps_only()
    } else {
        Inference::new()
    };
    inference.run(&args, &init, &device, &model, |model, batch| {
        let x = batch.float_input::<4>("x")?;
        let tap = if tap_free { Tap::off() } else { batch.tap() };
        Ok(model.forward(x, tap)?)
    })?;
    Ok(())
}
