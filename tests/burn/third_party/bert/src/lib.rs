//! BERT (Devlin et al., 2018) as Hugging Face's `BertModel` computes it, in burn: embeddings (word,
//! position, token type, LayerNorm), a stack of post-norm encoder layers with separate query, key
//! and value projections, GELU feed-forward, and the tanh pooler of the first token.
//!
//! ```no_run
//! use burn::tensor::{Device, Int, Tensor};
//! use bert_burn::loader;
//!
//! let device = Device::default();
//! let model = loader::from_pretrained("bert-tiny/", &device)?;   // config.json + model.safetensors
//! let ids = Tensor::<2, Int>::from_ints([[101, 7, 8, 102]], &device);
//! let out = model.forward(ids.clone(), ids.zeros_like(), ids.ones_like());
//! # Ok::<(), loader::LoadError>(())
//! ```

pub mod config;
pub mod embeddings;
pub mod encoder;
pub mod loader;
pub mod model;

pub use config::BertConfig;
pub use model::{BertModel, BertOutput};
