//! The burn port of `model.py`, checked by `burnside check` (see README.md).
//!
//! Replace `Model` with your model: the same layers as the PyTorch module, with fields named as
//! its attributes (burnside loads PyTorch's tensors by those names), and `forward` recording each
//! layer's output with `tap.activation("<PyTorch module path>", &x)`.

use burn::module::Module;
use burn::nn::loss::CrossEntropyLossConfig;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::activation::relu;
use burn::tensor::{Device, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Tap, TraceError, Training};

#[derive(Module, Debug)]
struct Model {
    fc1: Linear,
    fc2: Linear,
}

impl Model {
    fn new(device: &Device) -> Self {
        Self {
            fc1: LinearConfig::new(4, 8).init(device),
            fc2: LinearConfig::new(8, 3).init(device),
        }
    }

    fn forward(&self, x: Tensor<2>, mut tap: Tap) -> Result<Tensor<2>, TraceError> {
        let x = self.fc1.forward(x);
        tap.activation("fc1", &x)?;
        let x = relu(x);
        tap.activation("act", &x)?;
        let x = self.fc2.forward(x);
        tap.activation("fc2", &x)?;
        Ok(x)
    }
}

fn main() {
    burnside_trace::run_port("{crate}", |args: PortArgs| {
        // Options of your own (given after `--` to `burnside check`): take `|mut args: PortArgs|`
        // and read them with `args.value("--bug")?` or `args.flag("--fast")` before this line.
        args.finish()?;
        let device = Device::default().autodiff();
        let init = InitFile::read(&args.init)?; // PyTorch's starting weights and every step's batch
        let model = init.load_module(Model::new(&device))?;
        let ce = CrossEntropyLossConfig::new().init(&device);
        // As record.py's torch.optim.Adam(model.parameters(), lr=1e-2); the optimizer's other
        // settings are PyTorch's defaults. Parameter groups: .with_group(spec, &["fc1.bias"]);
        // clip_grad_norm_: .with_clip_grad_norm(max_norm); a scheduler: .with_lr_schedule(|step| lr).
        // The loss, by the name of record.py's loss_fn, which must equal its Python __name__:
        // nn.functional.cross_entropy is "cross_entropy" (a loss module: its class name).
        let training = Training::new(OptimizerSpec::adam(1e-2)).with_loss_fn("cross_entropy");
        training.run(&args, &init, &device, model, |model, step| {
            let x = step.float_input::<2>("x")?; // the batch PyTorch fed at this step
            let y = step.int_input::<1>("y")?;
            let logits = model.forward(x, step.tap())?;
            let loss = ce.forward(logits.clone(), y);
            Ok((logits, loss))
        })?;
        Ok(())
    });
}
