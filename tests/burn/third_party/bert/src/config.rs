//! The model's hyper-parameters, as Hugging Face's `config.json` gives them (other keys ignored).

use burn::config::Config;

#[derive(Config, Debug)]
pub struct BertConfig {
    pub vocab_size: usize,
    pub hidden_size: usize,
    pub num_hidden_layers: usize,
    pub num_attention_heads: usize,
    pub intermediate_size: usize,
    pub max_position_embeddings: usize,
    #[config(default = 2)]
    pub type_vocab_size: usize,
    #[config(default = 1e-12)]
    pub layer_norm_eps: f64,
    #[config(default = "String::from(\"gelu\")")]
    pub hidden_act: String,
}
