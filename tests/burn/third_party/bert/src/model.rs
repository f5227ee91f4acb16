//! The whole model: embeddings, encoder, pooler.

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Int, Tensor};

use crate::BertConfig;
use crate::embeddings::Embeddings;
use crate::encoder::Encoder;

/// The first token's hidden state through a dense layer and tanh.
#[derive(Module, Debug)]
pub struct Pooler {
    pub dense: Linear,
}

impl Pooler {
    pub fn forward(&self, hidden: Tensor<3>) -> Tensor<2> {
        let [batch, _, width] = hidden.dims();
        self.dense
            .forward(hidden.narrow(1, 0, 1).reshape([batch, width]))
            .tanh()
    }
}

#[derive(Module, Debug)]
pub struct BertModel {
    pub embeddings: Embeddings,
    pub encoder: Encoder,
    pub pooler: Pooler,
}

/// What [`BertModel::forward`] gives: every token's last hidden state, and the pooled first token.
#[derive(Debug, Clone)]
pub struct BertOutput {
    /// `[batch, seq, hidden]`
    pub last_hidden_state: Tensor<3>,
    /// `[batch, hidden]`
    pub pooler_output: Tensor<2>,
}

impl BertModel {
    pub fn new(config: &BertConfig, device: &Device) -> Self {
        Self {
            embeddings: Embeddings::new(config, device),
            encoder: Encoder::new(config, device),
            pooler: Pooler {
                dense: LinearConfig::new(config.hidden_size, config.hidden_size).init(device),
            },
        }
    }

    /// `input_ids`, `token_type_ids` and `attention_mask` (1 for a token, 0 for padding), each
    /// `[batch, seq]`.
    pub fn forward(
        &self,
        input_ids: Tensor<2, Int>,
        token_type_ids: Tensor<2, Int>,
        attention_mask: Tensor<2, Int>,
    ) -> BertOutput {
        let padding = attention_mask.equal_elem(0);
        let x = self.embeddings.forward(input_ids, token_type_ids);
        let last_hidden_state = self.encoder.forward(x, padding);
        let pooler_output = self.pooler.forward(last_hidden_state.clone());
        BertOutput {
            last_hidden_state,
            pooler_output,
        }
    }
}
