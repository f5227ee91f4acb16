//! Adam (`torch.optim.Adam`), L2 weight decay on the gradient; the betas and AMSGrad builders
//! serve AdamW too.

use burn::optim::{AdamConfig, ModuleOptimizer};
use serde_json::{Map, Value, json};

use super::{Optimizer, OptimizerSpec, decay, f32_json};

impl OptimizerSpec {
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
}

/// burn's moment fields and PyTorch's names for them (Adam's and AdamW's).
pub(super) const ADAM_SLOTS: &[(&str, &str)] = &[
    ("moment_1", "exp_avg"),
    ("moment_2", "exp_avg_sq"),
    ("max_moment_2", "max_exp_avg_sq"),
];

/// Adam's file behind [`Optimizer`].
pub(super) struct Adam;

impl Optimizer for Adam {
    fn torch_name(&self) -> &'static str {
        "Adam"
    }

    fn init(&self, spec: &OptimizerSpec) -> ModuleOptimizer {
        let OptimizerSpec::Adam {
            betas,
            eps,
            weight_decay,
            amsgrad,
            ..
        } = *spec
        else {
            unreachable!("not Adam")
        };
        AdamConfig::new()
            .with_beta_1(betas.0)
            .with_beta_2(betas.1)
            .with_epsilon(eps)
            .with_amsgrad(amsgrad)
            .with_weight_decay(decay(weight_decay))
            .init()
    }

    fn to_json(&self, spec: &OptimizerSpec) -> Map<String, Value> {
        let OptimizerSpec::Adam {
            lr,
            betas,
            eps,
            weight_decay,
            amsgrad,
        } = *spec
        else {
            unreachable!("not Adam")
        };
        adam_json("adam", "l2", lr, betas, eps, weight_decay, amsgrad)
    }

    fn state_slots(&self) -> &'static [(&'static str, &'static str)] {
        ADAM_SLOTS
    }
}

/// The trace's optimizer settings of Adam and AdamW, which differ only in their name and the kind
/// of their weight decay (`l2` added to the gradient, `decoupled` from the parameters).
pub(super) fn adam_json(
    name: &str,
    weight_decay_kind: &str,
    lr: f64,
    betas: (f32, f32),
    eps: f32,
    weight_decay: f32,
    amsgrad: bool,
) -> Map<String, Value> {
    let mut object = Map::new();
    object.insert("name".into(), json!(name));
    object.insert("lr".into(), json!(lr));
    object.insert(
        "betas".into(),
        json!([f32_json(betas.0), f32_json(betas.1)]),
    );
    object.insert("eps".into(), f32_json(eps));
    object.insert("weight_decay".into(), f32_json(weight_decay));
    object.insert("weight_decay_kind".into(), json!(weight_decay_kind));
    object.insert("amsgrad".into(), json!(amsgrad));
    object
}
