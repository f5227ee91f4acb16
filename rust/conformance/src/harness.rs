//! What every case shares: the harness module that feeds a layer from a parameter, the probe loss,
//! and one `Training` run as a port would write it.

use std::error::Error;

use burn::module::{Module, ModuleDisplay, Param};
use burn::tensor::{Device, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Step, TraceError, Training};


pub type Res<T> = Result<T, Box<dyn Error>>;

/// The learning rate of a module case's one SGD step (PyTorch's side: `torch.optim.SGD(lr=0.1)`).
pub const MODULE_LR: f64 = 0.1;

/// A layer fed from the parameter `x` (PyTorch's harness: `self.x = nn.Parameter(...)`,
/// `self.layer = ...`), so the gradient of the layer's input is recorded as `grads.x`.
#[derive(Module, Debug)]
pub struct Fed<L, const D: usize> {
    pub x: Param<Tensor<D>>,
    pub layer: L,
}

/// The layer of a case that has none: a function of its input (an activation, interpolation).
#[derive(Module, Debug)]
pub struct Function;

/// A loss case's model: its input `x` (logits, predictions) is the only parameter.
#[derive(Module, Debug)]
pub struct Input<const D: usize> {
    pub x: Param<Tensor<D>>,
}

/// The case's device, init file and run arguments.
pub struct Case<'a> {
    pub args: &'a PortArgs,
    pub init: InitFile,
    pub device: Device,
}

impl<'a> Case<'a> {
    pub fn open(args: &'a PortArgs) -> Res<Self> {
        Ok(Self { args, init: InitFile::read(&args.init)?, device: Device::default().autodiff() })
    }

    /// A parameter of the init file's shape (zeros: `load_module` gives it PyTorch's values).
    pub fn param<const D: usize>(&self, name: &str) -> Res<Param<Tensor<D>>> {
        let host = self.init.param(name).ok_or_else(|| {
            TraceError::Setup(format!("the init file has no parameter {name}"))
        })?;
        let shape: [usize; D] = host.shape.clone().try_into().map_err(|_| {
            TraceError::Setup(format!("parameter {name} has shape {:?}, expected {D} dimensions", host.shape))
        })?;
        Ok(Param::from_tensor(Tensor::zeros(shape, &self.device)))
    }

    /// Train `model` `args.steps` steps with `spec`, `step(model, step)` giving output and loss.
    /// `loss` names the loss as the PyTorch side's metadata does.
    pub fn train<M: Module, const D: usize>(
        &self,
        spec: OptimizerSpec,
        loss: &str,
        model: M,
        step: impl FnMut(&M, &mut Step<'_>) -> Res<(Tensor<D>, Tensor<1>)>,
    ) -> Res<()> {
        let model = self.init.load_module(model)?;
        Training::new(spec).with_loss_fn(loss).run(self.args, &self.init, &self.device, model, step)?;
        Ok(())
    }

    /// A module case: `layer` fed from `x`, its output `forward(layer, x)` dotted with the probe,
    /// one SGD step.
    pub fn fed<L: Module + ModuleDisplay, const DI: usize, const DO: usize>(
        &self,
        layer: L,
        forward: impl Fn(&L, Tensor<DI>) -> Tensor<DO>,
    ) -> Res<()> {
        let model = Fed { x: self.param::<DI>("x")?, layer };
        self.train(OptimizerSpec::sgd(MODULE_LR), "probe_sum", model, |m: &Fed<L, DI>, step| {
            let y = forward(&m.layer, m.x.val());
            step.tap().activation("layer", &y)?; // as a port taps its layers
            let loss = probe_sum(&y, step)?;
            Ok((y, loss))
        })
    }
}

impl Case<'_> {
    /// A loss case: `loss(x, step)` of the input `x` (logits, predictions), named `name` as the PyTorch
    /// side's metadata names it, one SGD step.
    pub fn loss<const D: usize>(
        &self,
        name: &str,
        loss: impl Fn(Tensor<D>, &mut Step<'_>) -> Res<Tensor<1>>,
    ) -> Res<()> {
        let model = Input { x: self.param::<D>("x")? };
        self.train(OptimizerSpec::sgd(MODULE_LR), name, model, |m: &Input<D>, step| {
            let x = m.x.val();
            let value = loss(x.clone(), step)?;
            Ok((x, value))
        })
    }
}

/// `sum(y * probe)`, the probe read from the step's batch (PyTorch's harness: the same).
pub fn probe_sum<const D: usize>(y: &Tensor<D>, step: &mut Step<'_>) -> Res<Tensor<1>> {
    let probe = step.float_input::<D>("probe")?;
    Ok((y.clone() * probe).sum())
}
