//! AdamW (`torch.optim.AdamW`), decoupled weight decay; its betas and AMSGrad are set with
//! Adam's builders (`adam.rs`).

use burn::optim::{AdamWConfig, ModuleOptimizer};
use serde_json::{Map, Value};

use super::adam::{ADAM_SLOTS, adam_json};
use super::{Optimizer, OptimizerSpec};

impl OptimizerSpec {
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
}

/// AdamW's file behind [`Optimizer`].
pub(super) struct AdamW;

impl Optimizer for AdamW {
    fn torch_name(&self) -> &'static str {
        "AdamW"
    }

    fn init(&self, spec: &OptimizerSpec) -> ModuleOptimizer {
        let OptimizerSpec::AdamW {
            betas,
            eps,
            weight_decay,
            amsgrad,
            ..
        } = *spec
        else {
            unreachable!("not AdamW")
        };
        AdamWConfig::new()
            .with_beta_1(betas.0)
            .with_beta_2(betas.1)
            .with_epsilon(eps)
            .with_weight_decay(weight_decay)
            .with_amsgrad(amsgrad)
            .init()
    }

    fn to_json(&self, spec: &OptimizerSpec) -> Map<String, Value> {
        let OptimizerSpec::AdamW {
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
        } = *spec
        else {
            unreachable!("not AdamW")
        };
        adam_json("adamw", "decoupled", lr, betas, eps, weight_decay, amsgrad)
    }

    fn state_slots(&self) -> &'static [(&'static str, &'static str)] {
        ADAM_SLOTS
    }
}
