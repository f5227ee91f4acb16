//! The burn port of `model.py` for inference, checked by `burnside check` (see README.md).
//!
//! Replace `Model` with your model (or use your own crate's): its forward pass needs nothing from
//! burnside. `Inference` records every layer's output by capturing the forward pass as burn runs
//! it, and the comparison names each after the PyTorch module it stands for.

use burn::module::Module;
use burn::nn::{BatchNorm, BatchNormConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::store::{ModuleSnapshot, PytorchStore};
use burn::tensor::activation::gelu;
use burn::tensor::{Device, Tensor};
use burnside_trace::{Inference, InitFile, PortArgs, UsageError};

#[derive(Module, Debug)]
struct Model {
    fc1: Linear,
    bn: BatchNorm,
    norm: LayerNorm,
    head: Linear,
}

impl Model {
    fn new(device: &Device) -> Self {
        Self {
            fc1: LinearConfig::new(6, 16).init(device),
            bn: BatchNormConfig::new(16).init(device),
            norm: LayerNormConfig::new(16).init(device),
            head: LinearConfig::new(16, 4).init(device),
        }
    }

    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let x = self.bn.forward(self.fc1.forward(x));
        let x = self.norm.forward(gelu(x));
        self.head.forward(x)
    }
}

fn main() {
    burnside_trace::run_port("{crate}", |mut args: PortArgs| {
        let checkpoint = args
            .value("--checkpoint")?
            .ok_or_else(|| UsageError("missing --checkpoint PATH (the .pt the model loads)".into()))?;
        args.finish()?;
        // Inference: a device without autodiff, so BatchNorm uses its running statistics and
        // dropout is off, as PyTorch's model.eval() does.
        let device = Device::default();
        let init = InitFile::read(&args.init)?; // the batches PyTorch ran
        // Loaded as production loads it: burn-store reads the PyTorch checkpoint (Linear weights
        // transposed, names matched); burnside then compares what was loaded with PyTorch's, bit for bit.
        // A model with nn.GRU, nn.LSTM or nn.MultiheadAttention (PyTorch packs their gates or q/k/v in
        // one tensor): `burnside_trace::load_pytorch_checkpoint(Model::new(&device), &checkpoint)?`.
        let mut model = Model::new(&device);
        model
            .load_from(&mut PytorchStore::from_file(&checkpoint))
            .map_err(|e| format!("{checkpoint}: {e}"))?;
        Inference::new().run(&args, &init, &device, &model, |model, batch| {
            let x = batch.float_input::<2>("x")?; // the batch PyTorch ran, bit for bit
            Ok(model.forward(x)) // every layer recorded: no tap needed
        })?;
        Ok(())
    });
}
