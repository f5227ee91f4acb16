//! Token embeddings: word + position + token type, then LayerNorm.

use burn::module::Module;
use burn::nn::{Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig};
use burn::tensor::{Device, Int, Tensor};

use crate::BertConfig;

#[derive(Module, Debug)]
pub struct Embeddings {
    pub word: Embedding,
    pub position: Embedding,
    pub token_type: Embedding,
    pub norm: LayerNorm,
}

impl Embeddings {
    pub fn new(config: &BertConfig, device: &Device) -> Self {
        Self {
            word: EmbeddingConfig::new(config.vocab_size, config.hidden_size).init(device),
            position: EmbeddingConfig::new(config.max_position_embeddings, config.hidden_size)
                .init(device),
            token_type: EmbeddingConfig::new(config.type_vocab_size, config.hidden_size)
                .init(device),
            norm: LayerNormConfig::new(config.hidden_size)
                .with_epsilon(config.layer_norm_eps)
                .init(device),
        }
    }

    /// `[batch, seq]` token ids and token types to `[batch, seq, hidden]`.
    pub fn forward(&self, input_ids: Tensor<2, Int>, token_type_ids: Tensor<2, Int>) -> Tensor<3> {
        let [batch, seq] = input_ids.dims();
        let device = input_ids.device();
        let first = if cfg!(feature = "bug-position-offset") {
            1
        } else {
            0
        };
        let positions = Tensor::<1, Int>::arange(first..(seq as i64 + first), &device)
            .reshape([1, seq])
            .expand([batch, seq]);
        let x = self.word.forward(input_ids) + self.position.forward(positions);
        #[cfg(not(feature = "bug-no-token-type"))]
        let x = x + self.token_type.forward(token_type_ids);
        #[cfg(feature = "bug-no-token-type")]
        let _ = token_type_ids;
        self.norm.forward(x)
    }
}
