//! Adagrad (`torch.optim.Adagrad`), L2 weight decay on the gradient.

use burn::optim::{AdaGradConfig, ModuleOptimizer};
use serde_json::{Map, Value, json};

use super::{Optimizer, OptimizerSpec, decay, f32_json};
use crate::TraceError;

impl OptimizerSpec {
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
}

/// Adagrad's file behind [`Optimizer`]; its state `sum` is PyTorch's name too.
pub(super) struct AdaGrad;

impl Optimizer for AdaGrad {
    fn torch_name(&self) -> &'static str {
        "Adagrad"
    }

    fn init(&self, spec: &OptimizerSpec) -> ModuleOptimizer {
        let OptimizerSpec::AdaGrad {
            lr_decay,
            weight_decay,
            eps,
            ..
        } = *spec
        else {
            unreachable!("not Adagrad")
        };
        AdaGradConfig::new()
            .with_lr_decay(lr_decay)
            .with_epsilon(eps)
            .with_weight_decay(decay(weight_decay))
            .init()
    }

    fn to_json(&self, spec: &OptimizerSpec) -> Map<String, Value> {
        let OptimizerSpec::AdaGrad {
            lr,
            lr_decay,
            weight_decay,
            eps,
        } = *spec
        else {
            unreachable!("not Adagrad")
        };
        let mut object = Map::new();
        object.insert("name".into(), json!("adagrad"));
        object.insert("lr".into(), json!(lr));
        object.insert("lr_decay".into(), json!(lr_decay));
        object.insert("weight_decay".into(), f32_json(weight_decay));
        object.insert("weight_decay_kind".into(), json!("l2"));
        object.insert("initial_accumulator_value".into(), json!(0.0));
        object.insert("eps".into(), f32_json(eps));
        object
    }
}
