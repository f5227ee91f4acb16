use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{
    AdaGradConfig, AdafactorConfig, AdamConfig, AdamWConfig, AdjustLrFn, LBFGS, LBFGSConfig,
    LineSearchFn, ModuleOptimizer, MuonConfig, RmsPropConfig, SgdConfig,
};
use serde_json::{Map, Value, json};

use crate::TraceError;

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

impl OptimizerSpec {
    /// Plain SGD with learning rate `lr`.
    pub fn sgd(lr: f64) -> Self {
        OptimizerSpec::Sgd {
            lr,
            momentum: None,
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        }
    }

    /// Adam with learning rate `lr` and PyTorch's defaults (betas 0.9, 0.999; eps 1e-8).
    pub fn adam(lr: f64) -> Self {
        OptimizerSpec::Adam {
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.0,
            amsgrad: false,
        }
    }

    /// AdamW with learning rate `lr` and PyTorch's defaults (weight decay 0.01, eps 1e-8).
    pub fn adamw(lr: f64) -> Self {
        OptimizerSpec::AdamW {
            lr,
            betas: (0.9, 0.999),
            eps: 1e-8,
            weight_decay: 0.01,
            amsgrad: false,
        }
    }

    /// RMSprop with learning rate `lr` and PyTorch's defaults (`torch.optim.RMSprop(params, lr)`:
    /// alpha 0.99, eps 1e-8, momentum 0, not centered, no weight decay). burn's
    /// `RmsPropConfig::new()` has momentum 0.9 and epsilon 1e-5.
    pub fn rmsprop(lr: f64) -> Self {
        OptimizerSpec::RmsProp {
            lr,
            alpha: 0.99,
            eps: 1e-8,
            weight_decay: 0.0,
            momentum: 0.0,
            centered: false,
        }
    }

    /// Adagrad with learning rate `lr` and PyTorch's defaults (`torch.optim.Adagrad(params, lr)`:
    /// lr_decay 0, eps 1e-10, no weight decay, initial accumulator 0). burn's `AdaGradConfig::new()`
    /// has epsilon 1e-5.
    pub fn adagrad(lr: f64) -> Self {
        OptimizerSpec::AdaGrad {
            lr,
            lr_decay: 0.0,
            weight_decay: 0.0,
            eps: 1e-10,
        }
    }

    /// Adafactor with learning rate `lr` and PyTorch's defaults (`torch.optim.Adafactor(params, lr)`:
    /// beta2_decay -0.8, eps `(None, 1e-3)` (None: float32's machine epsilon, 2^-23), d 1, no weight
    /// decay). burn's `AdafactorConfig::new()` agrees (decay_rate -0.8, epsilon_2 1e-3, clip_threshold 1,
    /// relative step and parameter scaling on) but for its epsilon_1, 1e-30 added to `g²`.
    pub fn adafactor(lr: f64) -> Self {
        OptimizerSpec::Adafactor {
            lr,
            beta2_decay: -0.8,
            eps1: f32::EPSILON,
            eps2: 1e-3,
            d: 1.0,
            weight_decay: 0.0,
            relative_step: true,
            scale_parameter: true,
        }
    }

    /// burn's Adafactor switches `relative_step` and `scale_parameter`, which `torch.optim.Adafactor`
    /// always has on (its constructors' values): off is another optimizer than PyTorch's, declared
    /// so that the comparison names it.
    ///
    /// # Panics
    /// On any other optimizer.
    pub fn with_relative_step(mut self, relative: bool, scale: bool) -> Self {
        match &mut self {
            OptimizerSpec::Adafactor {
                relative_step,
                scale_parameter,
                ..
            } => (*relative_step, *scale_parameter) = (relative, scale),
            other => panic!(
                "with_relative_step: not Adafactor but {}",
                other.torch_name()
            ),
        }
        self
    }

    /// Muon with learning rate `lr` and PyTorch's defaults (`torch.optim.Muon(params, lr)`: weight
    /// decay 0.1, momentum 0.95 with Nesterov, coefficients (3.4445, -4.775, 2.0315), eps 1e-7,
    /// 5 steps, the "original" lr adjustment). burn's `MuonConfig::new()` has no weight decay.
    pub fn muon(lr: f64) -> Self {
        OptimizerSpec::Muon {
            lr,
            weight_decay: 0.1,
            momentum: 0.95,
            nesterov: true,
            ns_coefficients: (3.4445, -4.775, 2.0315),
            eps: 1e-7,
            ns_steps: 5,
            adjust_lr_fn: AdjustLrFn::Original,
        }
    }

    /// L-BFGS with learning rate `lr` and PyTorch's defaults (`torch.optim.LBFGS(params, lr)`:
    /// max_iter 20, max_eval 25, tolerance_grad 1e-7, tolerance_change 1e-9, history_size 100, no
    /// line search), which `LBFGSConfig::new()` has too.
    pub fn lbfgs(lr: f64) -> Self {
        OptimizerSpec::Lbfgs {
            lr,
            max_iter: 20,
            max_eval: 25,
            tolerance_grad: 1e-7,
            tolerance_change: 1e-9,
            history_size: 100,
            strong_wolfe: false,
        }
    }

    /// Adafactor's `beta2_decay=`, `eps=(eps1, eps2)` and `d=`.
    ///
    /// # Panics
    /// On any other optimizer.
    pub fn with_adafactor(mut self, beta2_decay: f64, eps1: f32, eps2: f32, d: f32) -> Self {
        match &mut self {
            OptimizerSpec::Adafactor {
                beta2_decay: b,
                eps1: e1,
                eps2: e2,
                d: clip,
                ..
            } => {
                (*b, *e1, *e2, *clip) = (beta2_decay, eps1, eps2, d);
            }
            other => panic!("with_adafactor: not Adafactor but {}", other.torch_name()),
        }
        self
    }

    /// Muon's `nesterov=`, `ns_coefficients=`, `eps=`, `ns_steps=` and `adjust_lr_fn=`
    /// (`"original"` or `"match_rms_adamw"`); PyTorch's `"spectral_unclamped"` (`sqrt(A/B)`) has no
    /// burn counterpart and is a [`TraceError::Setup`].
    ///
    /// # Panics
    /// On any other optimizer.
    pub fn with_muon(
        mut self,
        nesterov: bool,
        ns_coefficients: (f32, f32, f32),
        eps: f32,
        ns_steps: usize,
        adjust_lr_fn: &str,
    ) -> Result<Self, TraceError> {
        let adjust = match adjust_lr_fn {
            "original" => AdjustLrFn::Original,
            "match_rms_adamw" => AdjustLrFn::MatchRmsAdamW,
            other => {
                return Err(TraceError::Setup(format!(
                    "Muon adjust_lr_fn={other:?}: burn's Muon has \"original\" and \"match_rms_adamw\" \
                     only (AdjustLrFn), so no burn optimizer computes this one"
                )));
            }
        };
        match &mut self {
            OptimizerSpec::Muon {
                nesterov: n,
                ns_coefficients: c,
                eps: e,
                ns_steps: k,
                adjust_lr_fn: a,
                ..
            } => {
                (*n, *c, *e, *k, *a) = (nesterov, ns_coefficients, eps, ns_steps, adjust);
            }
            other => panic!("with_muon: not Muon but {}", other.torch_name()),
        }
        Ok(self)
    }

    /// L-BFGS's `max_iter=`, `max_eval=` (None: `max_iter * 5 / 4`, PyTorch's), `history_size=` and
    /// `line_search_fn="strong_wolfe"` (`strong_wolfe`).
    ///
    /// # Panics
    /// On any other optimizer.
    pub fn with_lbfgs(
        mut self,
        max_iter: usize,
        max_eval: Option<usize>,
        history_size: usize,
        strong_wolfe: bool,
    ) -> Self {
        match &mut self {
            OptimizerSpec::Lbfgs {
                max_iter: i,
                max_eval: e,
                history_size: h,
                strong_wolfe: w,
                ..
            } => {
                (*i, *e, *h, *w) = (
                    max_iter,
                    max_eval.unwrap_or(max_iter * 5 / 4),
                    history_size,
                    strong_wolfe,
                );
            }
            other => panic!("with_lbfgs: not L-BFGS but {}", other.torch_name()),
        }
        self
    }

    /// L-BFGS's `tolerance_grad=` and `tolerance_change=`.
    ///
    /// # Panics
    /// On any other optimizer.
    pub fn with_tolerances(mut self, grad: f64, change: f64) -> Self {
        match &mut self {
            OptimizerSpec::Lbfgs {
                tolerance_grad,
                tolerance_change,
                ..
            } => (*tolerance_grad, *tolerance_change) = (grad, change),
            other => panic!("with_tolerances: not L-BFGS but {}", other.torch_name()),
        }
        self
    }

    /// burn's L-BFGS with exactly this configuration: it steps the whole module,
    /// `lbfgs.step(lr, model, |m| (loss, grads))`, the closure evaluating the loss and gradients at
    /// the parameters it is given. `None` for any other optimizer (use [`OptimizerSpec::init`]).
    pub fn init_lbfgs(&self) -> Option<LBFGS> {
        match *self {
            OptimizerSpec::Lbfgs {
                max_iter,
                max_eval,
                tolerance_grad,
                tolerance_change,
                history_size,
                strong_wolfe,
                ..
            } => Some(
                LBFGSConfig::new()
                    .with_max_iter(max_iter)
                    .with_max_eval(Some(max_eval))
                    .with_tolerance_grad(tolerance_grad)
                    .with_tolerance_change(tolerance_change)
                    .with_history_size(history_size)
                    .with_line_search_fn(if strong_wolfe {
                        LineSearchFn::StrongWolfe
                    } else {
                        LineSearchFn::None
                    })
                    .init(),
            ),
            _ => None,
        }
    }

    /// The value burn records for PyTorch's state slot `slot`, brought to PyTorch's: Muon's
    /// `momentum_buffer` is burn's momentum sum times `1 - momentum` (PyTorch keeps the moving
    /// average); every other slot is as burn keeps it.
    pub(crate) fn torch_state(&self, slot: &str, value: crate::HostTensor) -> crate::HostTensor {
        match self {
            OptimizerSpec::Muon { momentum, .. }
                if slot == "momentum_buffer" && *momentum != 0.0 =>
            {
                let factor = (1.0 - *momentum) as f32;
                match value.to_f32() {
                    Some(values) => crate::HostTensor::from_f32(
                        &values.iter().map(|v| v * factor).collect::<Vec<_>>(),
                        value.shape.clone(),
                    ),
                    None => value,
                }
            }
            _ => value,
        }
    }

    /// SGD with momentum, as `torch.optim.SGD(lr=lr, momentum=momentum)`: dampening 0 and no
    /// Nesterov, PyTorch's defaults (burn's `MomentumConfig::new()` has dampening 0.1).
    pub fn sgd_momentum(lr: f64, momentum: f64) -> Self {
        OptimizerSpec::Sgd {
            lr,
            momentum: Some(momentum),
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
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

    /// Adam's or AdamW's `betas=(beta_1, beta_2)`.
    ///
    /// # Panics
    /// On SGD, which has no betas: a setting that would silently do nothing is a porting bug.
    pub fn with_betas(mut self, beta_1: f32, beta_2: f32) -> Self {
        match &mut self {
            OptimizerSpec::Adam { betas, .. } | OptimizerSpec::AdamW { betas, .. } => {
                *betas = (beta_1, beta_2)
            }
            other => panic!("with_betas: {} has no betas", other.torch_name()),
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

    /// Adam's or AdamW's `amsgrad=`.
    ///
    /// # Panics
    /// On SGD.
    pub fn with_amsgrad(mut self, value: bool) -> Self {
        match &mut self {
            OptimizerSpec::Adam { amsgrad, .. } | OptimizerSpec::AdamW { amsgrad, .. } => {
                *amsgrad = value
            }
            other => panic!("with_amsgrad: {} has no AMSGrad", other.torch_name()),
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

    /// RMSprop's `alpha=` (the smoothing constant; PyTorch's and burn's default 0.99).
    ///
    /// # Panics
    /// On any other optimizer.
    pub fn with_alpha(mut self, value: f32) -> Self {
        match &mut self {
            OptimizerSpec::RmsProp { alpha, .. } => *alpha = value,
            other => panic!(
                "with_alpha: only RMSprop has alpha, not {}",
                other.torch_name()
            ),
        }
        self
    }

    /// RMSprop's `centered=`.
    ///
    /// # Panics
    /// On any other optimizer.
    pub fn with_centered(mut self, value: bool) -> Self {
        match &mut self {
            OptimizerSpec::RmsProp { centered, .. } => *centered = value,
            other => panic!(
                "with_centered: only RMSprop is centered, not {}",
                other.torch_name()
            ),
        }
        self
    }

    /// Adagrad's `lr_decay=`.
    ///
    /// # Panics
    /// On any other optimizer.
    pub fn with_lr_decay(mut self, value: f64) -> Self {
        match &mut self {
            OptimizerSpec::AdaGrad { lr_decay, .. } => *lr_decay = value,
            other => panic!(
                "with_lr_decay: only Adagrad has lr_decay, not {}",
                other.torch_name()
            ),
        }
        self
    }

    /// Adagrad's `initial_accumulator_value=`: burn's `AdaGrad` starts its sum of squared gradients at
    /// 0 and has no setting for another start, so only PyTorch's default 0 is accepted; any other
    /// value is a [`TraceError::Setup`] naming it (a port cannot build that optimizer with burn).
    ///
    /// # Panics
    /// On any other optimizer.
    pub fn with_initial_accumulator_value(self, value: f64) -> Result<Self, TraceError> {
        match &self {
            OptimizerSpec::AdaGrad { .. } if value == 0.0 => Ok(self),
            OptimizerSpec::AdaGrad { .. } => Err(TraceError::Setup(format!(
                "Adagrad initial_accumulator_value={value}: burn's AdaGrad has no counterpart (its sum \
                 of squared gradients starts at 0), so no burn optimizer computes this one; train the \
                 PyTorch side with initial_accumulator_value=0"
            ))),
            other => panic!(
                "with_initial_accumulator_value: only Adagrad has it, not {}",
                other.torch_name()
            ),
        }
    }

    /// PyTorch's class name of this optimizer (`SGD`, `Adam`, `RMSprop`, ...).
    pub fn torch_name(&self) -> &'static str {
        match self {
            OptimizerSpec::Sgd { .. } => "SGD",
            OptimizerSpec::Adam { .. } => "Adam",
            OptimizerSpec::AdamW { .. } => "AdamW",
            OptimizerSpec::RmsProp { .. } => "RMSprop",
            OptimizerSpec::AdaGrad { .. } => "Adagrad",
            OptimizerSpec::Adafactor { .. } => "Adafactor",
            OptimizerSpec::Muon { .. } => "Muon",
            OptimizerSpec::Lbfgs { .. } => "LBFGS",
        }
    }

    /// SGD's `dampening=` (PyTorch's default 0; burn's `MomentumConfig` 0.1).
    ///
    /// # Panics
    /// On Adam and AdamW.
    pub fn with_dampening(mut self, value: f64) -> Self {
        match &mut self {
            OptimizerSpec::Sgd { dampening, .. } => *dampening = value,
            _ => panic!("with_dampening: only SGD has dampening"),
        }
        self
    }

    /// SGD's `nesterov=`.
    ///
    /// # Panics
    /// On Adam and AdamW.
    pub fn with_nesterov(mut self, value: bool) -> Self {
        match &mut self {
            OptimizerSpec::Sgd { nesterov, .. } => *nesterov = value,
            _ => panic!("with_nesterov: only SGD has Nesterov momentum"),
        }
        self
    }

    /// Whether the optimizer keeps per-parameter state (momentum, Adam's moments, RMSprop's and
    /// Adagrad's averages) that the trace records as `optim.*`.
    pub fn has_state(&self) -> bool {
        !matches!(
            self,
            OptimizerSpec::Sgd { momentum: None, .. } | OptimizerSpec::Lbfgs { .. }
        )
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

    /// The burn optimizer with exactly this configuration.
    ///
    /// # Panics
    /// On L-BFGS, which steps with a closure: [`OptimizerSpec::init_lbfgs`].
    pub fn init(&self) -> ModuleOptimizer {
        match *self {
            OptimizerSpec::Sgd {
                momentum,
                dampening,
                nesterov,
                weight_decay,
                ..
            } => {
                let momentum = momentum.map(|m| {
                    MomentumConfig::new()
                        .with_momentum(m)
                        .with_dampening(dampening)
                        .with_nesterov(nesterov)
                });
                SgdConfig::new()
                    .with_momentum(momentum)
                    .with_weight_decay(
                        (weight_decay != 0.0).then(|| WeightDecayConfig::new(weight_decay)),
                    )
                    .init()
            }
            OptimizerSpec::Adam {
                betas,
                eps,
                weight_decay,
                amsgrad,
                ..
            } => AdamConfig::new()
                .with_beta_1(betas.0)
                .with_beta_2(betas.1)
                .with_epsilon(eps)
                .with_amsgrad(amsgrad)
                .with_weight_decay(
                    (weight_decay != 0.0).then(|| WeightDecayConfig::new(weight_decay)),
                )
                .init(),
            OptimizerSpec::AdamW {
                betas,
                eps,
                weight_decay,
                amsgrad,
                ..
            } => AdamWConfig::new()
                .with_beta_1(betas.0)
                .with_beta_2(betas.1)
                .with_epsilon(eps)
                .with_weight_decay(weight_decay)
                .with_amsgrad(amsgrad)
                .init(),
            OptimizerSpec::RmsProp {
                alpha,
                eps,
                weight_decay,
                momentum,
                centered,
                ..
            } => RmsPropConfig::new()
                .with_alpha(alpha)
                .with_epsilon(eps)
                .with_momentum(momentum)
                .with_centered(centered)
                .with_weight_decay(
                    (weight_decay != 0.0).then(|| WeightDecayConfig::new(weight_decay)),
                )
                .init(),
            OptimizerSpec::AdaGrad {
                lr_decay,
                weight_decay,
                eps,
                ..
            } => AdaGradConfig::new()
                .with_lr_decay(lr_decay)
                .with_epsilon(eps)
                .with_weight_decay(
                    (weight_decay != 0.0).then(|| WeightDecayConfig::new(weight_decay)),
                )
                .init(),
            OptimizerSpec::Adafactor {
                beta2_decay,
                eps2,
                d,
                weight_decay,
                relative_step,
                scale_parameter,
                ..
            } => AdafactorConfig::new()
                .with_decay_rate(beta2_decay)
                .with_epsilon_2(eps2)
                .with_clip_threshold(d)
                .with_relative_step(relative_step)
                .with_scale_parameter(scale_parameter)
                .with_weight_decay(weight_decay)
                .init(),
            OptimizerSpec::Muon {
                weight_decay,
                momentum,
                nesterov,
                ns_coefficients,
                eps,
                ns_steps,
                adjust_lr_fn,
                ..
            } => MuonConfig::new()
                .with_momentum(
                    MomentumConfig::new()
                        .with_momentum(momentum)
                        .with_dampening(0.0)
                        .with_nesterov(nesterov),
                )
                .with_ns_coefficients(ns_coefficients)
                .with_epsilon(eps)
                .with_ns_steps(ns_steps)
                .with_adjust_lr_fn(adjust_lr_fn)
                .with_weight_decay(
                    (weight_decay != 0.0).then(|| WeightDecayConfig::new(weight_decay)),
                )
                .init(),
            OptimizerSpec::Lbfgs { .. } => panic!(
                "OptimizerSpec::init: L-BFGS steps the whole module with a closure; build it with \
                 init_lbfgs()"
            ),
        }
    }

    /// The trace's `optimizer` metadata object (see the trace format).
    pub(crate) fn to_json(&self) -> Value {
        let mut object = Map::new();
        match *self {
            OptimizerSpec::Sgd {
                lr,
                momentum,
                dampening,
                nesterov,
                weight_decay,
            } => {
                object.insert("name".into(), json!("sgd"));
                object.insert("lr".into(), json!(lr));
                object.insert("momentum".into(), json!(momentum.unwrap_or(0.0)));
                object.insert(
                    "dampening".into(),
                    json!(if momentum.is_some() { dampening } else { 0.0 }),
                );
                object.insert("nesterov".into(), json!(nesterov));
                object.insert("weight_decay".into(), f32_json(weight_decay));
                object.insert("weight_decay_kind".into(), json!("l2"));
            }
            OptimizerSpec::Adam {
                lr,
                betas,
                eps,
                weight_decay,
                amsgrad,
            }
            | OptimizerSpec::AdamW {
                lr,
                betas,
                eps,
                weight_decay,
                amsgrad,
            } => {
                let (name, kind) = match self {
                    OptimizerSpec::Adam { .. } => ("adam", "l2"),
                    _ => ("adamw", "decoupled"),
                };
                object.insert("name".into(), json!(name));
                object.insert("lr".into(), json!(lr));
                object.insert(
                    "betas".into(),
                    json!([f32_json(betas.0), f32_json(betas.1)]),
                );
                object.insert("eps".into(), f32_json(eps));
                object.insert("weight_decay".into(), f32_json(weight_decay));
                object.insert("weight_decay_kind".into(), json!(kind));
                object.insert("amsgrad".into(), json!(amsgrad));
            }
            OptimizerSpec::RmsProp {
                lr,
                alpha,
                eps,
                weight_decay,
                momentum,
                centered,
            } => {
                object.insert("name".into(), json!("rmsprop"));
                object.insert("lr".into(), json!(lr));
                object.insert("alpha".into(), f32_json(alpha));
                object.insert("eps".into(), f32_json(eps));
                object.insert("weight_decay".into(), f32_json(weight_decay));
                object.insert("weight_decay_kind".into(), json!("l2"));
                object.insert("momentum".into(), f32_json(momentum));
                object.insert("centered".into(), json!(centered));
            }
            OptimizerSpec::AdaGrad {
                lr,
                lr_decay,
                weight_decay,
                eps,
            } => {
                object.insert("name".into(), json!("adagrad"));
                object.insert("lr".into(), json!(lr));
                object.insert("lr_decay".into(), json!(lr_decay));
                object.insert("weight_decay".into(), f32_json(weight_decay));
                object.insert("weight_decay_kind".into(), json!("l2"));
                object.insert("initial_accumulator_value".into(), json!(0.0));
                object.insert("eps".into(), f32_json(eps));
            }
            OptimizerSpec::Adafactor {
                lr,
                beta2_decay,
                eps1,
                eps2,
                d,
                weight_decay,
                relative_step,
                scale_parameter,
            } => {
                object.insert("name".into(), json!("adafactor"));
                object.insert("lr".into(), json!(lr));
                object.insert("beta2_decay".into(), json!(beta2_decay));
                // the machine epsilon PyTorch reads for eps1=None is written exactly, as the recorder does
                let eps1 = if eps1 == f32::EPSILON {
                    json!(f64::from(eps1))
                } else {
                    f32_json(eps1)
                };
                object.insert("eps1".into(), eps1);
                object.insert("eps2".into(), f32_json(eps2));
                object.insert("d".into(), f32_json(d));
                object.insert("weight_decay".into(), f32_json(weight_decay));
                object.insert("weight_decay_kind".into(), json!("decoupled"));
                object.insert("relative_step".into(), json!(relative_step));
                object.insert("scale_parameter".into(), json!(scale_parameter));
                object.insert("maximize".into(), json!(false));
            }
            OptimizerSpec::Muon {
                lr,
                weight_decay,
                momentum,
                nesterov,
                ns_coefficients: (a, b, c),
                eps,
                ns_steps,
                adjust_lr_fn,
            } => {
                object.insert("name".into(), json!("muon"));
                object.insert("lr".into(), json!(lr));
                object.insert("weight_decay".into(), f32_json(weight_decay));
                object.insert("weight_decay_kind".into(), json!("decoupled"));
                object.insert("momentum".into(), json!(momentum));
                object.insert("nesterov".into(), json!(nesterov));
                object.insert(
                    "ns_coefficients".into(),
                    json!([f32_json(a), f32_json(b), f32_json(c)]),
                );
                object.insert("eps".into(), f32_json(eps));
                object.insert("ns_steps".into(), json!(ns_steps));
                let adjust = match adjust_lr_fn {
                    AdjustLrFn::Original => "original",
                    AdjustLrFn::MatchRmsAdamW => "match_rms_adamw",
                };
                object.insert("adjust_lr_fn".into(), json!(adjust));
            }
            OptimizerSpec::Lbfgs {
                lr,
                max_iter,
                max_eval,
                tolerance_grad,
                tolerance_change,
                history_size,
                strong_wolfe,
            } => {
                object.insert("name".into(), json!("lbfgs"));
                object.insert("lr".into(), json!(lr));
                object.insert("max_iter".into(), json!(max_iter));
                object.insert("max_eval".into(), json!(max_eval));
                object.insert("tolerance_grad".into(), json!(tolerance_grad));
                object.insert("tolerance_change".into(), json!(tolerance_change));
                object.insert("history_size".into(), json!(history_size));
                object.insert(
                    "line_search_fn".into(),
                    if strong_wolfe {
                        json!("strong_wolfe")
                    } else {
                        Value::Null
                    },
                );
                object.insert("maximize".into(), json!(false));
            }
        }
        Value::Object(object)
    }
}

/// An f32 setting as the decimal the user wrote (0.9, not 0.8999999761581421).
pub(crate) fn f32_json(value: f32) -> Value {
    let shortest: f64 = value
        .to_string()
        .parse()
        .expect("an f32 prints as a number");
    json!(shortest)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn adam_json_uses_pytorch_names_and_the_decimal_eps() {
        let json = OptimizerSpec::adam(0.01).to_json();
        assert_eq!(json["name"], "adam");
        assert_eq!(json["eps"], 1e-8);
        assert_eq!(json["betas"], json!([0.9, 0.999]));
        assert_eq!(json["weight_decay_kind"], "l2");
    }

    #[test]
    fn momentum_with_weight_decay_reads_like_torch_optim_sgd() {
        let json = OptimizerSpec::sgd_momentum(0.1, 0.9)
            .with_weight_decay(1e-4)
            .to_json();
        assert_eq!(
            json,
            json!({"name": "sgd", "lr": 0.1, "momentum": 0.9, "dampening": 0.0,
            "nesterov": false, "weight_decay": 1e-4, "weight_decay_kind": "l2"})
        );
        let decoupled = OptimizerSpec::adamw(0.01).with_weight_decay(0.05).to_json();
        assert_eq!(decoupled["weight_decay"], 0.05);
        assert_eq!(decoupled["weight_decay_kind"], "decoupled");
    }

    #[test]
    fn every_pytorch_setting_has_a_builder() {
        let adam = OptimizerSpec::adam(0.01)
            .with_betas(0.8, 0.99)
            .with_eps(1e-6)
            .with_amsgrad(true)
            .with_weight_decay(0.1)
            .with_lr(0.02);
        assert_eq!(
            adam,
            OptimizerSpec::Adam {
                lr: 0.02,
                betas: (0.8, 0.99),
                eps: 1e-6,
                weight_decay: 0.1,
                amsgrad: true
            }
        );
        let sgd = OptimizerSpec::sgd(0.1)
            .with_momentum(0.9)
            .with_dampening(0.1)
            .with_nesterov(true);
        assert_eq!(
            sgd.to_json(),
            json!({"name": "sgd", "lr": 0.1, "momentum": 0.9, "dampening": 0.1,
            "nesterov": true, "weight_decay": 0.0, "weight_decay_kind": "l2"})
        );
        assert!(sgd.has_state() && !OptimizerSpec::sgd(0.1).has_state());
        assert_eq!(
            sgd.with_momentum(0.0),
            OptimizerSpec::Sgd {
                lr: 0.1,
                momentum: None,
                dampening: 0.1,
                nesterov: true,
                weight_decay: 0.0
            }
        );
    }

    #[test]
    #[should_panic(expected = "SGD has no betas")]
    fn a_setting_the_optimizer_does_not_have_is_refused() {
        let _ = OptimizerSpec::sgd(0.1).with_betas(0.9, 0.99);
    }

    #[test]
    fn rmsprop_and_adagrad_take_pytorchs_defaults_and_read_like_torch_optim() {
        assert_eq!(
            OptimizerSpec::rmsprop(0.01).to_json(),
            json!({"name": "rmsprop", "lr": 0.01, "alpha": 0.99, "eps": 1e-8, "weight_decay": 0.0,
            "weight_decay_kind": "l2", "momentum": 0.0, "centered": false})
        );
        assert_eq!(
            OptimizerSpec::adagrad(0.01).to_json(),
            json!({"name": "adagrad", "lr": 0.01, "lr_decay": 0.0, "weight_decay": 0.0,
            "weight_decay_kind": "l2", "initial_accumulator_value": 0.0, "eps": 1e-10})
        );
        let rmsprop = OptimizerSpec::rmsprop(0.01)
            .with_alpha(0.9)
            .with_eps(1e-6)
            .with_momentum(0.5)
            .with_centered(true)
            .with_weight_decay(0.1);
        assert_eq!(
            rmsprop,
            OptimizerSpec::RmsProp {
                lr: 0.01,
                alpha: 0.9,
                eps: 1e-6,
                weight_decay: 0.1,
                momentum: 0.5,
                centered: true
            }
        );
        let adagrad = OptimizerSpec::adagrad(0.01)
            .with_lr_decay(0.1)
            .with_eps(1e-8)
            .with_initial_accumulator_value(0.0)
            .unwrap();
        assert_eq!(
            adagrad,
            OptimizerSpec::AdaGrad {
                lr: 0.01,
                lr_decay: 0.1,
                weight_decay: 0.0,
                eps: 1e-8
            }
        );
        assert!(rmsprop.has_state() && adagrad.has_state());
    }

    #[test]
    fn an_adagrad_initial_accumulator_burn_cannot_start_from_is_one_error_naming_it() {
        let error = OptimizerSpec::adagrad(0.01)
            .with_initial_accumulator_value(0.1)
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with(
                "Adagrad initial_accumulator_value=0.1: burn's AdaGrad has no counterpart"
            ),
            "{error}"
        );
        assert!(!error.contains('\n'));
    }

    #[test]
    #[should_panic(expected = "only RMSprop has alpha, not Adagrad")]
    fn rmsprops_alpha_on_adagrad_is_refused() {
        let _ = OptimizerSpec::adagrad(0.01).with_alpha(0.9);
    }

    #[test]
    fn adafactor_muon_and_lbfgs_take_pytorchs_defaults_and_read_like_torch_optim() {
        assert_eq!(
            OptimizerSpec::adafactor(0.01).to_json(),
            json!({"name": "adafactor", "lr": 0.01, "beta2_decay": -0.8,
            "eps1": f64::from(f32::EPSILON), "eps2": 1e-3, "d": 1.0, "weight_decay": 0.0,
            "weight_decay_kind": "decoupled", "relative_step": true, "scale_parameter": true,
            "maximize": false})
        );
        assert_eq!(
            OptimizerSpec::muon(0.001).to_json(),
            json!({"name": "muon", "lr": 0.001, "weight_decay": 0.1, "weight_decay_kind": "decoupled",
            "momentum": 0.95, "nesterov": true, "ns_coefficients": [3.4445, -4.775, 2.0315],
            "eps": 1e-7, "ns_steps": 5, "adjust_lr_fn": "original"})
        );
        assert_eq!(
            OptimizerSpec::lbfgs(1.0).to_json(),
            json!({"name": "lbfgs", "lr": 1.0, "max_iter": 20, "max_eval": 25,
            "tolerance_grad": 1e-7, "tolerance_change": 1e-9, "history_size": 100,
            "line_search_fn": null, "maximize": false})
        );
        let lbfgs = OptimizerSpec::lbfgs(1.0).with_lbfgs(8, None, 10, true);
        assert_eq!(lbfgs.to_json()["max_eval"], 10);
        assert_eq!(lbfgs.to_json()["line_search_fn"], "strong_wolfe");
        assert!(lbfgs.init_lbfgs().is_some() && OptimizerSpec::muon(0.1).init_lbfgs().is_none());
        assert!(!lbfgs.has_state() && OptimizerSpec::muon(0.1).has_state());
    }

    #[test]
    fn muons_buffer_is_recorded_as_pytorchs_moving_average() {
        let sum = crate::HostTensor::from_f32(&[2.0, -4.0], vec![2]);
        let spec = OptimizerSpec::muon(0.02).with_momentum(0.75);
        let recorded = spec.torch_state("momentum_buffer", sum.clone());
        assert_eq!(recorded.to_f32().unwrap(), vec![0.5, -1.0]);
        assert_eq!(recorded.shape, vec![2]);
        assert_eq!(spec.torch_state("step", sum.clone()), sum);
        let sgd = OptimizerSpec::sgd_momentum(0.1, 0.75);
        assert_eq!(sgd.torch_state("momentum_buffer", sum.clone()), sum);
    }

    #[test]
    fn a_muon_lr_adjustment_burn_does_not_have_is_one_error_naming_it() {
        let error = OptimizerSpec::muon(0.02)
            .with_muon(
                true,
                (3.4445, -4.775, 2.0315),
                1e-7,
                5,
                "spectral_unclamped",
            )
            .unwrap_err()
            .to_string();
        assert!(
            error.starts_with("Muon adjust_lr_fn=\"spectral_unclamped\": burn's Muon has"),
            "{error}"
        );
        assert!(!error.contains('\n'));
    }

    #[test]
    fn plain_sgd_json_has_no_momentum() {
        let json = OptimizerSpec::sgd(0.1).to_json();
        assert_eq!(
            json,
            json!({"name": "sgd", "lr": 0.1, "momentum": 0.0, "dampening": 0.0,
            "nesterov": false, "weight_decay": 0.0, "weight_decay_kind": "l2"})
        );
    }
}
