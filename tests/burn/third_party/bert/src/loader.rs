//! Loading a Hugging Face BERT checkpoint (`save_pretrained`'s `config.json` and
//! `model.safetensors`) with burn-store.
//!
//! Hugging Face's names are mapped to this crate's by a `KeyRemapper`; burn-store's
//! `PyTorchToBurnAdapter` transposes the Linear weights into burn's `[in, out]` and names the
//! LayerNorms' `weight`/`bias` `gamma`/`beta`.

use std::fmt;
use std::path::Path;

use burn::config::Config;
use burn::store::{KeyRemapper, ModuleSnapshot, PyTorchToBurnAdapter, SafetensorsStore};
use burn::tensor::Device;

use crate::{BertConfig, BertModel};

/// Why a checkpoint did not load.
#[derive(Debug)]
pub struct LoadError(pub String);

impl fmt::Display for LoadError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for LoadError {}

#[cfg(not(feature = "bug-qk-swapped"))]
const ATTENTION: [(&str, &str); 3] = [
    (r"attention\.self\.query\.", "attention.query."),
    (r"attention\.self\.key\.", "attention.key."),
    (r"attention\.self\.value\.", "attention.value."),
];
#[cfg(feature = "bug-qk-swapped")]
const ATTENTION: [(&str, &str); 3] = [
    (r"attention\.self\.query\.", "attention.key."),
    (r"attention\.self\.key\.", "attention.query."),
    (r"attention\.self\.value\.", "attention.value."),
];

/// Hugging Face's names (with or without a task model's `bert.` prefix) to this crate's.
pub fn hf_remapper() -> KeyRemapper {
    let mut patterns = vec![
        (r"^bert\.", ""),
        (r"^embeddings\.word_embeddings\.", "embeddings.word."),
        (
            r"^embeddings\.position_embeddings\.",
            "embeddings.position.",
        ),
        (
            r"^embeddings\.token_type_embeddings\.",
            "embeddings.token_type.",
        ),
        (r"^embeddings\.LayerNorm\.", "embeddings.norm."),
        (r"^encoder\.layer\.([0-9]+)\.", "encoder.layers.$1."),
    ];
    patterns.extend(ATTENTION);
    patterns.extend([
        (r"attention\.output\.dense\.", "attention.output."),
        (r"attention\.output\.LayerNorm\.", "attention_norm."),
        (r"intermediate\.dense\.", "ffn.inner."),
        (r"(layers\.[0-9]+)\.output\.dense\.", "$1.ffn.outer."),
        (r"(layers\.[0-9]+)\.output\.LayerNorm\.", "$1.ffn_norm."),
    ]);
    KeyRemapper::from_patterns(patterns).expect("valid patterns")
}

/// `model` with the weights of the `model.safetensors` at `path` loaded; a tensor the model has
/// and the file lacks is an error.
pub fn load_safetensors(
    mut model: BertModel,
    path: impl AsRef<Path>,
) -> Result<BertModel, LoadError> {
    let path = path.as_ref();
    let mut store = SafetensorsStore::from_file(path)
        .with_from_adapter(PyTorchToBurnAdapter)
        .remap(hf_remapper());
    model
        .load_from(&mut store)
        .map_err(|e| LoadError(format!("{}: cannot load: {e}", path.display())))?;
    Ok(model)
}

/// The model a `save_pretrained` directory holds: its `config.json` and `model.safetensors`.
pub fn from_pretrained(dir: impl AsRef<Path>, device: &Device) -> Result<BertModel, LoadError> {
    let dir = dir.as_ref();
    let config = BertConfig::load(dir.join("config.json"))
        .map_err(|e| LoadError(format!("{}: {e}", dir.join("config.json").display())))?;
    if config.hidden_act != "gelu" {
        return Err(LoadError(format!(
            "hidden_act {:?}: only \"gelu\" is implemented",
            config.hidden_act
        )));
    }
    load_safetensors(
        BertModel::new(&config, device),
        dir.join("model.safetensors"),
    )
}
