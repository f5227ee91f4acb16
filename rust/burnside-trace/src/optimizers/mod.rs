//! [`OptimizerSpec`], one file per optimizer: each holds its constructor with PyTorch's defaults,
//! the builders of its own settings, the burn optimizer it builds, the trace's `optimizer`
//! metadata it writes, and the names its state is recorded under ([`Optimizer`]). The settings
//! several optimizers share (`lr`, `weight_decay`, `eps`, `momentum`) are set here.
//!
//! A new optimizer is a file beside these and, in this one, its `mod` line, its variant in
//! [`OptimizerSpec`], an arm in `OptimizerSpec::optimizer`, a line in `OPTIMIZERS`, and its
//! variant in the patterns of the shared settings it has (the compiler names each match that
//! lacks it); `state.rs` reads every optimizer's record alike.

use burn::optim::{AdjustLrFn, ModuleOptimizer};
use serde_json::{Map, Value, json};

use crate::HostTensor;

mod adafactor;
mod adagrad;
mod adam;
mod adamw;
mod lbfgs;
mod muon;
mod rmsprop;
mod sgd;
mod state;
#[cfg(test)]
mod tests;

pub(crate) use state::optimizer_state;

/// An optimizer's full configuration: what the trace's `optimizer` metadata says, and the
/// burn optimizer built from it, so the two cannot disagree.
///
/// The constructors take PyTorch's defaults (Adam `eps = 1e-8`, SGD dampening 0, RMSprop momentum 0
/// and `eps = 1e-8`, Adagrad `eps = 1e-10`), not burn's (Adam `epsilon = 1e-5`, momentum dampening
/// 0.1, `RmsPropConfig::new()`'s momentum 0.9 and epsilon 1e-5, `AdaGradConfig::new()`'s epsilon 1e-5).
#[derive(Debug, Clone, PartialEq)]
pub enum OptimizerSpec {
    /// Stochastic gradient descent, L2 weight decay on the gradient.
    Sgd {
        /// Learning rate.
        lr: f64,
        /// Momentum factor; `None` is plain SGD (no state).
        momentum: Option<f64>,
        /// Momentum dampening.
        dampening: f64,
        /// Nesterov momentum.
        nesterov: bool,
        /// L2 penalty.
        weight_decay: f32,
    },
    /// Adam (`torch.optim.Adam`), L2 weight decay on the gradient.
    Adam {
        /// Learning rate.
        lr: f64,
        /// `(beta_1, beta_2)`.
        betas: (f32, f32),
        /// Epsilon.
        eps: f32,
        /// L2 penalty.
        weight_decay: f32,
        /// AMSGrad.
        amsgrad: bool,
    },
    /// AdamW (`torch.optim.AdamW`), decoupled weight decay.
    AdamW {
        /// Learning rate.
        lr: f64,
        /// `(beta_1, beta_2)`.
        betas: (f32, f32),
        /// Epsilon.
        eps: f32,
        /// Decoupled weight decay.
        weight_decay: f32,
        /// AMSGrad.
        amsgrad: bool,
    },
    /// RMSprop (`torch.optim.RMSprop`), L2 weight decay on the gradient. burn's `RmsProp` computes
    /// PyTorch's update: `square_avg = alpha * square_avg + (1 - alpha) * g²`, the gradient divided
    /// by `sqrt(square_avg - grad_avg²) + eps` (epsilon outside the root; `grad_avg` only when
    /// centered), then `buf = momentum * buf + that` when momentum is above 0.
    RmsProp {
        /// Learning rate.
        lr: f64,
        /// Smoothing constant of the squared average.
        alpha: f32,
        /// Epsilon, added to the root.
        eps: f32,
        /// L2 penalty.
        weight_decay: f32,
        /// Momentum factor (0: no momentum buffer).
        momentum: f32,
        /// Centered RMSprop: the squared average minus the squared gradient average.
        centered: bool,
    },
    /// Adagrad (`torch.optim.Adagrad`), L2 weight decay on the gradient: `sum += g²`, the update
    /// `lr / (1 + (step - 1) * lr_decay) * g / (sqrt(sum) + eps)`, as burn's `AdaGrad` computes it.
    /// PyTorch's `initial_accumulator_value` has no burn counterpart (burn's sum starts at 0).
    AdaGrad {
        /// Learning rate.
        lr: f64,
        /// Learning-rate decay per step.
        lr_decay: f64,
        /// L2 penalty.
        weight_decay: f32,
        /// Epsilon, added to the root.
        eps: f32,
    },
    /// Adafactor (`torch.optim.Adafactor`), decoupled weight decay `param *= 1 - lr * wd`. burn's
    /// `Adafactor` with `relative_step` and `scale_parameter` on computes PyTorch's update: the row
    /// and column means of `g²` (a vector's full `g²`) averaged with weight `step^beta2_decay`, the
    /// variance estimate `row_var · col_var / mean(row_var)`, the update `g / sqrt(estimate)` divided
    /// by `max(1, RMS / d)`, times `min(lr, 1/sqrt(step)) · max(eps2, RMS(param))`. Only `eps1`
    /// differs in kind: PyTorch floors the row mean at `eps1` and the estimate at `eps1²`, burn adds
    /// its `epsilon_1` (1e-30, kept) to `g²`; the two agree wherever the floors do not bite
    /// (gradients above ~1e-4, see docs/compare.md). `eps1` is declared as PyTorch's value.
    Adafactor {
        /// Learning rate: the cap of the relative step and the weight decay's factor.
        lr: f64,
        /// The exponent of the second-moment weight `step^beta2_decay` (negative).
        beta2_decay: f64,
        /// PyTorch's floor `eps[0]` (its default `None` is the float32 machine epsilon).
        eps1: f32,
        /// The floor of the parameter's RMS, `eps[1]`.
        eps2: f32,
        /// The clipping threshold of the update's RMS.
        d: f32,
        /// Decoupled weight decay.
        weight_decay: f32,
        /// burn's `relative_step`: the step `min(lr, 1/sqrt(step))` (on: PyTorch's; off: `lr`).
        relative_step: bool,
        /// burn's `scale_parameter`: the step times `max(eps2, RMS(param))` (on: PyTorch's).
        scale_parameter: bool,
    },
    /// Muon (`torch.optim.Muon`) on 2-D parameters: Nesterov momentum, the update orthogonalised by
    /// `ns_steps` quintic Newton–Schulz iterations with `ns_coefficients`, the lr adjusted by shape,
    /// decoupled decay with the unadjusted lr. burn's `Muon` keeps the momentum sum
    /// `v = momentum·v + g` where PyTorch keeps the moving average `(1 - momentum)` times it; the
    /// Frobenius normalisation before the iteration removes the factor (recorded as PyTorch's
    /// `momentum_buffer`, scaled). PyTorch runs the iteration in bfloat16, burn in the gradient's
    /// dtype: the updates differ by bfloat16's rounding, not by a setting.
    Muon {
        /// Learning rate (before the shape adjustment).
        lr: f64,
        /// Decoupled weight decay (PyTorch's default 0.1; `MuonConfig::new()` has none).
        weight_decay: f32,
        /// Momentum factor.
        momentum: f64,
        /// Nesterov momentum.
        nesterov: bool,
        /// `(a, b, c)` of the Newton–Schulz polynomial.
        ns_coefficients: (f32, f32, f32),
        /// The floor of the Frobenius norm the update is divided by.
        eps: f32,
        /// Newton–Schulz iterations.
        ns_steps: usize,
        /// `"original"` (`sqrt(max(1, A/B))`) or `"match_rms_adamw"` (`0.2 sqrt(max(A, B))`).
        adjust_lr_fn: AdjustLrFn,
    },
    /// L-BFGS (`torch.optim.LBFGS`): burn's `LBFGS`, which steps a whole module with a closure
    /// ([`OptimizerSpec::init_lbfgs`]), not a [`ModuleOptimizer`]. Its settings and defaults are
    /// PyTorch's; its state is one flat history for the whole model, which neither side records.
    Lbfgs {
        /// Learning rate (PyTorch's default 1).
        lr: f64,
        /// Iterations per step.
        max_iter: usize,
        /// Closure evaluations per step (PyTorch's default `max_iter * 5 / 4`).
        max_eval: usize,
        /// Stop when the gradient's largest element is at most this.
        tolerance_grad: f64,
        /// Stop when a step or the loss changes by less than this.
        tolerance_change: f64,
        /// The number of step/gradient-change pairs kept.
        history_size: usize,
        /// The strong-Wolfe line search (`line_search_fn="strong_wolfe"`), or a fixed step.
        strong_wolfe: bool,
    },
}

/// What one optimizer's file says about it, for the variant of [`OptimizerSpec`] it owns (every
/// `spec` passed is that variant).
pub(crate) trait Optimizer: Sync {
    /// PyTorch's class name (`SGD`, `Adam`, `RMSprop`, ...).
    fn torch_name(&self) -> &'static str;

    /// The burn optimizer with exactly `spec`'s configuration.
    fn init(&self, spec: &OptimizerSpec) -> ModuleOptimizer;

    /// The trace's `optimizer` metadata object for `spec` (see the trace format).
    fn to_json(&self, spec: &OptimizerSpec) -> Map<String, Value>;

    /// Whether `spec` keeps per-parameter state that the trace records as `optim.*`.
    fn has_state(&self, _spec: &OptimizerSpec) -> bool {
        true
    }

    /// The fields of burn's record of this optimizer's state that PyTorch names otherwise:
    /// `(burn's field, PyTorch's slot)`. A field not listed keeps its burn name (burn's `time`
    /// is PyTorch's `step` for every optimizer).
    fn state_slots(&self) -> &'static [(&'static str, &'static str)] {
        &[]
    }

    /// The value burn records for PyTorch's state slot `slot`, brought to PyTorch's (as burn
    /// keeps it unless the optimizer says otherwise).
    fn torch_state(&self, _spec: &OptimizerSpec, _slot: &str, value: HostTensor) -> HostTensor {
        value
    }
}

/// Every optimizer, once: the registry the record's state names are looked up in.
pub(crate) const OPTIMIZERS: [&dyn Optimizer; 8] = [
    &sgd::Sgd,
    &adam::Adam,
    &adamw::AdamW,
    &rmsprop::RmsProp,
    &adagrad::AdaGrad,
    &adafactor::Adafactor,
    &muon::Muon,
    &lbfgs::Lbfgs,
];

impl OptimizerSpec {
    /// The same optimizer with learning rate `lr`.
    pub fn with_lr(mut self, new: f64) -> Self {
        match &mut self {
            OptimizerSpec::Sgd { lr, .. }
            | OptimizerSpec::Adam { lr, .. }
            | OptimizerSpec::AdamW { lr, .. }
            | OptimizerSpec::RmsProp { lr, .. }
            | OptimizerSpec::AdaGrad { lr, .. }
            | OptimizerSpec::Adafactor { lr, .. }
            | OptimizerSpec::Muon { lr, .. }
            | OptimizerSpec::Lbfgs { lr, .. } => *lr = new,
        }
        self
    }

    /// The learning rate to pass to `optim.step`.
    pub fn lr(&self) -> f64 {
        match self {
            OptimizerSpec::Sgd { lr, .. }
            | OptimizerSpec::Adam { lr, .. }
            | OptimizerSpec::AdamW { lr, .. }
            | OptimizerSpec::RmsProp { lr, .. }
            | OptimizerSpec::AdaGrad { lr, .. }
            | OptimizerSpec::Adafactor { lr, .. }
            | OptimizerSpec::Muon { lr, .. }
            | OptimizerSpec::Lbfgs { lr, .. } => *lr,
        }
    }

    /// The same optimizer with weight decay `weight_decay`: PyTorch's `weight_decay=` argument
    /// (an L2 penalty on the gradient for SGD, Adam, RMSprop and Adagrad, decoupled decay for AdamW).
    pub fn with_weight_decay(mut self, decay: f32) -> Self {
        match &mut self {
            OptimizerSpec::Sgd { weight_decay, .. }
            | OptimizerSpec::Adam { weight_decay, .. }
            | OptimizerSpec::AdamW { weight_decay, .. }
            | OptimizerSpec::RmsProp { weight_decay, .. }
            | OptimizerSpec::AdaGrad { weight_decay, .. }
            | OptimizerSpec::Adafactor { weight_decay, .. }
            | OptimizerSpec::Muon { weight_decay, .. } => *weight_decay = decay,
            OptimizerSpec::Lbfgs { .. } => panic!("with_weight_decay: L-BFGS has no weight decay"),
        }
        self
    }

    /// The `eps=` of Adam, AdamW, RMSprop or Adagrad (the constructors set PyTorch's defaults: 1e-8,
    /// Adagrad's 1e-10).
    ///
    /// # Panics
    /// On SGD, which has no epsilon.
    pub fn with_eps(mut self, value: f32) -> Self {
        match &mut self {
            OptimizerSpec::Adam { eps, .. }
            | OptimizerSpec::AdamW { eps, .. }
            | OptimizerSpec::RmsProp { eps, .. }
            | OptimizerSpec::AdaGrad { eps, .. }
            | OptimizerSpec::Muon { eps, .. } => *eps = value,
            other => panic!("with_eps: {} has no single epsilon", other.torch_name()),
        }
        self
    }

    /// SGD's or RMSprop's `momentum=` (0 is plain SGD, no state; RMSprop without a momentum buffer).
    ///
    /// # Panics
    /// On Adam and AdamW, whose momentum is `betas.0` ([`with_betas`](Self::with_betas)), and on Adagrad.
    pub fn with_momentum(mut self, value: f64) -> Self {
        match &mut self {
            OptimizerSpec::Sgd { momentum, .. } => *momentum = (value != 0.0).then_some(value),
            OptimizerSpec::RmsProp { momentum, .. } => *momentum = value as f32,
            OptimizerSpec::Muon { momentum, .. } => *momentum = value,
            OptimizerSpec::AdaGrad { .. } => panic!("with_momentum: Adagrad has no momentum"),
            _ => panic!("with_momentum: Adam's momentum is betas.0 (with_betas)"),
        }
        self
    }

    /// The file of this optimizer.
    pub(crate) fn optimizer(&self) -> &'static dyn Optimizer {
        match self {
            OptimizerSpec::Sgd { .. } => &sgd::Sgd,
            OptimizerSpec::Adam { .. } => &adam::Adam,
            OptimizerSpec::AdamW { .. } => &adamw::AdamW,
            OptimizerSpec::RmsProp { .. } => &rmsprop::RmsProp,
            OptimizerSpec::AdaGrad { .. } => &adagrad::AdaGrad,
            OptimizerSpec::Adafactor { .. } => &adafactor::Adafactor,
            OptimizerSpec::Muon { .. } => &muon::Muon,
            OptimizerSpec::Lbfgs { .. } => &lbfgs::Lbfgs,
        }
    }

    /// PyTorch's class name of this optimizer (`SGD`, `Adam`, `RMSprop`, ...).
    pub fn torch_name(&self) -> &'static str {
        self.optimizer().torch_name()
    }

    /// Whether the optimizer keeps per-parameter state (momentum, Adam's moments, RMSprop's and
    /// Adagrad's averages) that the trace records as `optim.*`.
    pub fn has_state(&self) -> bool {
        self.optimizer().has_state(self)
    }

    /// The burn optimizer with exactly this configuration.
    ///
    /// # Panics
    /// On L-BFGS, which steps with a closure: [`OptimizerSpec::init_lbfgs`].
    pub fn init(&self) -> ModuleOptimizer {
        self.optimizer().init(self)
    }

    /// The value burn records for PyTorch's state slot `slot`, brought to PyTorch's: Muon's
    /// `momentum_buffer` is burn's momentum sum times `1 - momentum` (PyTorch keeps the moving
    /// average); every other slot is as burn keeps it.
    pub(crate) fn torch_state(&self, slot: &str, value: HostTensor) -> HostTensor {
        self.optimizer().torch_state(self, slot, value)
    }

    /// The trace's `optimizer` metadata object (see the trace format).
    pub(crate) fn to_json(&self) -> Value {
        Value::Object(self.optimizer().to_json(self))
    }
}

/// The `weight_decay` burn's configs take as an option: none for 0.
fn decay(weight_decay: f32) -> Option<burn::optim::decay::WeightDecayConfig> {
    (weight_decay != 0.0).then(|| burn::optim::decay::WeightDecayConfig::new(weight_decay))
}

/// An f32 setting as the decimal the user wrote (0.9, not 0.8999999761581421).
pub(crate) fn f32_json(value: f32) -> Value {
    let shortest: f64 = value
        .to_string()
        .parse()
        .expect("an f32 prints as a number");
    json!(shortest)
}
