//! RMSprop (`torch.optim.RMSprop`), L2 weight decay on the gradient.

use burn::optim::{ModuleOptimizer, RmsPropConfig};
use serde_json::{Map, Value, json};

use super::{Optimizer, OptimizerSpec, decay, f32_json};

impl OptimizerSpec {
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
}

/// The record field burn's `RmsProp` derives from the others (`CenteredState::avg`): a copy of
/// `square_avg` (minus `grad_avg²` when centered) that PyTorch recomputes each step, not recorded.
pub(super) const DERIVED: &str = ".centered.avg";

/// RMSprop's file behind [`Optimizer`].
pub(super) struct RmsProp;

impl Optimizer for RmsProp {
    fn torch_name(&self) -> &'static str {
        "RMSprop"
    }

    fn init(&self, spec: &OptimizerSpec) -> ModuleOptimizer {
        let OptimizerSpec::RmsProp {
            alpha,
            eps,
            weight_decay,
            momentum,
            centered,
            ..
        } = *spec
        else {
            unreachable!("not RMSprop")
        };
        RmsPropConfig::new()
            .with_alpha(alpha)
            .with_epsilon(eps)
            .with_momentum(momentum)
            .with_centered(centered)
            .with_weight_decay(decay(weight_decay))
            .init()
    }

    fn to_json(&self, spec: &OptimizerSpec) -> Map<String, Value> {
        let OptimizerSpec::RmsProp {
            lr,
            alpha,
            eps,
            weight_decay,
            momentum,
            centered,
        } = *spec
        else {
            unreachable!("not RMSprop")
        };
        let mut object = Map::new();
        object.insert("name".into(), json!("rmsprop"));
        object.insert("lr".into(), json!(lr));
        object.insert("alpha".into(), f32_json(alpha));
        object.insert("eps".into(), f32_json(eps));
        object.insert("weight_decay".into(), f32_json(weight_decay));
        object.insert("weight_decay_kind".into(), json!("l2"));
        object.insert("momentum".into(), f32_json(momentum));
        object.insert("centered".into(), json!(centered));
        object
    }

    /// `square_avg` and `grad_avg` are PyTorch's names too.
    fn state_slots(&self) -> &'static [(&'static str, &'static str)] {
        &[("buf", "momentum_buffer")]
    }
}
