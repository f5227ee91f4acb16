//! SGD (`torch.optim.SGD`): plain, or with momentum (dampening, Nesterov), L2 weight decay.

use burn::optim::momentum::MomentumConfig;
use burn::optim::{ModuleOptimizer, SgdConfig};
use serde_json::{Map, Value, json};

use super::{Optimizer, OptimizerSpec, decay, f32_json};

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
}

/// SGD's file behind [`Optimizer`].
pub(super) struct Sgd;

impl Optimizer for Sgd {
    fn torch_name(&self) -> &'static str {
        "SGD"
    }

    fn init(&self, spec: &OptimizerSpec) -> ModuleOptimizer {
        let OptimizerSpec::Sgd {
            momentum,
            dampening,
            nesterov,
            weight_decay,
            ..
        } = *spec
        else {
            unreachable!("not SGD")
        };
        let momentum = momentum.map(|m| {
            MomentumConfig::new()
                .with_momentum(m)
                .with_dampening(dampening)
                .with_nesterov(nesterov)
        });
        SgdConfig::new()
            .with_momentum(momentum)
            .with_weight_decay(decay(weight_decay))
            .init()
    }

    fn to_json(&self, spec: &OptimizerSpec) -> Map<String, Value> {
        let OptimizerSpec::Sgd {
            lr,
            momentum,
            dampening,
            nesterov,
            weight_decay,
        } = *spec
        else {
            unreachable!("not SGD")
        };
        let mut object = Map::new();
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
        object
    }

    /// Plain SGD (no momentum) has none.
    fn has_state(&self, spec: &OptimizerSpec) -> bool {
        !matches!(spec, OptimizerSpec::Sgd { momentum: None, .. })
    }

    fn state_slots(&self) -> &'static [(&'static str, &'static str)] {
        &[("velocity", "momentum_buffer")]
    }
}
