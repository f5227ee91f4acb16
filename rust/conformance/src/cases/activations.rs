//! Every burn-nn activation module with a PyTorch twin, each built as a port builds it (`XConfig::new()`
//! for the defaults cases); softmax, log-softmax and softmin are functions of `burn::tensor::activation`
//! (burn-nn has no module for them).

use burn::nn::activation::{
    CeluConfig, EluConfig, GLU, Gelu, HardShrinkConfig, HardSigmoidConfig, HardSwish, HardtanhConfig,
    LeakyReluConfig, LogSigmoid, Mish, PReluConfig, RReluConfig, Relu, Relu6, SiLU, Selu, Sigmoid,
    SoftShrinkConfig, SoftplusConfig, Softsign, Tanh, Tanhshrink, ThresholdConfig,
};
use burn::tensor::Tensor;
use burn::tensor::activation::{log_softmax, softmax, softmin};

use super::Runner;
use crate::harness::Function;

/// `x` rounded to a multiple of 0.5 (exactly), its gradient passed straight through (PyTorch's side:
/// `_snapped`): the kinks cases feed an activation values exactly at its kinks.
fn snapped<const D: usize>(x: Tensor<D>) -> Tensor<D> {
    let rounded = (x.clone() * 2.0).round() / 2.0;
    x.clone() + (rounded - x).detach()
}

pub fn cases() -> Vec<(&'static str, Runner)> {
    vec![
        ("relu/default", |c| c.fed(Relu::new(), |l, x: Tensor<2>| l.forward(x))),
        ("relu6/default", |c| c.fed(Relu6::new(), |l, x: Tensor<2>| l.forward(x))),
        ("leaky_relu/default", |c| c.fed(LeakyReluConfig::new().init(), |l, x: Tensor<2>| l.forward(x))),
        ("leaky_relu/slope0.2", |c| {
            c.fed(LeakyReluConfig::new().with_negative_slope(0.2).init(), |l, x: Tensor<2>| l.forward(x))
        }),
        ("prelu/default", |c| c.fed(PReluConfig::new().init(&c.device), |l, x: Tensor<2>| l.forward(x))),
        ("prelu/channels3", |c| {
            c.fed(PReluConfig::new().with_num_parameters(3).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("prelu/channels4-2d", |c| {
            c.fed(PReluConfig::new().with_num_parameters(4).init(&c.device), |l, x: Tensor<2>| l.forward(x))
        }),
        ("prelu/channels3-4d", |c| {
            c.fed(PReluConfig::new().with_num_parameters(3).init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("elu/default", |c| c.fed(EluConfig::new().init(), |l, x: Tensor<2>| l.forward(x))),
        ("elu/alpha0.5", |c| c.fed(EluConfig::new().with_alpha(0.5).init(), |l, x: Tensor<2>| l.forward(x))),
        ("celu/default", |c| c.fed(CeluConfig::new().init(), |l, x: Tensor<2>| l.forward(x))),
        ("celu/alpha2", |c| c.fed(CeluConfig::new().with_alpha(2.0).init(), |l, x: Tensor<2>| l.forward(x))),
        ("selu/default", |c| c.fed(Selu::new(), |l, x: Tensor<2>| l.forward(x))),
        ("gelu/tanh", |c| c.fed(Gelu::new_approximate(), |l, x: Tensor<2>| l.forward(x))),
        ("gelu/module", |c| c.fed(Gelu::new(), |l, x: Tensor<2>| l.forward(x))),
        ("silu/default", |c| c.fed(SiLU::new(), |l, x: Tensor<2>| l.forward(x))),
        ("mish/default", |c| c.fed(Mish::new(), |l, x: Tensor<2>| l.forward(x))),
        ("sigmoid/default", |c| c.fed(Sigmoid::new(), |l, x: Tensor<2>| l.forward(x))),
        ("tanh/default", |c| c.fed(Tanh::new(), |l, x: Tensor<2>| l.forward(x))),
        ("log_sigmoid/default", |c| c.fed(LogSigmoid::new(), |l, x: Tensor<2>| l.forward(x))),
        ("hard_sigmoid/default", |c| c.fed(HardSigmoidConfig::new().init(), |l, x: Tensor<2>| l.forward(x))),
        ("hard_sigmoid/alpha-sixth", |c| {
            c.fed(HardSigmoidConfig::new().with_alpha(1.0 / 6.0).init(), |l, x: Tensor<2>| l.forward(x))
        }),
        ("hard_swish/default", |c| c.fed(HardSwish::new(), |l, x: Tensor<2>| l.forward(x))),
        ("hardtanh/default", |c| c.fed(HardtanhConfig::new().init(), |l, x: Tensor<2>| l.forward(x))),
        ("hardtanh/min-2-max3", |c| {
            c.fed(HardtanhConfig::new().with_min_val(-2.0).with_max_val(3.0).init(), |l, x: Tensor<2>| l.forward(x))
        }),
        ("softplus/default", |c| c.fed(SoftplusConfig::new().init(), |l, x: Tensor<2>| l.forward(x))),
        ("softplus/beta2-threshold5", |c| {
            c.fed(SoftplusConfig::new().with_beta(2.0).with_threshold(5.0).init(), |l, x: Tensor<2>| l.forward(x))
        }),
        ("softsign/default", |c| c.fed(Softsign::new(), |l, x: Tensor<2>| l.forward(x))),
        ("tanhshrink/default", |c| c.fed(Tanhshrink::new(), |l, x: Tensor<2>| l.forward(x))),
        ("hard_shrink/default", |c| c.fed(HardShrinkConfig::new().init(), |l, x: Tensor<2>| l.forward(x))),
        ("hard_shrink/lambda1.5", |c| {
            c.fed(HardShrinkConfig::new().with_lambda(1.5).init(), |l, x: Tensor<2>| l.forward(x))
        }),
        ("soft_shrink/default", |c| c.fed(SoftShrinkConfig::new().init(), |l, x: Tensor<2>| l.forward(x))),
        ("soft_shrink/lambda1", |c| {
            c.fed(SoftShrinkConfig::new().with_lambda(1.0).init(), |l, x: Tensor<2>| l.forward(x))
        }),
        ("threshold/default", |c| c.fed(ThresholdConfig::new(0.5, -2.0).init(), |l, x: Tensor<2>| l.forward(x))),
        ("glu/default", |c| c.fed(GLU::new(-1), |l, x: Tensor<2>| l.forward(x))),
        ("glu/dim1", |c| c.fed(GLU::new(1), |l, x: Tensor<3>| l.forward(x))),
        ("softmax/last", |c| c.fed(Function, |_, x: Tensor<2>| softmax(x, 1))),
        ("softmax/dim0", |c| c.fed(Function, |_, x: Tensor<3>| softmax(x, 0))),
        ("log_softmax/last", |c| c.fed(Function, |_, x: Tensor<2>| log_softmax(x, 1))),
        ("log_softmax/dim1", |c| c.fed(Function, |_, x: Tensor<3>| log_softmax(x, 1))),
        ("softmin/last", |c| c.fed(Function, |_, x: Tensor<2>| softmin(x, 1))),
        ("softplus/threshold200", |c| {
            c.fed(SoftplusConfig::new().with_threshold(200.0).init(), |l, x: Tensor<2>| l.forward(x))
        }),
        ("log_sigmoid/wide", |c| c.fed(LogSigmoid::new(), |l, x: Tensor<2>| l.forward(x))),
        ("sigmoid/wide", |c| c.fed(Sigmoid::new(), |l, x: Tensor<2>| l.forward(x))),
        ("tanh/wide", |c| c.fed(Tanh::new(), |l, x: Tensor<2>| l.forward(x))),
        ("silu/wide", |c| c.fed(SiLU::new(), |l, x: Tensor<2>| l.forward(x))),
        ("mish/wide", |c| c.fed(Mish::new(), |l, x: Tensor<2>| l.forward(x))),
        ("gelu/tanh-wide", |c| c.fed(Gelu::new_approximate(), |l, x: Tensor<2>| l.forward(x))),
        ("elu/wide", |c| c.fed(EluConfig::new().init(), |l, x: Tensor<2>| l.forward(x))),
        ("softmax/wide", |c| c.fed(Function, |_, x: Tensor<2>| softmax(x, 1))),
        ("log_softmax/wide", |c| c.fed(Function, |_, x: Tensor<2>| log_softmax(x, 1))),
        ("softmin/wide", |c| c.fed(Function, |_, x: Tensor<2>| softmin(x, 1))),
        ("rrelu/eval", |c| {
            let mut rrelu = RReluConfig::new().init();
            rrelu.training = rrelu.training.with_value(false);
            c.fed(rrelu, |l, x: Tensor<2>| l.forward(x))
        }),
        ("relu/kinks", |c| c.fed(Relu::new(), |l, x: Tensor<2>| l.forward(snapped(x)))),
        ("relu6/kinks", |c| c.fed(Relu6::new(), |l, x: Tensor<2>| l.forward(snapped(x)))),
        ("leaky_relu/kinks", |c| {
            c.fed(LeakyReluConfig::new().with_negative_slope(0.2).init(), |l, x: Tensor<2>| l.forward(snapped(x)))
        }),
        ("prelu/kinks", |c| c.fed(PReluConfig::new().init(&c.device), |l, x: Tensor<2>| l.forward(snapped(x)))),
        ("elu/kinks", |c| c.fed(EluConfig::new().with_alpha(0.5).init(), |l, x: Tensor<2>| l.forward(snapped(x)))),
        ("celu/kinks", |c| c.fed(CeluConfig::new().with_alpha(2.0).init(), |l, x: Tensor<2>| l.forward(snapped(x)))),
        ("selu/kinks", |c| c.fed(Selu::new(), |l, x: Tensor<2>| l.forward(snapped(x)))),
        ("hardtanh/kinks", |c| c.fed(HardtanhConfig::new().init(), |l, x: Tensor<2>| l.forward(snapped(x)))),
        ("hard_sigmoid/kinks", |c| {
            c.fed(HardSigmoidConfig::new().with_alpha(1.0 / 6.0).init(), |l, x: Tensor<2>| l.forward(snapped(x)))
        }),
        ("hard_swish/kinks", |c| c.fed(HardSwish::new(), |l, x: Tensor<2>| l.forward(snapped(x)))),
        ("hard_shrink/kinks", |c| c.fed(HardShrinkConfig::new().init(), |l, x: Tensor<2>| l.forward(snapped(x)))),
        ("soft_shrink/kinks", |c| c.fed(SoftShrinkConfig::new().init(), |l, x: Tensor<2>| l.forward(snapped(x)))),
        ("threshold/kinks", |c| {
            c.fed(ThresholdConfig::new(0.5, -2.0).init(), |l, x: Tensor<2>| l.forward(snapped(x)))
        }),
        ("softsign/kinks", |c| c.fed(Softsign::new(), |l, x: Tensor<2>| l.forward(snapped(x)))),
        ("tanhshrink/kinks", |c| c.fed(Tanhshrink::new(), |l, x: Tensor<2>| l.forward(snapped(x)))),
    ]
}
