//! The seed's A1 case: a two-layer MLP, its weights and its batch of four, written out
//! value by value so the burn side starts from exactly the numbers the PyTorch side uses.
//!
//! Every value is computed in f64 and rounded to f32 once, as `burnside.examples.a1` does in Python;
//! [`Arithmetic::F32`] reproduces the tempting shortcut of computing in f32 (seed item S3).

mod arithmetic;
mod batch;
mod mlp;

pub use arithmetic::Arithmetic;
pub use batch::{a1_data, a1_data_with, a1_inputs, a1_labels};
pub use mlp::{Mlp, a1_model, a1_model_with, ce};

use burnside_trace::OptimizerSpec;

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
/// Learning rate of A1's Adafactor runs (PyTorch's default).
pub const ADAFACTOR_LR: f64 = 0.01;
/// Learning rate of A1's Muon runs, which use the "match_rms_adamw" lr adjustment: it reads a
/// matrix's shape alike in burn's and PyTorch's layout (burn's "original" reads burn's transposed
/// `Linear` weight `[d_in, d_out]`, PyTorch's `[d_out, d_in]`).
pub const MUON_LR: f64 = 0.02;
/// The parameters A1's Muon trains (`torch.optim.Muon` takes 2-D parameters only): the biases keep
/// their start.
pub const MUON_PARAMS: [&str; 2] = ["fc1.weight", "fc2.weight"];
/// Learning rate of A1's L-BFGS runs (with PyTorch's 1 and 20 iterations A1's loss reaches 2e-5
/// in a step, where float32 runs part from the float64 one).
pub const LBFGS_LR: f64 = 0.1;
/// Iterations per step of A1's L-BFGS runs.
pub const LBFGS_MAX_ITER: usize = 5;
/// PyTorch's `SGD(momentum=0.9)`: dampening 0 and no Nesterov, which burn does not default to.
pub const MOMENTUM: f64 = 0.9;

/// How [`OPTIMIZERS`] builds an optimizer with A1's settings.
pub type Start = fn() -> Result<OptimizerSpec, String>;

/// A1's optimizers, by the name `--optim` takes, each with A1's settings (the one list of them
/// the A1 programs read: [`optimizer_named`]).
pub const OPTIMIZERS: [(&str, Start); 9] = [
    ("sgd", || Ok(OptimizerSpec::sgd(SGD_LR))),
    ("momentum", || {
        Ok(OptimizerSpec::Sgd {
            lr: SGD_LR,
            momentum: Some(MOMENTUM),
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        })
    }),
    ("adam", || Ok(OptimizerSpec::adam(ADAM_LR))),
    ("adamw", || Ok(OptimizerSpec::adamw(ADAM_LR))),
    ("rmsprop", || Ok(OptimizerSpec::rmsprop(RMSPROP_LR))),
    ("adagrad", || Ok(OptimizerSpec::adagrad(ADAGRAD_LR))),
    ("adafactor", || Ok(OptimizerSpec::adafactor(ADAFACTOR_LR))),
    ("muon", || {
        OptimizerSpec::muon(MUON_LR)
            .with_muon(true, (3.4445, -4.775, 2.0315), 1e-7, 5, "match_rms_adamw")
            .map_err(|e| e.to_string())
    }),
    ("lbfgs", || {
        Ok(OptimizerSpec::lbfgs(LBFGS_LR).with_lbfgs(LBFGS_MAX_ITER, None, 100, false))
    }),
];

/// A1's optimizers by name, with PyTorch's defaults (what `burnside.examples.a1.a1_optimizer` builds):
/// `sgd`, `momentum`, `adam`, `adamw`, `rmsprop` (`torch.optim.RMSprop(params, lr=0.01)`: momentum 0,
/// eps 1e-8), `adagrad` (`torch.optim.Adagrad(params, lr=0.01)`: eps 1e-10).
///
/// RMSprop and Adagrad also take PyTorch's keyword settings as `NAME:key=value,...`
/// (`rmsprop:momentum=0.9,centered=true`; `burnside.examples.a1.optimizer_settings` reads the same):
/// RMSprop's `lr`, `alpha`, `eps`, `weight_decay`, `momentum`, `centered`; Adagrad's `lr`, `lr_decay`,
/// `weight_decay`, `eps`, `initial_accumulator_value` (only 0: burn's `AdaGrad` has no other start).
/// `adafactor` (lr 0.01: `lr`, `beta2_decay`, `d`, `weight_decay`), `muon` (lr 0.02, "match_rms_adamw",
/// weight decay 0.1: `lr`, `weight_decay`, `momentum`, `nesterov`, `eps`, `ns_steps`) and `lbfgs`
/// (lr 0.1, 5 iterations: `lr`, `max_iter`, `history_size`) take PyTorch's defaults otherwise.
pub fn optimizer_named(name: &str) -> Result<OptimizerSpec, String> {
    let (name, settings) = name.split_once(':').unwrap_or((name, ""));
    let Some((_, start)) = OPTIMIZERS.iter().find(|(known, _)| *known == name) else {
        let names: Vec<&str> = OPTIMIZERS.iter().map(|(known, _)| *known).collect();
        let (last, others) = names.split_last().expect("A1 has optimizers");
        return Err(format!(
            "--optim {name}: expected {} or {last}",
            others.join(", ")
        ));
    };
    let mut spec = start()?;
    for item in settings.split(',').filter(|item| !item.is_empty()) {
        let (key, value) = item
            .split_once('=')
            .ok_or_else(|| format!("--optim {name}: `{item}` is not key=value"))?;
        let number = || {
            value
                .parse::<f64>()
                .map_err(|e| format!("--optim {name}: {key}={value}: {e}"))
        };
        let count = || {
            value
                .parse::<usize>()
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
            ("adafactor" | "muon" | "lbfgs", "lr") => spec.with_lr(number()?),
            ("adafactor" | "muon", "weight_decay") => spec.with_weight_decay(number()? as f32),
            ("adafactor", "beta2_decay" | "d") => match spec {
                OptimizerSpec::Adafactor {
                    beta2_decay,
                    eps1,
                    eps2,
                    d,
                    ..
                } => {
                    let (b, c) = match key {
                        "d" => (beta2_decay, number()? as f32),
                        _ => (number()?, d),
                    };
                    spec.with_adafactor(b, eps1, eps2, c)
                }
                _ => unreachable!("an adafactor spec"),
            },
            ("muon", "momentum") => spec.with_momentum(number()?),
            ("muon", "eps") => spec.with_eps(number()? as f32),
            ("muon", "nesterov" | "ns_steps") => match spec {
                OptimizerSpec::Muon {
                    nesterov,
                    ns_coefficients,
                    eps,
                    ns_steps,
                    ..
                } => {
                    let (n, k) = match key {
                        "nesterov" => (flag()?, ns_steps),
                        _ => (nesterov, count()?),
                    };
                    spec.with_muon(n, ns_coefficients, eps, k, "match_rms_adamw")
                        .map_err(|e| e.to_string())?
                }
                _ => unreachable!("a muon spec"),
            },
            ("lbfgs", "max_iter" | "history_size") => match spec {
                OptimizerSpec::Lbfgs {
                    max_iter,
                    history_size,
                    strong_wolfe,
                    ..
                } => match key {
                    "max_iter" => spec.with_lbfgs(count()?, None, history_size, strong_wolfe),
                    _ => spec.with_lbfgs(max_iter, None, count()?, strong_wolfe),
                },
                _ => unreachable!("an lbfgs spec"),
            },
            ("adagrad", "initial_accumulator_value") => spec
                .with_initial_accumulator_value(number()?)
                .map_err(|e| e.to_string())?,
            _ => return Err(format!("--optim {name}: `{key}` is no setting of {name}")),
        };
    }
    Ok(spec)
}
