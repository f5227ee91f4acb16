//! Muon (`torch.optim.Muon`) on 2-D parameters; its momentum buffer brought to PyTorch's.

use burn::optim::momentum::MomentumConfig;
use burn::optim::{AdjustLrFn, ModuleOptimizer, MuonConfig};
use serde_json::{Map, Value, json};

use super::{Optimizer, OptimizerSpec, decay, f32_json};
use crate::{HostTensor, TraceError};

impl OptimizerSpec {
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
}

/// Muon's file behind [`Optimizer`].
pub(super) struct Muon;

impl Optimizer for Muon {
    fn torch_name(&self) -> &'static str {
        "Muon"
    }

    fn init(&self, spec: &OptimizerSpec) -> ModuleOptimizer {
        let OptimizerSpec::Muon {
            weight_decay,
            momentum,
            nesterov,
            ns_coefficients,
            eps,
            ns_steps,
            adjust_lr_fn,
            ..
        } = *spec
        else {
            unreachable!("not Muon")
        };
        MuonConfig::new()
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
            .with_weight_decay(decay(weight_decay))
            .init()
    }

    fn to_json(&self, spec: &OptimizerSpec) -> Map<String, Value> {
        let OptimizerSpec::Muon {
            lr,
            weight_decay,
            momentum,
            nesterov,
            ns_coefficients: (a, b, c),
            eps,
            ns_steps,
            adjust_lr_fn,
        } = *spec
        else {
            unreachable!("not Muon")
        };
        let mut object = Map::new();
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
        object
    }

    fn state_slots(&self) -> &'static [(&'static str, &'static str)] {
        &[("velocity", "momentum_buffer")]
    }

    /// `momentum_buffer` is burn's momentum sum times `1 - momentum` (PyTorch keeps the moving
    /// average).
    fn torch_state(&self, spec: &OptimizerSpec, slot: &str, value: HostTensor) -> HostTensor {
        match spec {
            OptimizerSpec::Muon { momentum, .. }
                if slot == "momentum_buffer" && *momentum != 0.0 =>
            {
                let factor = (1.0 - *momentum) as f32;
                match value.to_f32() {
                    Some(values) => HostTensor::from_f32(
                        &values.iter().map(|v| v * factor).collect::<Vec<_>>(),
                        value.shape.clone(),
                    ),
                    None => value,
                }
            }
            _ => value,
        }
    }
}
