//! The seed's A1 case: a two-layer MLP, its weights and its batch of four, written out
//! value by value so the burn side starts from exactly the numbers the PyTorch side uses.
//!
//! Every value is computed in f64 and rounded to f32 once, as `burnside.a1_torch` does in Python;
//! [`Arithmetic::F32`] reproduces the tempting shortcut of computing in f32 (seed item S3).

mod arithmetic;
mod batch;
mod mlp;

pub use arithmetic::Arithmetic;
pub use batch::{a1_data, a1_data_with, a1_inputs, a1_labels};
pub use mlp::{Mlp, a1_model, a1_model_with, ce};

/// Learning rate of the seed's SGD runs.
pub const SGD_LR: f64 = 0.1;
/// Learning rate of the seed's Adam runs.
pub const ADAM_LR: f64 = 0.01;
/// Adam's epsilon in the seed (PyTorch's default; burn's default is 1e-5).
pub const ADAM_EPS: f32 = 1e-8;
/// Learning rate of A1's RMSprop runs (PyTorch's default).
pub const RMSPROP_LR: f64 = 0.01;
/// Learning rate of A1's Adagrad runs (PyTorch's default).
pub const ADAGRAD_LR: f64 = 0.01;
/// PyTorch's `SGD(momentum=0.9)`: dampening 0 and no Nesterov, which burn does not default to.
pub const MOMENTUM: f64 = 0.9;

/// A1's optimizers by name, with PyTorch's defaults (what `burnside.a1_torch.a1_optimizer` builds):
/// `sgd`, `momentum`, `adam`, `adamw`, `rmsprop` (`torch.optim.RMSprop(params, lr=0.01)`: momentum 0,
/// eps 1e-8), `adagrad` (`torch.optim.Adagrad(params, lr=0.01)`: eps 1e-10).
///
/// RMSprop and Adagrad also take PyTorch's keyword settings as `NAME:key=value,...`
/// (`rmsprop:momentum=0.9,centered=true`; `burnside.a1_torch.optimizer_settings` reads the same):
/// RMSprop's `lr`, `alpha`, `eps`, `weight_decay`, `momentum`, `centered`; Adagrad's `lr`, `lr_decay`,
/// `weight_decay`, `eps`, `initial_accumulator_value` (only 0: burn's `AdaGrad` has no other start).
pub fn optimizer_named(name: &str) -> Result<burnside_trace::OptimizerSpec, String> {
    use burnside_trace::OptimizerSpec;

    let (name, settings) = name.split_once(':').unwrap_or((name, ""));
    let mut spec = match name {
        "sgd" => OptimizerSpec::sgd(SGD_LR),
        "momentum" => OptimizerSpec::Sgd {
            lr: SGD_LR,
            momentum: Some(MOMENTUM),
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        },
        "adam" => OptimizerSpec::adam(ADAM_LR),
        "adamw" => OptimizerSpec::adamw(ADAM_LR),
        "rmsprop" => OptimizerSpec::rmsprop(RMSPROP_LR),
        "adagrad" => OptimizerSpec::adagrad(ADAGRAD_LR),
        other => {
            return Err(format!(
                "--optim {other}: expected sgd, momentum, adam, adamw, rmsprop or adagrad"
            ));
        }
    };
    for item in settings.split(',').filter(|item| !item.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("--optim {name}: `{item}` is not key=value"))?;
        let number = || {
            value
                .parse::<f64>()
                .map_err(|e| format!("--optim {name}: {key}={value}: {e}"))
        };
        let flag = || {
            value
                .parse::<bool>()
                .map_err(|e| format!("--optim {name}: {key}={value}: {e}"))
        };
        spec = match (name, key) {
            ("rmsprop" | "adagrad", "lr") => spec.with_lr(number()?),
            ("rmsprop" | "adagrad", "eps") => spec.with_eps(number()? as f32),
            ("rmsprop" | "adagrad", "weight_decay") => spec.with_weight_decay(number()? as f32),
            ("rmsprop", "alpha") => spec.with_alpha(number()? as f32),
            ("rmsprop", "momentum") => spec.with_momentum(number()?),
            ("rmsprop", "centered") => spec.with_centered(flag()?),
            ("adagrad", "lr_decay") => spec.with_lr_decay(number()?),
            ("adagrad", "initial_accumulator_value") => spec
                .with_initial_accumulator_value(number()?)
                .map_err(|e| e.to_string())?,
            _ => return Err(format!("--optim {name}: `{key}` is no setting of {name}")),
        };
    }
    Ok(spec)
}
