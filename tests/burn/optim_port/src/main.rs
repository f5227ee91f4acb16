//! A two-layer MLP port trained call by call with an optimizer given on the command line, to test what
//! burnside's optimizer forensics measure from the numbers.
//!
//! ```text
//! optim_port --init INIT -o OUT --steps N --optim SPEC [--build SPEC]
//!            [--group SPEC@name+name... [--build-group SPEC]]
//! ```
//!
//! SPEC is `sgd|adam|adamw[:key=value,...]` with PyTorch's keyword settings (`lr`, `momentum`,
//! `dampening`, `nesterov`, `weight_decay`, `beta_1`, `beta_2`, `eps`, `amsgrad`), built with
//! `OptimizerSpec`'s PyTorch defaults. `--optim` is what the trace declares; `--build` (default: the
//! same) is the burn optimizer the port actually steps with, so a port whose trace says one thing while
//! it builds another (the slip the forensics exist for) is one argument away. `--group` declares a
//! second parameter group (PyTorch names joined by `+`), stepped by its own optimizer on its part of
//! the gradients, `--build-group` what that group actually builds.

use burn::module::{Module, ParamId};
use burn::nn::{Linear, LinearConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::GradientsParams;
use burn::tensor::activation::relu;
use burn::tensor::{Device, Int, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Tap, TraceError, TraceRecorder, UsageError};

#[derive(Module, Debug)]
struct Mlp {
    fc1: Linear,
    fc2: Linear,
}

impl Mlp {
    fn new(device: &Device) -> Self {
        Self {
            fc1: LinearConfig::new(4, 8).init(device),
            fc2: LinearConfig::new(8, 3).init(device),
        }
    }

    fn forward(&self, x: Tensor<2>, mut tap: Tap<'_>) -> Result<Tensor<2>, TraceError> {
        let h = self.fc1.forward(x);
        tap.activation("fc1", &h)?;
        let y = self.fc2.forward(relu(h));
        tap.activation("fc2", &y)?;
        Ok(y)
    }

    /// The `ParamId` of each parameter by its PyTorch name.
    fn id(&self, name: &str) -> Result<ParamId, UsageError> {
        Ok(match name {
            "fc1.weight" => self.fc1.weight.id,
            "fc1.bias" => self.fc1.bias.as_ref().expect("fc1 has a bias").id,
            "fc2.weight" => self.fc2.weight.id,
            "fc2.bias" => self.fc2.bias.as_ref().expect("fc2 has a bias").id,
            other => return Err(UsageError(format!("--group: no parameter {other}"))),
        })
    }
}

/// `NAME[:key=value,...]` as an `OptimizerSpec` with PyTorch's defaults.
fn spec(text: &str) -> Result<OptimizerSpec, UsageError> {
    let (name, settings) = text.split_once(':').unwrap_or((text, ""));
    let mut spec = match name {
        "sgd" => OptimizerSpec::sgd(0.1),
        "adam" => OptimizerSpec::adam(0.01),
        "adamw" => OptimizerSpec::adamw(0.01),
        other => return Err(UsageError(format!("optimizer {other}: expected sgd, adam or adamw"))),
    };
    let (mut beta_1, mut beta_2) = (0.9f32, 0.999f32);
    for item in settings.split(',').filter(|item| !item.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| UsageError(format!("{text}: `{item}` is not key=value")))?;
        let number = || value.parse::<f64>().map_err(|e| UsageError(format!("{text}: {key}: {e}")));
        let flag = || value.parse::<bool>().map_err(|e| UsageError(format!("{text}: {key}: {e}")));
        spec = match key {
            "lr" => spec.with_lr(number()?),
            "momentum" => spec.with_momentum(number()?),
            "dampening" => spec.with_dampening(number()?),
            "nesterov" => spec.with_nesterov(flag()?),
            "weight_decay" => spec.with_weight_decay(number()? as f32),
            "eps" => spec.with_eps(number()? as f32),
            "amsgrad" => spec.with_amsgrad(flag()?),
            "beta_1" => {
                beta_1 = number()? as f32;
                spec.with_betas(beta_1, beta_2)
            }
            "beta_2" => {
                beta_2 = number()? as f32;
                spec.with_betas(beta_1, beta_2)
            }
            other => return Err(UsageError(format!("{text}: no setting {other}"))),
        };
    }
    Ok(spec)
}

fn main() {
    burnside_trace::run_port("optim_port", |mut args: PortArgs| {
        let declared = spec(&args.value("--optim")?.unwrap_or_else(|| "sgd".to_string()))?;
        let built = match args.value("--build")? {
            Some(text) => spec(&text)?,
            None => declared.clone(),
        };
        let group = match args.value("--group")? {
            Some(text) => {
                let (optim, names) = text
                    .split_once('@')
                    .ok_or_else(|| UsageError("--group takes SPEC@name+name".to_string()))?;
                let names: Vec<String> = names.split('+').map(str::to_string).collect();
                let declared = spec(optim)?;
                let built = match args.value("--build-group")? {
                    Some(text) => spec(&text)?,
                    None => declared.clone(),
                };
                Some((declared, built, names))
            }
            None => None,
        };
        args.finish()?;

        let device = Device::default().autodiff();
        let init = InitFile::read(&args.init)?;
        let mut model = init.load_module(Mlp::new(&device))?;
        let ce = CrossEntropyLossConfig::new().init(&device);
        let mut recorder = TraceRecorder::new(declared.clone()).with_loss_fn("cross_entropy");
        let mut optim = built.init();
        let mut group_optim = None;
        let mut group_ids = Vec::new();
        if let Some((declared, built, names)) = &group {
            let refs: Vec<&str> = names.iter().map(String::as_str).collect();
            recorder = recorder.with_group(declared.clone(), &refs);
            group_optim = Some((built.init(), built.lr()));
            group_ids = names.iter().map(|n| model.id(n)).collect::<Result<_, _>>()?;
        }
        for k in 0..args.steps {
            recorder.params_before(k, &model)?;
            let (x, y) = {
                let mut step = recorder.step(k, &init, &device);
                (step.float_input::<2>("x")?, step.int_input::<1>("y")?)
            };
            let logits = model.forward(x, recorder.tap(k))?;
            recorder.logits(k, &logits)?;
            let loss = ce.forward(logits, y);
            recorder.loss(k, &loss)?;
            let mut raw = loss.backward();
            let part = GradientsParams::from_params(&mut raw, &model, &group_ids);
            let rest = GradientsParams::from_module(&mut raw, &model);
            recorder.grads(k, &model, &rest)?;
            if !part.is_empty() {
                recorder.grads(k, &model, &part)?;
            }
            model = optim.step(built.lr(), model, rest);
            if let Some((group_optim, lr)) = group_optim.as_mut() {
                model = group_optim.step(*lr, model, part);
            }
            recorder.params_after(k, &model)?;
            recorder.optim(k, &model, &optim)?;
            if let Some((group_optim, _)) = &group_optim {
                recorder.optim(k, &model, group_optim)?;
            }
            burnside_trace::step_done(k + 1, args.steps);
        }
        let last = args.steps - 1;
        let x: Tensor<2> = init.float_input_at(last, "x", &device)?;
        let y: Tensor<1, Int> = init.int_input_at(last, "y", &device)?;
        let loss_after = ce.forward(model.forward(x, Tap::off())?, y);
        recorder.loss_after(last, &loss_after)?;
        recorder.write(&args.out)?;
        Ok(())
    });
}
