use burn::optim::decay::WeightDecayConfig;
use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdamConfig, AdamWConfig, ModuleOptimizer, SgdConfig};
use serde_json::{Map, Value, json};

/// An optimizer's full configuration: what the trace's `optimizer` metadata says, and the
/// burn optimizer built from it, so the two cannot disagree.
///
/// The constructors take PyTorch's defaults (Adam `eps = 1e-8`, SGD dampening 0), not burn's
/// (Adam `epsilon = 1e-5`, momentum dampening 0.1).
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
    /// (an L2 penalty on the gradient for SGD and Adam, decoupled decay for AdamW).
    pub fn with_weight_decay(mut self, decay: f32) -> Self {
        match &mut self {
            OptimizerSpec::Sgd { weight_decay, .. }
            | OptimizerSpec::Adam { weight_decay, .. }
            | OptimizerSpec::AdamW { weight_decay, .. } => *weight_decay = decay,
        }
        self
    }

    /// The same optimizer with learning rate `lr`.
    pub fn with_lr(mut self, new: f64) -> Self {
        match &mut self {
            OptimizerSpec::Sgd { lr, .. }
            | OptimizerSpec::Adam { lr, .. }
            | OptimizerSpec::AdamW { lr, .. } => *lr = new,
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
            OptimizerSpec::Sgd { .. } => panic!("with_betas: SGD has no betas"),
        }
        self
    }

    /// Adam's or AdamW's `eps=` (PyTorch's default 1e-8, which the constructors already set).
    ///
    /// # Panics
    /// On SGD, which has no epsilon.
    pub fn with_eps(mut self, value: f32) -> Self {
        match &mut self {
            OptimizerSpec::Adam { eps, .. } | OptimizerSpec::AdamW { eps, .. } => *eps = value,
            OptimizerSpec::Sgd { .. } => panic!("with_eps: SGD has no epsilon"),
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
            OptimizerSpec::Sgd { .. } => panic!("with_amsgrad: SGD has no AMSGrad"),
        }
        self
    }

    /// SGD's `momentum=` (0 is plain SGD, no state).
    ///
    /// # Panics
    /// On Adam and AdamW, whose momentum is `betas.0` ([`with_betas`](Self::with_betas)).
    pub fn with_momentum(mut self, value: f64) -> Self {
        match &mut self {
            OptimizerSpec::Sgd { momentum, .. } => *momentum = (value != 0.0).then_some(value),
            _ => panic!("with_momentum: Adam's momentum is betas.0 (with_betas)"),
        }
        self
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

    /// Whether the optimizer keeps per-parameter state (momentum, Adam's moments) that the
    /// trace records as `optim.*`.
    pub fn has_state(&self) -> bool {
        !matches!(self, OptimizerSpec::Sgd { momentum: None, .. })
    }

    /// The learning rate to pass to `optim.step`.
    pub fn lr(&self) -> f64 {
        match self {
            OptimizerSpec::Sgd { lr, .. }
            | OptimizerSpec::Adam { lr, .. }
            | OptimizerSpec::AdamW { lr, .. } => *lr,
        }
    }

    /// The burn optimizer with exactly this configuration.
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
    fn plain_sgd_json_has_no_momentum() {
        let json = OptimizerSpec::sgd(0.1).to_json();
        assert_eq!(
            json,
            json!({"name": "sgd", "lr": 0.1, "momentum": 0.0, "dampening": 0.0,
            "nesterov": false, "weight_decay": 0.0, "weight_decay_kind": "l2"})
        );
    }
}
