//! Linear, the norms, and the first optimizer: the suite's smallest cases (CI runs them).

use burn::nn::{LayerNormConfig, LinearConfig, RmsNormConfig};
use burn::nn::loss::CrossEntropyLossConfig;
use burn::tensor::Tensor;
use burn::tensor::activation::gelu;

use super::Runner;
use crate::harness::Function;

pub fn cases() -> Vec<(&'static str, Runner)> {
    vec![
        ("linear/bias", |c| c.fed(LinearConfig::new(6, 5).init(&c.device), |l, x: Tensor<2>| l.forward(x))),
        ("linear/no-bias", |c| {
            c.fed(LinearConfig::new(6, 5).with_bias(false).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("layer_norm/default", |c| c.fed(LayerNormConfig::new(16).init(&c.device), |l, x: Tensor<3>| l.forward(x))),
        ("rms_norm/default", |c| c.fed(RmsNormConfig::new(16).init(&c.device), |l, x: Tensor<3>| l.forward(x))),
        ("cross_entropy/default", |c| {
            let ce = CrossEntropyLossConfig::new().init(&c.device);
            c.loss("cross_entropy", |x: Tensor<2>, step| Ok(ce.forward(x, step.int_input::<1>("y")?)))
        }),
        ("gelu/default", |c| c.fed(Function, |_, x: Tensor<2>| gelu(x))),
    ]
}
