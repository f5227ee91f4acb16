//! L-BFGS (`torch.optim.LBFGS`): burn's `LBFGS`, which steps a whole module with a closure.

use burn::optim::{LBFGS, LBFGSConfig, LineSearchFn, ModuleOptimizer};
use serde_json::{Map, Value, json};

use super::{Optimizer, OptimizerSpec};

impl OptimizerSpec {
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
}

/// L-BFGS's file behind [`Optimizer`]: its state is one flat history for the whole model, which
/// neither side records.
pub(super) struct Lbfgs;

impl Optimizer for Lbfgs {
    fn torch_name(&self) -> &'static str {
        "LBFGS"
    }

    fn init(&self, _spec: &OptimizerSpec) -> ModuleOptimizer {
        panic!(
            "OptimizerSpec::init: L-BFGS steps the whole module with a closure; build it with \
             init_lbfgs()"
        )
    }

    fn to_json(&self, spec: &OptimizerSpec) -> Map<String, Value> {
        let OptimizerSpec::Lbfgs {
            lr,
            max_iter,
            max_eval,
            tolerance_grad,
            tolerance_change,
            history_size,
            strong_wolfe,
        } = *spec
        else {
            unreachable!("not L-BFGS")
        };
        let mut object = Map::new();
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
        object
    }

    fn has_state(&self, _spec: &OptimizerSpec) -> bool {
        false
    }
}
