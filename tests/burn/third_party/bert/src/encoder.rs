//! The encoder layers: multi-head self-attention and a GELU feed-forward, each followed by a
//! residual add and a LayerNorm (post-norm).

use burn::module::Module;
use burn::nn::{LayerNorm, LayerNormConfig, Linear, LinearConfig};
use burn::tensor::activation::softmax;
use burn::tensor::{Bool, Device, Tensor};

use crate::BertConfig;

fn layer_norm(config: &BertConfig, device: &Device) -> LayerNorm {
    #[cfg(not(feature = "bug-ln-eps"))]
    return LayerNormConfig::new(config.hidden_size)
        .with_epsilon(config.layer_norm_eps)
        .init(device);
    #[cfg(feature = "bug-ln-eps")]
    return LayerNormConfig::new(config.hidden_size).init(device);
}

/// Scaled dot-product self-attention with separate query, key and value projections, and the
/// projection of the heads' concatenation.
#[derive(Module, Debug)]
pub struct SelfAttention {
    pub query: Linear,
    pub key: Linear,
    pub value: Linear,
    pub output: Linear,
    pub heads: usize,
}

impl SelfAttention {
    pub fn new(config: &BertConfig, device: &Device) -> Self {
        let d = config.hidden_size;
        Self {
            query: LinearConfig::new(d, d).init(device),
            key: LinearConfig::new(d, d).init(device),
            value: LinearConfig::new(d, d).init(device),
            output: LinearConfig::new(d, d).init(device),
            heads: config.num_attention_heads,
        }
    }

    /// `x` `[batch, seq, hidden]`; `padding` `[batch, seq]`, true where a token is padding (never
    /// attended to).
    pub fn forward(&self, x: Tensor<3>, padding: Tensor<2, Bool>) -> Tensor<3> {
        let [batch, seq, hidden] = x.dims();
        let head_dim = hidden / self.heads;
        let split = |t: Tensor<3>| {
            t.reshape([batch, seq, self.heads, head_dim])
                .swap_dims(1, 2)
        };
        let q = split(self.query.forward(x.clone()));
        let k = split(self.key.forward(x.clone()));
        let v = split(self.value.forward(x));
        let scores = q.matmul(k.swap_dims(2, 3)) / (head_dim as f64).sqrt();
        #[cfg(not(feature = "bug-mask-ignored"))]
        let scores = scores.mask_fill(
            padding
                .reshape([batch, 1, 1, seq])
                .expand([batch, self.heads, seq, seq]),
            f32::MIN,
        );
        #[cfg(feature = "bug-mask-ignored")]
        let _ = padding;
        let context = softmax(scores, 3)
            .matmul(v)
            .swap_dims(1, 2)
            .reshape([batch, seq, hidden]);
        self.output.forward(context)
    }
}

/// The two-layer feed-forward: `intermediate_size` wide, GELU between.
#[derive(Module, Debug)]
pub struct FeedForward {
    pub inner: Linear,
    pub outer: Linear,
}

impl FeedForward {
    pub fn new(config: &BertConfig, device: &Device) -> Self {
        Self {
            inner: LinearConfig::new(config.hidden_size, config.intermediate_size).init(device),
            outer: LinearConfig::new(config.intermediate_size, config.hidden_size).init(device),
        }
    }

    pub fn forward(&self, x: Tensor<3>) -> Tensor<3> {
        let h = self.inner.forward(x);
        #[cfg(not(feature = "bug-gelu-tanh"))]
        let h = burn::tensor::activation::gelu(h);
        #[cfg(feature = "bug-gelu-tanh")]
        let h = burn::tensor::activation::gelu_approximate(h);
        self.outer.forward(h)
    }
}

#[derive(Module, Debug)]
pub struct EncoderLayer {
    pub attention: SelfAttention,
    pub attention_norm: LayerNorm,
    pub ffn: FeedForward,
    pub ffn_norm: LayerNorm,
}

impl EncoderLayer {
    pub fn new(config: &BertConfig, device: &Device) -> Self {
        Self {
            attention: SelfAttention::new(config, device),
            attention_norm: layer_norm(config, device),
            ffn: FeedForward::new(config, device),
            ffn_norm: layer_norm(config, device),
        }
    }

    pub fn forward(&self, x: Tensor<3>, padding: Tensor<2, Bool>) -> Tensor<3> {
        let x = self
            .attention_norm
            .forward(x.clone() + self.attention.forward(x, padding));
        self.ffn_norm.forward(x.clone() + self.ffn.forward(x))
    }
}

#[derive(Module, Debug)]
pub struct Encoder {
    pub layers: Vec<EncoderLayer>,
}

impl Encoder {
    pub fn new(config: &BertConfig, device: &Device) -> Self {
        Self {
            layers: (0..config.num_hidden_layers)
                .map(|_| EncoderLayer::new(config, device))
                .collect(),
        }
    }

    pub fn forward(&self, x: Tensor<3>, padding: Tensor<2, Bool>) -> Tensor<3> {
        self.layers
            .iter()
            .fold(x, |x, layer| layer.forward(x, padding.clone()))
    }
}
