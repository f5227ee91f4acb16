//! A two-layer MLP port trained call by call with an optimizer given on the command line, to test what
//! burnside's optimizer forensics measure from the numbers.
//!
//! ```text
//! optim_port --init INIT -o OUT --steps N --optim SPEC [--build SPEC]
//!            [--group SPEC@name+name... [--build-group SPEC]]
//! ```
//!
//! SPEC is `sgd|adam|adamw|rmsprop[:key=value,...]` with PyTorch's keyword settings (`lr`,
//! `momentum`, `dampening`, `nesterov`, `weight_decay`, `beta_1`, `beta_2`, `eps`, `amsgrad`,
//! `alpha`, `centered`), built with `OptimizerSpec`'s PyTorch defaults. `--optim` is what the trace
//! declares; `--build` (default: the same) is the burn optimizer the port actually steps with, so a
//! port whose trace says one thing while it builds another (the slip the forensics exist for) is one
//! argument away. `--build burn:adamw|burn:rmsprop[:key=value,...]` builds burn's own config by hand
//! (`AdamWConfig::new()`, `RmsPropConfig::new()`: burn's defaults) with the settings given, as a
//! port written without `OptimizerSpec` does. `--group` declares a
//! second parameter group (PyTorch names joined by `+`), stepped by its own optimizer on its part of
//! the gradients, `--build-group` what that group actually builds.

use burn::module::{Module, ParamId};
use burn::nn::{Linear, LinearConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::optim::decay::WeightDecayConfig;
use burn::optim::{AdamWConfig, ModuleOptimizer, RmsPropConfig};
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
        "rmsprop" => OptimizerSpec::rmsprop(0.01),
        other => return Err(UsageError(format!("optimizer {other}: expected sgd, adam, adamw or rmsprop"))),
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
            "alpha" => spec.with_alpha(number()? as f32),
            "centered" => spec.with_centered(flag()?),
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

/// `burn:adamw|burn:rmsprop[:key=value,...]`: burn's own config built by hand from its `new()` (burn's
/// defaults: AdamW's epsilon 1e-5 and weight decay 1e-4, RMSprop's momentum 0.9 and epsilon 1e-5), with
/// the settings given, stepped at lr 0.01.
fn by_hand(text: &str) -> Result<ModuleOptimizer, UsageError> {
    let (name, settings) = text.split_once(':').unwrap_or((text, ""));
    let mut items = Vec::new();
    for item in settings.split(',').filter(|item| !item.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| UsageError(format!("{text}: `{item}` is not key=value")))?;
        items.push((key, value));
    }
    let number = |key: &str, value: &str| value.parse::<f64>().map_err(|e| UsageError(format!("{text}: {key}: {e}")));
    Ok(match name {
        "adamw" => {
            let mut config = AdamWConfig::new();
            for (key, value) in items {
                let x = number(key, value)?;
                config = match key {
                    "beta_1" => config.with_beta_1(x as f32),
                    "beta_2" => config.with_beta_2(x as f32),
                    "eps" => config.with_epsilon(x as f32),
                    "weight_decay" => config.with_weight_decay(x as f32),
                    other => return Err(UsageError(format!("{text}: no setting {other}"))),
                };
            }
            config.init()
        }
        "rmsprop" => {
            let mut config = RmsPropConfig::new();
            for (key, value) in items {
                config = match key {
                    "centered" => config.with_centered(
                        value.parse::<bool>().map_err(|e| UsageError(format!("{text}: {key}: {e}")))?,
                    ),
                    "alpha" => config.with_alpha(number(key, value)? as f32),
                    "momentum" => config.with_momentum(number(key, value)? as f32),
                    "eps" => config.with_epsilon(number(key, value)? as f32),
                    "weight_decay" => {
                        config.with_weight_decay(Some(WeightDecayConfig::new(number(key, value)? as f32)))
                    }
                    other => return Err(UsageError(format!("{text}: no setting {other}"))),
                };
            }
            config.init()
        }
        other => return Err(UsageError(format!("--build burn:{other}: expected burn:adamw or burn:rmsprop"))),
    })
}

fn main() {
    burnside_trace::run_port("optim_port", |mut args: PortArgs| {
        let declared = spec(&args.value("--optim")?.unwrap_or_else(|| "sgd".to_string()))?;
        // the optimizer stepped and its lr: the declared spec's, another spec's, or burn's config by hand
        let (mut optim, lr) = match args.value("--build")? {
            Some(text) => match text.strip_prefix("burn:") {
                Some(rest) => (by_hand(rest)?, 0.01),
                None => {
                    let built = spec(&text)?;
                    (built.init(), built.lr())
                }
            },
            None => (declared.init(), declared.lr()),
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
            model = optim.step(lr, model, rest);
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
