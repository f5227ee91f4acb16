use burn::store::burn_pack::Tensor as PackTensor;
use burn::store::{BurnToPyTorchAdapter, KeyRemapper, ModuleAdapter, ModuleContext};

use crate::TraceError;

/// How a burn module's tensor paths become PyTorch names, defined once and used by
/// [`InitFile::with_names`](crate::InitFile::with_names) (loading) and
/// [`TraceRecorder::with_names`](crate::TraceRecorder::with_names) (recording) alike.
///
/// burn's standard layers need nothing here: burn-store's `BurnToPyTorchAdapter` already names
/// norm layers' `gamma`/`beta` as `weight`/`bias` (BatchNorm, LayerNorm, GroupNorm, RmsNorm)
/// and transposes `Linear` weights; `InstanceNorm`'s `gamma`/`beta` and `PRelu`'s `alpha`, which
/// that adapter leaves as they are, are named here as PyTorch does (`weight`/`bias`, `weight`);
/// Conv, ConvTranspose and Embedding share PyTorch's names and
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
        let context = ModuleContext::new(containers);
        let module_type = context.module_type().map(str::to_string);
        let mut tensor = BurnToPyTorchAdapter.adapt(tensor, context);
        if let Some(leaf) = module_type
            .as_deref()
            .and_then(|t| torch_leaf(t, &tensor.name))
        {
            let keep = tensor.name.rfind('.').map_or(0, |i| i + 1);
            tensor.name.truncate(keep);
            tensor.name.push_str(leaf);
        }
        if let Some(name) = packed {
            tensor.name = name.to_string();
        }
        let (mut renamed, _) = self.remapper.remap(vec![tensor]);
        renamed.pop().expect("remap keeps every tensor")
    }
}

/// PyTorch's name for the last segment of `name`, a tensor of a burn layer of type
/// `module_type` that burn-store's adapter does not rename: `InstanceNorm`'s `gamma`/`beta`
/// (PyTorch's `InstanceNorm1d/2d` `weight`/`bias`) and `PRelu`'s `alpha` (`nn.PReLU`'s `weight`).
fn torch_leaf(module_type: &str, name: &str) -> Option<&'static str> {
    let leaf = name.rsplit('.').next()?;
    match (module_type, leaf) {
        ("Struct:InstanceNorm", "gamma") => Some("weight"),
        ("Struct:InstanceNorm", "beta") => Some("bias"),
        ("Struct:PRelu", "alpha") => Some("weight"),
        _ => None,
    }
}

/// PyTorch's leaf for a burn layer's parameter leaf, whatever the layer (`gamma` -> `weight`,
/// `beta` -> `bias`, `alpha` -> `weight`): what a name the file lacks most likely is there.
pub(crate) fn torch_leaf_of(leaf: &str) -> Option<&'static str> {
    match leaf {
        "gamma" | "alpha" => Some("weight"),
        "beta" => Some("bias"),
        _ => None,
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
    use crate::{HostTensor, InitFile};
    use burn::module::{Module, Param};
    use burn::nn::{
        GroupNorm, GroupNormConfig, InstanceNorm, InstanceNormConfig, Linear, LinearConfig, PRelu,
        PReluConfig,
    };
    use burn::tensor::{Device, Tensor};

    #[derive(Module, Debug)]
    struct Net {
        encoder: Linear,
        scale: Param<Tensor<2>>,
    }

    #[derive(Module, Debug)]
    struct Unet {
        up_norm: InstanceNorm,
        act: PRelu,
        gn: GroupNorm,
    }

    /// A layer of the port's own whose fields are burn's names, not PyTorch's.
    #[derive(Module, Debug)]
    struct Scale {
        gamma: Param<Tensor<1>>,
        beta: Param<Tensor<1>>,
    }

    #[derive(Module, Debug)]
    struct Block {
        blk: Scale,
    }

    /// An init file of f32 vectors, read back.
    fn init_file(tag: &str, tensors: &[(&str, Vec<f32>)]) -> InitFile {
        let tensors: Vec<(&str, HostTensor)> = tensors
            .iter()
            .map(|(k, v)| (*k, HostTensor::from_f32(v, vec![v.len()])))
            .collect();
        crate::init_file::init_with(tag, &tensors)
    }

    fn values(t: Tensor<1>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().unwrap()
    }

    #[test]
    fn instance_norm_and_prelu_get_pytorch_s_names_for_recording_and_loading() {
        let device = Device::default();
        let unet = Unet {
            up_norm: InstanceNormConfig::new(3).with_affine(true).init(&device),
            act: PReluConfig::new().with_num_parameters(3).init(&device),
            gn: GroupNormConfig::new(1, 3).init(&device),
        };
        let entries = param_paths_with(&unet, &TorchNames::new());
        let names: Vec<(&str, &str)> = entries
            .iter()
            .map(|e| (e.path.as_str(), e.torch.as_str()))
            .collect();
        assert_eq!(
            names,
            vec![
                ("up_norm.gamma", "up_norm.weight"),
                ("up_norm.beta", "up_norm.bias"),
                ("act.alpha", "act.weight"),
                ("gn.gamma", "gn.weight"),
                ("gn.beta", "gn.bias"),
            ]
        );
        let init = init_file(
            "unet",
            &[
                ("params.up_norm.weight", vec![1.5, 2.5, 3.5]),
                ("params.up_norm.bias", vec![0.5, -0.5, 0.25]),
                ("params.act.weight", vec![0.1, 0.2, 0.3]),
                ("params.gn.weight", vec![4.0, 5.0, 6.0]),
                ("params.gn.bias", vec![7.0, 8.0, 9.0]),
            ],
        );
        let unet = init.load_module(unet).unwrap();
        assert_eq!(
            values(unet.up_norm.gamma.as_ref().unwrap().val()),
            vec![1.5, 2.5, 3.5]
        );
        assert_eq!(
            values(unet.up_norm.beta.as_ref().unwrap().val()),
            vec![0.5, -0.5, 0.25]
        );
        assert_eq!(values(unet.act.alpha.val()), vec![0.1, 0.2, 0.3]);
        assert_eq!(
            values(unet.gn.gamma.as_ref().unwrap().val()),
            vec![4.0, 5.0, 6.0]
        );
    }

    #[test]
    fn a_field_named_gamma_is_pointed_at_the_file_s_weight_not_its_bias() {
        let device = Device::default();
        let block = Block {
            blk: Scale {
                gamma: Param::from_tensor(Tensor::ones([2], &device)),
                beta: Param::from_tensor(Tensor::zeros([2], &device)),
            },
        };
        let init = init_file(
            "scale",
            &[
                ("params.blk.weight", vec![1.0, 2.0]),
                ("params.blk.bias", vec![3.0, 4.0]),
            ],
        );
        let error = init.load_module(block).unwrap_err().to_string();
        assert!(
            error.contains("`blk.gamma` -> `blk.gamma` <- `blk.weight`?"),
            "{error}"
        );
        assert!(
            error.contains("`blk.beta` -> `blk.beta` <- `blk.bias`?"),
            "{error}"
        );
        assert!(error.contains("`blk.weight` (`blk.gamma`?)"), "{error}");
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
