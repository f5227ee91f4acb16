use burn::store::burn_pack::Tensor as PackTensor;
use burn::store::{BurnToPyTorchAdapter, KeyRemapper, ModuleAdapter, ModuleContext};

use crate::TraceError;

/// How a burn module's tensor paths become PyTorch names, defined once and used by
/// [`InitFile::with_names`](crate::InitFile::with_names) (loading) and
/// [`TraceRecorder::with_names`](crate::TraceRecorder::with_names) (recording) alike.
///
/// burn's standard layers need nothing here: burn-store's `BurnToPyTorchAdapter` already names
/// norm layers' `gamma`/`beta` as `weight`/`bias` (BatchNorm, LayerNorm, GroupNorm, RmsNorm)
/// and transposes `Linear` weights; Conv, ConvTranspose and Embedding share PyTorch's names and
/// layouts. burn's recurrent layers (`Lstm`, `Gru`, `BiLstm`, `BiGru`) and `MultiHeadAttention`
/// get PyTorch's packed names (`weight_ih_l0`, `in_proj_weight`, `out_proj`) before any rename.
/// Only a module of your own whose field names differ from the PyTorch module's attribute names
/// needs a rename, written in the burn -> PyTorch direction and applied to the whole dotted path
/// after the standard rules.
#[derive(Debug, Clone, Default)]
pub struct TorchNames {
    remapper: KeyRemapper,
}

impl TorchNames {
    /// The standard layer rules only.
    pub fn new() -> Self {
        Self::default()
    }

    /// Rename every burn path matching the regex `burn` to `torch` (capture groups as `$1`),
    /// e.g. `rename(r"^attn\.query\.", "attn.q.")`.
    pub fn rename(self, burn: &str, torch: &str) -> Result<Self, TraceError> {
        let remapper =
            self.remapper
                .add_pattern(burn, torch)
                .map_err(|e| TraceError::Mismatch {
                    name: burn.to_string(),
                    message: format!("is not a valid rename pattern: {e}"),
                })?;
        Ok(Self { remapper })
    }

    /// Rename exact paths, from a table of `(burn path, PyTorch name)` pairs.
    pub fn table<'a>(
        mut self,
        pairs: impl IntoIterator<Item = (&'a str, &'a str)>,
    ) -> Result<Self, TraceError> {
        for (burn, torch) in pairs {
            self = self.rename(&format!("^{}$", escape(burn)), &torch.replace('$', "$$"))?;
        }
        Ok(self)
    }

    /// A burn tensor (named by its field path, declared by the structs `containers`) in PyTorch's
    /// layout and name: `packed`, PyTorch's name for a tensor it packs with others, replaces the
    /// field path before the renames.
    pub(crate) fn to_torch(
        &self,
        tensor: PackTensor,
        containers: &[String],
        packed: Option<&str>,
    ) -> PackTensor {
        let mut tensor = BurnToPyTorchAdapter.adapt(tensor, ModuleContext::new(containers));
        if let Some(name) = packed {
            tensor.name = name.to_string();
        }
        let (mut renamed, _) = self.remapper.remap(vec![tensor]);
        renamed.pop().expect("remap keeps every tensor")
    }
}

/// `s` with regex metacharacters escaped, for an exact-path rename.
fn escape(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        if "\\.+*?()|[]{}^$#&-~".contains(c) {
            out.push('\\');
        }
        out.push(c);
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::param_paths_with;
    use burn::module::{Module, Param};
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::{Device, Tensor};

    #[derive(Module, Debug)]
    struct Net {
        encoder: Linear,
        scale: Param<Tensor<2>>,
    }

    #[test]
    fn a_rename_applies_after_the_standard_rules() {
        let device = Device::default();
        let net = Net {
            encoder: LinearConfig::new(2, 3).init(&device),
            scale: Param::from_tensor(Tensor::zeros([2, 2], &device)),
        };
        let names = TorchNames::new()
            .rename(r"^encoder\.", "enc.")
            .unwrap()
            .table([("scale", "gain.weight")])
            .unwrap();
        let torch: Vec<String> = param_paths_with(&net, &names)
            .into_iter()
            .map(|e| e.torch)
            .collect();
        assert_eq!(torch, vec!["enc.weight", "enc.bias", "gain.weight"]);
        let error = TorchNames::new().rename("(", "x").unwrap_err();
        assert!(
            error.to_string().contains("not a valid rename pattern"),
            "{error}"
        );
    }
}
