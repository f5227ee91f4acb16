//! Adafactor (`torch.optim.Adafactor`), decoupled weight decay; its factored second moments.

use burn::optim::{AdafactorConfig, ModuleOptimizer};
use serde_json::{Map, Value, json};

use super::{Optimizer, OptimizerSpec, f32_json};

impl OptimizerSpec {
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
}

/// burn's `Adafactor` moments: the row (a vector's full) and column means of `g²`.
pub(super) const MOMENTS: [&str; 2] = ["second_moment", "column_second_moment"];

/// PyTorch's slot for burn's moment `leaf` of one parameter: `second_moment` and
/// `column_second_moment` are PyTorch's `row_var` and `col_var` in PyTorch's layout (a transposed
/// `Linear` weight swaps them: burn's rows are PyTorch's columns), a vector's `second_moment` (not
/// `factored`) its `variance`.
pub(super) fn moment_slot(leaf: &str, factored: bool, transposed: bool) -> &'static str {
    match (leaf, factored, transposed) {
        ("second_moment", false, _) => "variance",
        ("second_moment", true, false) | ("column_second_moment", _, true) => "row_var",
        _ => "col_var",
    }
}

/// Adafactor's file behind [`Optimizer`].
pub(super) struct Adafactor;

impl Optimizer for Adafactor {
    fn torch_name(&self) -> &'static str {
        "Adafactor"
    }

    fn init(&self, spec: &OptimizerSpec) -> ModuleOptimizer {
        let OptimizerSpec::Adafactor {
            beta2_decay,
            eps2,
            d,
            weight_decay,
            relative_step,
            scale_parameter,
            ..
        } = *spec
        else {
            unreachable!("not Adafactor")
        };
        AdafactorConfig::new()
            .with_decay_rate(beta2_decay)
            .with_epsilon_2(eps2)
            .with_clip_threshold(d)
            .with_relative_step(relative_step)
            .with_scale_parameter(scale_parameter)
            .with_weight_decay(weight_decay)
            .init()
    }

    fn to_json(&self, spec: &OptimizerSpec) -> Map<String, Value> {
        let OptimizerSpec::Adafactor {
            lr,
            beta2_decay,
            eps1,
            eps2,
            d,
            weight_decay,
            relative_step,
            scale_parameter,
        } = *spec
        else {
            unreachable!("not Adafactor")
        };
        let mut object = Map::new();
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
        object
    }
}
