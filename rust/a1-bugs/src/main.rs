//! Realistic porting bugs built into A1's burn loop and recorded as burnside traces, so
//! `burnside compare` can be seen naming each one from what burn actually computed.
//!
//! ```text
//! bugs --bug NAME -o burn.safetensors [--steps N] [--optim OPTIM]
//! ```
//!
//! `OPTIM` is one of `a1::OPTIMIZERS`.
//!
//! Every program but `epsilon`, `rmsprop-defaults`, `adagrad-eps`, `muon-decay`,
//! `adafactor-absolute` and `lbfgs-max-iter` records the optimizer the port *meant* to build
//! (`OptimizerSpec`), which is what such a port's trace claims; the bug is what it actually does
//! (those record the burn config they build, as a port declaring its burn config would):
//!
//! - `discard`: `optim.step(lr, model.clone(), grads);` — the update is dropped (S8, S12);
//!   with Adam the optimizer's moments and step count still advance (S13).
//! - `othergrads`: `GradientsParams::from_grads(loss.backward(), &other)` with a re-initialised
//!   `other` (same values, new ParamIds): `len() == 0`, nothing is updated (S6, S14).
//! - `epsilon`: Adam from `AdamConfig::new()`, burn's default epsilon 1e-5 instead of
//!   PyTorch's 1e-8 (this trace's metadata says so).
//! - `rmsprop-defaults`: RMSprop from `RmsPropConfig::new()`: burn's momentum 0.9 and epsilon 1e-5
//!   where `torch.optim.RMSprop(params, lr)` has momentum 0 and eps 1e-8.
//! - `adagrad-eps`: Adagrad from `AdaGradConfig::new()`: burn's epsilon 1e-5, PyTorch's 1e-10.
//! - `muon-decay`: Muon from `MuonConfig::new()` (A1's lr adjustment set): burn's default has no
//!   weight decay, `torch.optim.Muon`'s is 0.1.
//! - `adafactor-absolute`: Adafactor with `relative_step` and `scale_parameter` off, the absolute
//!   learning rate burn's docs offer for an external schedule: not what `torch.optim.Adafactor` computes.
//! - `lbfgs-max-iter`: L-BFGS from `LBFGSConfig::new()`: 20 iterations a step where A1's PyTorch
//!   loop has 5.
//! - `skipstep`: the step is skipped on odd steps (`if step % 2 == 1 { continue }` before it).
//! - `literallr`: `optim.step(0.01, ...)`: a literal a tenth of the declared learning rate.
//! - `betas`: `AdamConfig::new().with_beta_2(0.99)`: the same optimizer, other numbers.
//! - `weightdecay`: `with_weight_decay(Some(WeightDecayConfig::new(0.01)))` the trace omits.
//! - `dampening`: `MomentumConfig::new().with_momentum(0.9)`: burn's dampening 0.1, not 0.
//! - `clip`: `with_gradient_clipping(Some(GradientClippingConfig::Value(0.05)))`.
//! - `double`: two updates per batch (the step helper called twice, each with fresh gradients).
//! - `sum`: the loss summed over the batch instead of averaged.
//! - `gelu`: GELU where the PyTorch model has ReLU.
//! - `nobias`: the forward uses the weights only (`x.matmul(w)`), the biases never get a gradient.
//! - `f32inputs`: inputs and biases computed in f32 (`0.1 * k as f32 - 0.5`, S3).
//! - `init`: `fc2` from `LinearConfig::new(8, 3).init(&device)`: burn's random init, not the seed's.
//!
//! The last line is `JSON: {...}` with the losses.

use std::error::Error;
use std::path::PathBuf;

use a1::{Arithmetic, Mlp, a1_data_with, a1_model_with, ce};
use burn::nn::LinearConfig;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::grad_clipping::GradientClippingConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{
    AdaGradConfig, AdamConfig, GradientsParams, ModuleOptimizer, RmsPropConfig, SgdConfig,
};
use burn::tensor::activation::{gelu, relu};
use burn::tensor::{Device, Tensor};
use burnside_trace::{OptimizerSpec, TraceRecorder};

const BUGS: &[&str] = &[
    "discard",
    "othergrads",
    "epsilon",
    "rmsprop-defaults",
    "adagrad-eps",
    "muon-decay",
    "adafactor-absolute",
    "lbfgs-max-iter",
    "skipstep",
    "literallr",
    "betas",
    "weightdecay",
    "dampening",
    "clip",
    "double",
    "sum",
    "gelu",
    "nobias",
    "f32inputs",
    "init",
];

struct Options {
    bug: &'static str,
    out: PathBuf,
    steps: usize,
    optim: String,
}

fn parse(mut args: impl Iterator<Item = String>) -> Result<Options, String> {
    let (mut bug, mut out, mut steps, mut optim) = (None, None, 1, "sgd".to_string());
    while let Some(arg) = args.next() {
        let mut value = || args.next().ok_or_else(|| format!("{arg} needs a value"));
        match arg.as_str() {
            "--bug" => {
                let name = value()?;
                bug =
                    Some(*BUGS.iter().find(|b| **b == name).ok_or_else(|| {
                        format!("--bug {name}: expected one of {}", BUGS.join(", "))
                    })?)
            }
            "-o" | "--out" => out = Some(PathBuf::from(value()?)),
            "--steps" => steps = value()?.parse().map_err(|e| format!("--steps: {e}"))?,
            "--optim" => optim = value()?,
            other => return Err(format!("unknown argument {other}")),
        }
    }
    let bug = bug.ok_or_else(|| format!("missing --bug {}", BUGS.join("|")))?;
    if steps == 0 {
        return Err("--steps must be at least 1".to_string());
    }
    // The bugs that live in one optimizer's configuration bring that optimizer.
    match bug {
        "epsilon" | "betas" => optim = "adam".to_string(),
        "rmsprop-defaults" => optim = "rmsprop".to_string(),
        "adagrad-eps" => optim = "adagrad".to_string(),
        "muon-decay" => optim = "muon".to_string(),
        "adafactor-absolute" => optim = "adafactor".to_string(),
        "lbfgs-max-iter" => optim = "lbfgs".to_string(),
        "dampening" => optim = "momentum".to_string(),
        "weightdecay" | "clip" if optim != "momentum" => optim = "sgd".to_string(),
        _ => {}
    }
    Ok(Options {
        bug,
        out: out.ok_or("missing -o FILE")?,
        steps,
        optim,
    })
}

fn default_adam_spec() -> Result<OptimizerSpec, Box<dyn Error>> {
    let fields = serde_json::to_value(AdamConfig::new())?;
    let field = |name: &str| {
        fields[name]
            .as_f64()
            .map(|v| v as f32)
            .ok_or(format!("AdamConfig has no {name}"))
    };
    Ok(OptimizerSpec::Adam {
        lr: a1::ADAM_LR,
        betas: (field("beta_1")?, field("beta_2")?),
        eps: field("epsilon")?,
        weight_decay: 0.0,
        amsgrad: false,
    })
}

/// A field of a burn optimizer config's defaults, read from the config itself (`serde`).
fn default_field(config: &serde_json::Value, name: &str) -> Result<f64, Box<dyn Error>> {
    Ok(config[name]
        .as_f64()
        .ok_or(format!("the burn config has no {name}"))?)
}

/// What a port built with `RmsPropConfig::new()` declares: burn's defaults at A1's learning rate.
fn default_rmsprop_spec() -> Result<OptimizerSpec, Box<dyn Error>> {
    let fields = serde_json::to_value(RmsPropConfig::new())?;
    Ok(OptimizerSpec::rmsprop(a1::RMSPROP_LR)
        .with_alpha(default_field(&fields, "alpha")? as f32)
        .with_momentum(default_field(&fields, "momentum")? as f32 as f64)
        .with_eps(default_field(&fields, "epsilon")? as f32)
        .with_centered(fields["centered"].as_bool().unwrap_or(false)))
}

/// What a port built with `AdaGradConfig::new()` declares: burn's defaults at A1's learning rate.
fn default_adagrad_spec() -> Result<OptimizerSpec, Box<dyn Error>> {
    let fields = serde_json::to_value(AdaGradConfig::new())?;
    Ok(OptimizerSpec::adagrad(a1::ADAGRAD_LR)
        .with_lr_decay(default_field(&fields, "lr_decay")?)
        .with_eps(default_field(&fields, "epsilon")? as f32))
}

/// The optimizer the buggy program actually builds.
fn built(bug: &str, spec: &OptimizerSpec) -> ModuleOptimizer {
    let momentum_09 = || MomentumConfig::new().with_momentum(0.9).with_dampening(0.0);
    // the SGD bugs keep the declared optimizer's momentum, if it has one
    let momentum = matches!(
        spec,
        OptimizerSpec::Sgd {
            momentum: Some(_),
            ..
        }
    );
    match bug {
        "epsilon" => AdamConfig::new().init(), // burn's default epsilon 1e-5
        "rmsprop-defaults" => RmsPropConfig::new().init(), // momentum 0.9, epsilon 1e-5
        "adagrad-eps" => AdaGradConfig::new().init(), // epsilon 1e-5
        "betas" => AdamConfig::new()
            .with_epsilon(1e-8)
            .with_beta_2(0.99)
            .init(),
        "dampening" => SgdConfig::new()
            .with_momentum(Some(MomentumConfig::new().with_momentum(0.9))) // dampening 0.1
            .init(),
        "weightdecay" => SgdConfig::new()
            .with_momentum(momentum.then(momentum_09))
            .with_weight_decay(Some(WeightDecayConfig::new(0.01)))
            .init(),
        "clip" => SgdConfig::new()
            .with_momentum(momentum.then(momentum_09))
            .with_gradient_clipping(Some(GradientClippingConfig::Value(0.05)))
            .init(),
        _ => spec.init(),
    }
}

/// The model as the buggy port runs it.
struct Port<'a> {
    bug: &'a str,
    model: &'a Mlp,
}

impl Port<'_> {
    /// The logits as the buggy forward computes them.
    fn forward(&self, x: Tensor<2>) -> Tensor<2> {
        let model = self.model;
        match self.bug {
            "gelu" => model.fc2.forward(gelu(model.fc1.forward(x))),
            "nobias" => relu(x.matmul(model.fc1.weight.val())).matmul(model.fc2.weight.val()),
            _ => model.forward(x),
        }
    }
}

fn main() {
    if let Err(error) = run() {
        eprintln!("bugs: {error}");
        std::process::exit(1);
    }
}

fn run() -> Result<(), Box<dyn Error>> {
    let options = parse(std::env::args().skip(1))?;
    let bug = options.bug;
    let device = Device::default().autodiff();
    let arithmetic = if bug == "f32inputs" {
        Arithmetic::F32
    } else {
        Arithmetic::F64RoundedOnce
    };
    let (x, y) = a1_data_with(&device, arithmetic);
    let mut model = a1_model_with(&device, arithmetic);
    if bug == "init" {
        model.fc2 = LinearConfig::new(8, 3).init(&device);
    }
    let other = a1_model_with(&device, arithmetic); // same values, new ParamIds (for `othergrads`)
    let ce = ce(&device);
    let spec = match bug {
        "epsilon" => default_adam_spec()?,
        "rmsprop-defaults" => default_rmsprop_spec()?,
        "adagrad-eps" => default_adagrad_spec()?,
        // what `MuonConfig::new()` (A1's lr adjustment set) declares: no weight decay
        "muon-decay" => a1::optimizer_named("muon")?.with_weight_decay(0.0),
        "adafactor-absolute" => a1::optimizer_named("adafactor")?.with_relative_step(false, false),
        // `LBFGSConfig::new()`: burn's (and PyTorch's) default 20 iterations, not A1's 5
        "lbfgs-max-iter" => a1::optimizer_named("lbfgs")?.with_lbfgs(20, None, 100, false),
        _ => a1::optimizer_named(&options.optim)?,
    };
    let muon = matches!(spec, OptimizerSpec::Muon { .. });
    if muon {
        // torch.optim.Muon holds the two weights only: A1 freezes the biases on both sides
        for bias in [&mut model.fc1.bias, &mut model.fc2.bias] {
            *bias = bias.take().map(|b| b.set_require_grad(false));
        }
    }
    let mut lbfgs = spec.init_lbfgs();
    // L-BFGS steps with a closure; `optim` is then a plain SGD whose empty state says the step was taken
    let mut optim = match lbfgs {
        Some(_) => OptimizerSpec::sgd(0.0).init(),
        None => built(bug, &spec),
    };
    let lr = spec.lr();
    let mut recorder = TraceRecorder::new(spec).with_loss_fn("cross_entropy");
    let mut losses = Vec::with_capacity(options.steps);
    // `sum`: the mean times the batch size; everything else the mean (times 1.0, exactly)
    let reduction = if bug == "sum" {
        x.dims()[0] as f64
    } else {
        1.0
    };
    let loss_of = |model: &Mlp| {
        ce.forward(Port { bug, model }.forward(x.clone()), y.clone())
            .mul_scalar(reduction)
    };

    burnside_trace::step_done(0, options.steps);
    for step in 0..options.steps {
        recorder.input(step, "x", x.to_data())?;
        recorder.input(step, "y", y.to_data())?;
        recorder.params_before(step, &model)?;
        let logits = Port { bug, model: &model }.forward(x.clone());
        recorder.logits(step, &logits)?;
        let loss = ce.forward(logits, y.clone()).mul_scalar(reduction); // x * 1.0 is exact
        recorder.loss(step, &loss)?;
        losses.push(loss.clone().into_scalar::<f32>());
        let grads = if bug == "othergrads" {
            GradientsParams::from_grads(loss.backward(), &other) // the bug
        } else {
            GradientsParams::from_grads(loss.backward(), &model)
        };
        recorder.grads(step, &model, &grads)?;
        match bug {
            "discard" => {
                optim.step(lr, model.clone(), grads); // the bug: the updated model is dropped
            }
            "skipstep" if step % 2 == 1 => {}
            "literallr" => model = optim.step(lr / 10.0, model, grads),
            _ if lbfgs.is_some() => {
                let closure = |m: Mlp| {
                    let loss = loss_of(&m);
                    let value = f64::from(loss.clone().into_scalar::<f32>());
                    (value, GradientsParams::from_grads(loss.backward(), &m))
                };
                model = lbfgs
                    .as_mut()
                    .expect("an L-BFGS")
                    .step(lr, model, closure)
                    .0;
            }
            "double" => {
                // the step helper called twice per batch: a second update from fresh gradients
                model = optim.step(lr, model, grads);
                let again = GradientsParams::from_grads(loss_of(&model).backward(), &model);
                model = optim.step(lr, model, again);
            }
            _ => model = optim.step(lr, model, grads),
        }
        recorder.params_after(step, &model)?;
        recorder.optim(step, &model, &optim)?;
        burnside_trace::step_done(step + 1, options.steps);
    }
    let loss_after = loss_of(&model);
    recorder.loss_after(options.steps - 1, &loss_after)?;
    recorder.write(&options.out)?;
    let loss_after: f32 = loss_after.into_scalar();
    println!("losses {losses:?}  loss_after {loss_after}");
    println!(
        "JSON: {}",
        serde_json::json!({"trace": options.out, "losses": losses, "loss_after": loss_after})
    );
    Ok(())
}
