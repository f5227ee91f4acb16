//! The burn port of `burnside.examples.encoder`, for inference: Conv1d over mel bands ->
//! BatchNorm1d -> GELU -> GRU over time -> the last time step -> LayerNorm -> Linear, loaded from
//! the PyTorch checkpoint (`torch.save(model.state_dict())`) through burn-store, as production code
//! loads it, and run on a device without autodiff.
//!
//! ```text
//! encoder --init INIT -o OUT --checkpoint PATH [--batches N]
//!         [--bug ln-eps|gelu-tanh|gates|transposed|time-axis]
//! ```
//!
//! The init file gives only the batches; the weights come from the checkpoint, so what was loaded
//! is itself part of what the trace shows (`step0.params_before.*`, `step0.buffers.*`).
//!
//! Each `--bug` is a slip a hand port makes, that fails nothing and computes something else:
//! - `ln-eps`: LayerNorm's epsilon 1e-6 (a value common in other code bases; PyTorch's is 1e-5).
//! - `gelu-tanh`: GELU's tanh approximation where PyTorch's `nn.GELU()` is exact (erf).
//! - `gates`: the GRU's packed tensors cut in Keras's gate order (update, reset, new) where
//!   PyTorch packs reset, update, new: the reset and update gates trade places.
//! - `transposed`: the head's weight copied from the checkpoint by hand, its values in file order
//!   into burn's `[in, out]` weight (a reshape, where PyTorch's `[out, in]` needs a transpose).
//! - `time-axis`: the GRU fed `[time, batch, channels]`, as if burn's `Gru` were sequence-first
//!   like PyTorch's default (this one is `batch_first=True`, and burn's `Gru` is batch-first):
//!   it runs over the batch as if it were time.

use std::error::Error;

use burn::module::{Module, Param};
use burn::nn::conv::{Conv1d, Conv1dConfig};
use burn::nn::{
    BatchNorm, BatchNormConfig, Gelu, Gru, GruConfig, LayerNorm, LayerNormConfig, Linear,
    LinearConfig, PaddingConfig1d,
};
use burn::store::{ModuleStore, PytorchStore, bridge};
use burn::tensor::{Device, Tensor};
use burnside_trace::{Inference, InitFile, PortArgs, Tap, TraceError, UsageError};

const BUGS: [&str; 5] = ["ln-eps", "gelu-tanh", "gates", "transposed", "time-axis"];
const N_MELS: usize = 8;
const CHANNELS: usize = 32;
const CLASSES: usize = 5;

#[derive(Module, Debug)]
struct Encoder {
    conv: Conv1d,
    bn: BatchNorm,
    gelu: Gelu,
    gru: Gru,
    ln: LayerNorm,
    head: Linear,
}

impl Encoder {
    fn new(device: &Device, bug: Option<&str>) -> Self {
        let mut ln = LayerNormConfig::new(CHANNELS);
        if bug == Some("ln-eps") {
            ln = ln.with_epsilon(1e-6);
        }
        Self {
            conv: Conv1dConfig::new(N_MELS, CHANNELS, 3)
                .with_padding(PaddingConfig1d::Explicit(1, 1))
                .init(device),
            bn: BatchNormConfig::new(CHANNELS).init(device),
            gelu: if bug == Some("gelu-tanh") {
                Gelu::new_approximate()
            } else {
                Gelu::new()
            },
            // PyTorch's nn.GRU: both biases, the reset gate applied after the hidden product
            gru: GruConfig::new(CHANNELS, CHANNELS, true)
                .with_reset_after(true)
                .init(device),
            ln: ln.init(device),
            head: LinearConfig::new(CHANNELS, CLASSES).init(device),
        }
    }

    /// `[batch, mel bands, time]` in, `[batch, classes]` logits out; each layer's output tapped
    /// under its PyTorch module path.
    fn forward(
        &self,
        x: Tensor<3>,
        mut tap: Tap,
        bug: Option<&str>,
    ) -> Result<Tensor<2>, TraceError> {
        let x = self.conv.forward(x);
        tap.activation("conv", &x)?;
        let x = self.bn.forward(x);
        tap.activation("bn", &x)?;
        let x = self.gelu.forward(x);
        tap.activation("gelu", &x)?;
        let x = x.swap_dims(1, 2); // [batch, time, channels]
        let x = if bug == Some("time-axis") {
            // the bug: swapped to sequence-first and back, around a batch-first GRU
            self.gru.forward(x.swap_dims(0, 1), None).swap_dims(0, 1)
        } else {
            self.gru.forward(x, None)
        };
        tap.activation("gru", &x)?;
        let [batch, time, channels] = x.dims();
        let x = x
            .slice([0..batch, time - 1..time, 0..channels])
            .squeeze_dim::<2>(1);
        let x = self.ln.forward(x);
        tap.activation("ln", &x)?;
        let x = self.head.forward(x);
        tap.activation("head", &x)?;
        Ok(x)
    }
}

/// `model` with the PyTorch checkpoint at `path` loaded: read by burn-store's `PytorchStore` and
/// loaded by `burnside_trace::load_pytorch_checkpoint`, which adds to burn-store's PyTorch rules
/// (Linear weights transposed, norms' `weight`/`bias` as `gamma`/`beta`, running statistics) the
/// cutting of the GRU's packed `weight_ih_l0` / `weight_hh_l0` / `bias_ih_l0` / `bias_hh_l0`
/// (reset, update, new) into burn's per-gate `Linear`s, which burn-store alone does not load.
/// A tensor the module has and the file lacks, or one of the file's tensors nothing uses, fails.
fn load_checkpoint(
    model: Encoder,
    path: &str,
    bug: Option<&str>,
    device: &Device,
) -> Result<Encoder, Box<dyn Error>> {
    let mut model = burnside_trace::load_pytorch_checkpoint(model, path)?;
    if bug == Some("gates") {
        // the bug: the first slice taken as the update gate, the second as the reset gate
        std::mem::swap(&mut model.gru.reset_gate, &mut model.gru.update_gate);
    }
    if bug == Some("transposed") {
        // the bug: the head's `[out, in]` values read in file order into burn's `[in, out]`
        let mut store = PytorchStore::from_file(path);
        let weight = checkpoint_tensor::<2>(&mut store, "head.weight", device)?;
        model.head.weight = Param::from_tensor(weight.reshape([CHANNELS, CLASSES]));
    }
    Ok(model)
}

/// The checkpoint's tensor `name`, as a float tensor of rank `D` on `device`.
fn checkpoint_tensor<const D: usize>(
    store: &mut PytorchStore,
    name: &str,
    device: &Device,
) -> Result<Tensor<D>, Box<dyn Error>> {
    let tensor = store
        .get_tensor(name)?
        .ok_or_else(|| format!("no tensor {name}"))?;
    if tensor.shape.len() != D {
        return Err(format!("{name} has shape {:?}, expected rank {D}", tensor.shape).into());
    }
    let data = bridge::to_data(tensor).map_err(|e| format!("{name}: {e}"))?;
    Ok(Tensor::from_data(data, device))
}

fn main() {
    burnside_trace::run_port("encoder", run);
}

fn run(mut args: PortArgs) -> Result<(), Box<dyn Error>> {
    let bug = args.value("--bug")?;
    let checkpoint = args.value("--checkpoint")?.ok_or_else(|| {
        UsageError(
            "missing --checkpoint PATH (the PyTorch state_dict saved with torch.save)".into(),
        )
    })?;
    args.finish()?;
    if let Some(other) = bug.as_deref().filter(|b| !BUGS.contains(b)) {
        return Err(UsageError(format!("--bug {other}: expected {}", BUGS.join(", "))).into());
    }
    let bug = bug.as_deref();
    let device = Device::default();
    let init = InitFile::read(&args.init)?;
    let model = load_checkpoint(Encoder::new(&device, bug), &checkpoint, bug, &device)?;
    Inference::new().run(&args, &init, &device, &model, |model, batch| {
        let x = batch.float_input::<3>("x")?;
        Ok(model.forward(x, batch.tap(), bug)?)
    })?;
    Ok(())
}
