//! The normalisation layers and Embedding: BatchNorm (training and eval mode), LayerNorm, GroupNorm,
//! InstanceNorm, RMSNorm, LocalResponseNorm, Embedding (the PyTorch side: cases/norms.py).

use burn::module::Module;
use burn::nn::{
    BatchNorm, BatchNormConfig, Embedding, EmbeddingConfig, GroupNormConfig, InstanceNormConfig,
    LayerNormConfig, LocalResponseNormConfig, RmsNormConfig,
};
use burn::tensor::Tensor;
use burn::tensor::module::layer_norm;
use burnside_trace::OptimizerSpec;

use super::Runner;
use crate::harness::{Case, Function, MODULE_LR, Res, probe_sum};

/// A BatchNorm in eval mode on the autodiff device: its `training` flag disabled, so its forward
/// normalises by the running statistics (loaded from PyTorch's buffers) and gamma and beta still train.
fn eval(bn: BatchNorm) -> BatchNorm {
    BatchNorm { training: bn.training.clone().with_value(false), ..bn }
}

/// An Embedding case's model: the layer alone, fed the batch's `ids`.
#[derive(Module, Debug)]
struct Embedded {
    layer: Embedding,
}

fn embedded(c: &Case, layer: Embedding) -> Res<()> {
    c.train(OptimizerSpec::sgd(MODULE_LR), "probe_sum", Embedded { layer }, |m: &Embedded, step| {
        let y = m.layer.forward(step.int_input::<2>("ids")?);
        let loss = probe_sum(&y, step)?;
        Ok((y, loss))
    })
}

pub fn cases() -> Vec<(&'static str, Runner)> {
    vec![
        ("batch_norm1d/train-default", |c| {
            c.fed(BatchNormConfig::new(4).init(&c.device), |l, x: Tensor<2>| l.forward(x))
        }),
        ("batch_norm1d/train-momentum-eps", |c| {
            let bn = BatchNormConfig::new(3).with_epsilon(1e-3).with_momentum(0.3).init(&c.device);
            c.fed(bn, |l, x: Tensor<3>| l.forward(x))
        }),
        ("batch_norm2d/train", |c| {
            c.fed(BatchNormConfig::new(3).init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("batch_norm2d/train-small-var", |c| {
            c.fed(BatchNormConfig::new(3).init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("batch_norm2d/train-momentum-1", |c| {
            let bn = BatchNormConfig::new(3).with_momentum(1.0).with_epsilon(1e-4).init(&c.device);
            c.fed(bn, |l, x: Tensor<4>| l.forward(x))
        }),
        ("batch_norm2d/train-3-steps", |c| {
            c.fed(BatchNormConfig::new(3).init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("batch_norm1d/eval", |c| {
            c.fed(eval(BatchNormConfig::new(4).init(&c.device)), |l, x: Tensor<2>| l.forward(x))
        }),
        ("batch_norm2d/eval-eps", |c| {
            let bn = BatchNormConfig::new(3).with_epsilon(1e-2).init(&c.device);
            c.fed(eval(bn), |l, x: Tensor<4>| l.forward(x))
        }),
        ("batch_norm1d/eval-3d", |c| {
            let bn = BatchNormConfig::new(3).with_epsilon(1e-3).init(&c.device);
            c.fed(eval(bn), |l, x: Tensor<3>| l.forward(x))
        }),
        ("batch_norm2d/no-affine", |c| {
            c.fed(BatchNormConfig::new(3).init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("batch_norm1d/no-running-stats", |c| {
            c.fed(BatchNormConfig::new(4).init(&c.device), |l, x: Tensor<2>| l.forward(x))
        }),
        ("layer_norm/no-bias", |c| {
            c.fed(LayerNormConfig::new(16).with_bias(false).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("layer_norm/no-affine", |c| {
            c.fed(Function, |_, x: Tensor<2>| {
                let ones = Tensor::ones([16], &x.device());
                layer_norm(x, ones, None, 1e-5)
            })
        }),
        ("layer_norm/small-var", |c| {
            c.fed(LayerNormConfig::new(16).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("layer_norm/eps-1e-3-small-var", |c| {
            c.fed(LayerNormConfig::new(8).with_epsilon(1e-3).init(&c.device), |l, x: Tensor<2>| l.forward(x))
        }),
        ("group_norm/groups-1", |c| {
            c.fed(GroupNormConfig::new(1, 4).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("group_norm/groups-2", |c| {
            c.fed(GroupNormConfig::new(2, 4).init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("group_norm/groups-c", |c| {
            c.fed(GroupNormConfig::new(4, 4).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("group_norm/no-affine", |c| {
            c.fed(GroupNormConfig::new(2, 6).with_affine(false).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("group_norm/eps-small-var", |c| {
            c.fed(GroupNormConfig::new(2, 4).with_epsilon(1e-4).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("instance_norm1d/default", |c| {
            c.fed(InstanceNormConfig::new(4).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("instance_norm1d/no-affine", |c| {
            c.fed(InstanceNormConfig::new(4).with_affine(false).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("instance_norm1d/affine", |c| {
            c.fed(InstanceNormConfig::new(4).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("instance_norm2d/affine", |c| {
            c.fed(InstanceNormConfig::new(3).init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("instance_norm2d/no-affine-small-var", |c| {
            c.fed(InstanceNormConfig::new(3).with_affine(false).init(&c.device), |l, x: Tensor<4>| l.forward(x))
        }),
        ("rms_norm/eps-explicit", |c| {
            c.fed(RmsNormConfig::new(16).with_epsilon(1e-6).init(&c.device), |l, x: Tensor<3>| l.forward(x))
        }),
        ("rms_norm/eps-small-var", |c| {
            c.fed(RmsNormConfig::new(8).with_epsilon(1e-5).init(&c.device), |l, x: Tensor<2>| l.forward(x))
        }),
        ("local_response_norm/default", |c| {
            c.fed(LocalResponseNormConfig::new(3).init(), |l, x: Tensor<4>| l.forward(x))
        }),
        ("local_response_norm/size-5-explicit", |c| {
            let lrn = LocalResponseNormConfig::new(5).with_alpha(0.5).with_beta(0.6).with_k(2.0).init();
            c.fed(lrn, |l, x: Tensor<3>| l.forward(x))
        }),
        ("local_response_norm/size-2", |c| {
            let lrn = LocalResponseNormConfig::new(2).with_alpha(1.0).with_beta(0.75).with_k(1.0).init();
            c.fed(lrn, |l, x: Tensor<4>| l.forward(x))
        }),
        ("local_response_norm/size-4-3d", |c| {
            let lrn = LocalResponseNormConfig::new(4).with_alpha(0.8).with_beta(0.5).with_k(1.5).init();
            c.fed(lrn, |l, x: Tensor<3>| l.forward(x))
        }),
        ("embedding/default", |c| embedded(c, EmbeddingConfig::new(10, 4).init(&c.device))),
        ("embedding/padding-idx", |c| embedded(c, EmbeddingConfig::new(10, 4).init(&c.device))),
        ("embedding/max-norm", |c| embedded(c, EmbeddingConfig::new(10, 4).init(&c.device))),
    ]
}
