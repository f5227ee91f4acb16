use std::collections::BTreeMap;

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::store::burn_pack::Tensor as PackTensor;
use burn::store::{BurnToPyTorchAdapter, KeyRemapper, ModuleAdapter, ModuleContext, bridge};
use burn::tensor::Tensor;

use crate::{HostTensor, TraceError};

/// How a burn module's tensor paths become PyTorch names, defined once and used by
/// [`InitFile::with_names`](crate::InitFile::with_names) (loading) and
/// [`TraceRecorder::with_names`](crate::TraceRecorder::with_names) (recording) alike.
///
/// burn's standard layers need nothing here: burn-store's `BurnToPyTorchAdapter` already names
/// norm layers' `gamma`/`beta` as `weight`/`bias` (BatchNorm, LayerNorm, GroupNorm, RmsNorm)
/// and transposes `Linear` weights; Conv, ConvTranspose and Embedding share PyTorch's names and
/// layouts. burn's recurrent layers (`Lstm`, `Gru`, `BiLstm`, `BiGru`) and `MultiHeadAttention`
/// get PyTorch's packed names here (see [`Part`]). Only a module of your own whose field names differ from the PyTorch module's
/// attribute names needs a rename, written in the burn -> PyTorch direction and applied to the
/// whole dotted path after the standard rules.
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

    /// A burn tensor (named by its field path) in PyTorch's name and layout.
    fn to_torch(
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

/// Which slice of a PyTorch tensor a burn tensor is, where PyTorch packs several of burn's tensors
/// into one: slice `index` of `of` equal slices along dimension 0.
///
/// burn's `Lstm` and `Gru` keep one `GateController` per gate, each an input and a hidden
/// `Linear`; PyTorch's `nn.LSTM` and `nn.GRU` stack the gates' rows into `weight_ih_l0`
/// (`[gates * hidden, input]`), `weight_hh_l0`, `bias_ih_l0` and `bias_hh_l0`, in the order
/// input, forget, cell, output (LSTM) and reset, update, new (GRU). A `BiLstm`/`BiGru`'s
/// `reverse` direction is PyTorch's `*_reverse`. burn-store has no rule for these layers, so the
/// mapping is here: loading cuts PyTorch's tensor into the gates, recording (values, gradients,
/// optimizer moments) stacks the gates back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Part {
    /// The slice's position, from 0.
    pub index: usize,
    /// How many slices make the PyTorch tensor.
    pub of: usize,
}

/// PyTorch's name (before a port's renames) for a tensor of a burn layer PyTorch names otherwise
/// than by its field path, and the slice of it where PyTorch packs several of burn's tensors into
/// one: the gates of burn's recurrent layers ([`Part`]), the projections of `MultiHeadAttention`
/// (PyTorch's `nn.MultiheadAttention` stacks query, key and value into `in_proj_weight`
/// `[3 * d_model, d_model]` and `in_proj_bias`, and calls the output `out_proj`).
fn packed_name(stack: &[(String, String)]) -> Option<(String, Option<Part>)> {
    if let Some(found) = attention_projection(stack) {
        return Some(found);
    }
    rnn_gate(stack).map(|(name, part)| (name, Some(part)))
}

fn attention_projection(stack: &[(String, String)]) -> Option<(String, Option<Part>)> {
    const PROJECTIONS: [&str; 3] = ["query", "key", "value"];
    let at = stack
        .iter()
        .position(|(_, c)| c == "Struct:MultiHeadAttention")?;
    let [(projection, _), (leaf, linear)] = &stack[at..] else {
        return None;
    };
    if linear != "Struct:Linear" {
        return None;
    }
    let mut path: Vec<&str> = stack[..at].iter().map(|(n, _)| n.as_str()).collect();
    let (name, part) = match PROJECTIONS.iter().position(|p| p == projection) {
        Some(index) => (format!("in_proj_{leaf}"), Some(Part { index, of: 3 })),
        None if projection == "output" => (format!("out_proj.{leaf}"), None),
        None => return None,
    };
    path.push(&name);
    Some((path.join("."), part))
}

/// PyTorch's name (before a port's renames) and the slice of it for a tensor inside a burn
/// recurrent layer's gate, from the stack of (field, declaring type); `None` elsewhere.
fn rnn_gate(stack: &[(String, String)]) -> Option<(String, Part)> {
    const LSTM: [&str; 4] = ["input_gate", "forget_gate", "cell_gate", "output_gate"];
    const GRU: [&str; 3] = ["reset_gate", "update_gate", "new_gate"];
    let at = stack
        .iter()
        .position(|(_, c)| c == "Struct:Lstm" || c == "Struct:Gru")?;
    let [(gate, layer), (transform, _), (leaf, _)] = &stack[at..] else {
        return None;
    };
    let gates: &[&str] = if layer == "Struct:Lstm" { &LSTM } else { &GRU };
    let index = gates.iter().position(|g| g == gate)?;
    let which = match transform.as_str() {
        "input_transform" => "ih",
        "hidden_transform" => "hh",
        _ => return None,
    };
    let (outer, suffix) = match at.checked_sub(1).map(|i| &stack[i]) {
        Some((direction, c)) if c == "Struct:BiLstm" || c == "Struct:BiGru" => (
            at - 1,
            if direction == "reverse" {
                "_reverse"
            } else {
                ""
            },
        ),
        _ => (at, ""),
    };
    let mut path: Vec<&str> = stack[..outer].iter().map(|(n, _)| n.as_str()).collect();
    let name = format!("{leaf}_{which}_l0{suffix}");
    path.push(&name);
    Some((
        path.join("."),
        Part {
            index,
            of: gates.len(),
        },
    ))
}

/// One float tensor of a module, a parameter or a running-statistics buffer, with its burn path
/// and its PyTorch name.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamEntry {
    /// The parameter's id, which the optimizer and `GradientsParams` key on.
    pub id: ParamId,
    /// The module's field path, e.g. `bn.gamma`.
    pub path: String,
    /// PyTorch's name for it, e.g. `bn.weight`: the name in traces and init files.
    pub torch: String,
    /// A buffer (BatchNorm's `running_mean` / `running_var`, burn `RunningState`), not trained.
    pub buffer: bool,
    /// The slice of `torch` this tensor is, if PyTorch packs it with others (an RNN's gates).
    pub part: Option<Part>,
    /// The types of the structs declaring each field on the path, which decide the layout.
    containers: Vec<String>,
}

impl ParamEntry {
    /// Bring a tensor shaped like this parameter in burn (its value, a gradient, a moment) to
    /// PyTorch layout (`Linear` weights transposed, everything else as is).
    pub fn to_torch_layout(
        &self,
        tensor: HostTensor,
        names: &TorchNames,
    ) -> Result<HostTensor, TraceError> {
        let packed = bridge::from_data(tensor.to_data(), self.path.clone(), None);
        // Only the layout matters here: the name is the entry's.
        let packed = names.to_torch(packed, &self.containers, None);
        host(packed, &self.torch)
    }
}

fn host(tensor: PackTensor, name: &str) -> Result<HostTensor, TraceError> {
    let data = bridge::into_data(tensor).map_err(|e| TraceError::Mismatch {
        name: name.to_string(),
        message: format!("cannot read the tensor's data: {e:?}"),
    })?;
    HostTensor::from_data(data)
}

/// Every float tensor of `module` in module order, with its burn path and PyTorch name
/// (standard layer rules only; see [`param_paths_with`]). No data is copied.
pub fn param_paths<M: Module>(module: &M) -> Vec<ParamEntry> {
    param_paths_with(module, &TorchNames::new())
}

/// Every float tensor of `module` in module order, named by `names`.
pub fn param_paths_with<M: Module>(module: &M, names: &TorchNames) -> Vec<ParamEntry> {
    let mut visitor = PathVisitor {
        names,
        stack: Vec::new(),
        entries: Vec::new(),
        values: None,
    };
    module.visit(&mut visitor);
    visitor.entries
}

/// Every float tensor of `module` in module order with its value in PyTorch name and layout
/// (the slices of a packed tensor stacked into one, listed with its first slice's entry).
///
/// Running statistics are read as the module holds them; call `module.valid()` first (which
/// syncs every `RunningState`) to see the value of the latest forward pass.
pub fn param_values<M: Module>(
    module: &M,
    names: &TorchNames,
) -> Result<Vec<(ParamEntry, HostTensor)>, TraceError> {
    let mut visitor = PathVisitor {
        names,
        stack: Vec::new(),
        entries: Vec::new(),
        values: Some(Vec::new()),
    };
    module.visit(&mut visitor);
    let values = visitor.values.unwrap_or_default();
    let values = visitor
        .entries
        .into_iter()
        .zip(values)
        .map(|(entry, packed)| {
            let value = host(packed, &entry.torch)?;
            Ok((entry, value))
        })
        .collect::<Result<Vec<_>, TraceError>>()?;
    pack_parts(values)
}

/// `values` with each packed PyTorch tensor's slices (see [`Part`]) stacked into it, at the place
/// of its first slice; every other tensor passes through as is. A packed tensor with a slice
/// absent (a gate with no gradient) is left out whole, which the comparison reports as missing.
/// Where every slice holds one 0-d value (an optimizer's step count), the value is kept once.
pub fn pack_parts(
    values: Vec<(ParamEntry, HostTensor)>,
) -> Result<Vec<(ParamEntry, HostTensor)>, TraceError> {
    enum Slot {
        Whole(ParamEntry, HostTensor),
        Packed(ParamEntry, Vec<Option<HostTensor>>),
    }
    let mut slots: Vec<Slot> = Vec::new();
    let mut packed_at: BTreeMap<String, usize> = BTreeMap::new();
    for (entry, value) in values {
        let Some(part) = entry.part else {
            slots.push(Slot::Whole(entry, value));
            continue;
        };
        let at = *packed_at.entry(entry.torch.clone()).or_insert_with(|| {
            slots.push(Slot::Packed(entry.clone(), vec![None; part.of]));
            slots.len() - 1
        });
        if let Slot::Packed(_, parts) = &mut slots[at]
            && let Some(slot) = parts.get_mut(part.index)
        {
            *slot = Some(value);
        }
    }
    let mut out = Vec::with_capacity(slots.len());
    for slot in slots {
        match slot {
            Slot::Whole(entry, value) => out.push((entry, value)),
            Slot::Packed(entry, parts) => {
                let Some(parts) = parts.into_iter().collect::<Option<Vec<_>>>() else {
                    continue;
                };
                let joined = if parts.iter().all(|p| p.shape.is_empty()) {
                    parts
                        .iter()
                        .all(|p| p == &parts[0])
                        .then(|| parts[0].clone())
                } else {
                    HostTensor::concat0(&parts)
                };
                let value = joined.ok_or_else(|| TraceError::Mismatch {
                    name: entry.torch.clone(),
                    message: format!(
                        "its slices in burn (shapes {:?}) do not stack into PyTorch's packed tensor",
                        parts.iter().map(|p| p.shape.clone()).collect::<Vec<_>>()
                    ),
                })?;
                out.push((entry, value));
            }
        }
    }
    Ok(out)
}

/// Walks a module keeping the stack of field names and the types that declare them.
struct PathVisitor<'a> {
    names: &'a TorchNames,
    stack: Vec<(String, String)>,
    entries: Vec<ParamEntry>,
    /// The values in PyTorch layout (not yet read), when asked for.
    values: Option<Vec<PackTensor>>,
}

impl ModuleVisitor for PathVisitor<'_> {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.stack
            .push((name.to_string(), container_type.to_string()));
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.stack.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let path = self
            .stack
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>()
            .join(".");
        let containers: Vec<String> = self.stack.iter().map(|(_, c)| c.clone()).collect();
        let renamed = packed_name(&self.stack);
        // Deferred: the data is only read if the values were asked for.
        let packed = bridge::from_tensor(&param.val(), path.clone(), Some(param.id.val()));
        let packed = self.names.to_torch(
            packed,
            &containers,
            renamed.as_ref().map(|(name, _)| name.as_str()),
        );
        self.entries.push(ParamEntry {
            id: param.id,
            torch: packed.name.clone(),
            buffer: is_running_stat(&self.stack),
            part: renamed.and_then(|(_, part)| part),
            path,
            containers,
        });
        if let Some(values) = self.values.as_mut() {
            values.push(packed);
        }
    }
}

/// Whether the innermost field is one of BatchNorm's `RunningState`s, burn's only buffers.
///
/// burn's derive calls `enter_module(field, container)` with the type of the struct that
/// *declares* the field, so a running mean arrives as `("running_mean", "Struct:BatchNorm")`.
fn is_running_stat(stack: &[(String, String)]) -> bool {
    matches!(stack.last(), Some((name, container))
        if container == "Struct:BatchNorm" && (name == "running_mean" || name == "running_var"))
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{
        BatchNorm, BatchNormConfig, Embedding, EmbeddingConfig, LayerNorm, LayerNormConfig, Linear,
        LinearConfig, conv::Conv2d, conv::Conv2dConfig,
    };
    use burn::tensor::Device;

    #[derive(Module, Debug)]
    struct Net {
        encoder: Linear,
        layers: Vec<Linear>,
        scale: Param<Tensor<2>>,
    }

    #[test]
    fn paths_follow_fields_and_only_linear_weights_are_transposed() {
        let device = Device::default();
        let net = Net {
            encoder: LinearConfig::new(2, 3).init(&device),
            layers: vec![LinearConfig::new(3, 3).with_bias(false).init(&device)],
            scale: Param::from_tensor(Tensor::zeros([2, 2], &device)),
        };
        let entries = param_paths(&net);
        let names: Vec<&str> = entries.iter().map(|e| e.torch.as_str()).collect();
        assert_eq!(
            names,
            vec!["encoder.weight", "encoder.bias", "layers.0.weight", "scale"]
        );
        let values = param_values(&net, &TorchNames::new()).unwrap();
        assert_eq!(values[0].0, entries[0]);
        assert_eq!(values[0].1.shape, vec![3, 2], "PyTorch layout");
        assert_eq!(net.encoder.weight.val().dims(), [2, 3], "burn layout");
        assert_eq!(values[3].1.shape, vec![2, 2]);
        let grad = HostTensor::from_f32(&[1.0, 2.0, 3.0, 4.0, 5.0, 6.0], vec![2, 3]);
        let torch = entries[0]
            .to_torch_layout(grad.clone(), &TorchNames::new())
            .unwrap();
        assert_eq!(torch, grad.transposed());
    }

    #[derive(Module, Debug)]
    struct Layers {
        conv: Conv2d,
        bn: BatchNorm,
        ln: LayerNorm,
        emb: Embedding,
    }

    #[test]
    fn standard_layers_get_pytorch_names_and_running_stats_are_buffers() {
        let device = Device::default();
        let layers = Layers {
            conv: Conv2dConfig::new([2, 4], [3, 3]).init(&device),
            bn: BatchNormConfig::new(4).init(&device),
            ln: LayerNormConfig::new(4).init(&device),
            emb: EmbeddingConfig::new(5, 4).init(&device),
        };
        let entries: Vec<(String, String, bool)> = param_paths(&layers)
            .into_iter()
            .map(|e| (e.path, e.torch, e.buffer))
            .collect();
        let expect =
            |burn: &str, torch: &str, buffer: bool| (burn.to_string(), torch.to_string(), buffer);
        assert_eq!(
            entries,
            vec![
                expect("conv.weight", "conv.weight", false),
                expect("conv.bias", "conv.bias", false),
                expect("bn.gamma", "bn.weight", false),
                expect("bn.beta", "bn.bias", false),
                expect("bn.running_mean", "bn.running_mean", true),
                expect("bn.running_var", "bn.running_var", true),
                expect("ln.gamma", "ln.weight", false),
                expect("ln.beta", "ln.bias", false),
                expect("emb.weight", "emb.weight", false),
            ]
        );
        let values = param_values(&layers, &TorchNames::new()).unwrap();
        assert_eq!(
            values[0].1.shape,
            vec![4, 2, 3, 3],
            "conv weights as PyTorch's"
        );
    }

    /// (PyTorch name, shape) of each recorded value, in order.
    fn torch_shapes(values: &[(ParamEntry, HostTensor)]) -> Vec<(&str, Vec<usize>)> {
        values
            .iter()
            .map(|(e, v)| (e.torch.as_str(), v.shape.clone()))
            .collect()
    }

    #[derive(Module, Debug)]
    struct Recurrent {
        gru: burn::nn::Gru,
        lstm: burn::nn::BiLstm,
    }

    fn recurrent(device: &Device) -> Recurrent {
        Recurrent {
            gru: burn::nn::GruConfig::new(3, 4, true).init(device),
            lstm: burn::nn::BiLstmConfig::new(4, 2, true).init(device),
        }
    }

    #[test]
    fn recurrent_gates_stack_into_pytorchs_packed_tensors_in_pytorchs_gate_order() {
        let device = Device::default();
        let rnn = recurrent(&device);
        let values = param_values(&rnn, &TorchNames::new()).unwrap();
        let shapes = torch_shapes(&values);
        let mut expect = vec![
            ("gru.weight_ih_l0", vec![12, 3]),
            ("gru.bias_ih_l0", vec![12]),
            ("gru.weight_hh_l0", vec![12, 4]),
            ("gru.bias_hh_l0", vec![12]),
        ];
        for suffix in ["", "_reverse"] {
            let name = |n: &str| -> &'static str { format!("lstm.{n}_l0{suffix}").leak() };
            expect.extend([
                (name("weight_ih"), vec![8, 4]),
                (name("bias_ih"), vec![8]),
                (name("weight_hh"), vec![8, 2]),
                (name("bias_hh"), vec![8]),
            ]);
        }
        assert_eq!(shapes, expect);
        let value = |name: &str| {
            values
                .iter()
                .find(|(e, _)| e.torch == name)
                .unwrap()
                .1
                .clone()
        };
        let burn = |t: Tensor<2>| HostTensor::from_data(t.into_data()).unwrap().transposed();
        let rows = |t: HostTensor, of: usize| t.split0(of).unwrap();
        // GRU: reset, update, new; burn's Linear weights are [in, out], PyTorch's rows are [out, in].
        let gru = rows(value("gru.weight_ih_l0"), 3);
        assert_eq!(
            gru[0],
            burn(rnn.gru.reset_gate.input_transform.weight.val())
        );
        assert_eq!(
            gru[1],
            burn(rnn.gru.update_gate.input_transform.weight.val())
        );
        assert_eq!(gru[2], burn(rnn.gru.new_gate.input_transform.weight.val()));
        // LSTM: input, forget, cell, output; the reverse direction is PyTorch's `_reverse`.
        let lstm = rows(value("lstm.weight_hh_l0_reverse"), 4);
        let reverse = &rnn.lstm.reverse;
        assert_eq!(
            lstm[0],
            burn(reverse.input_gate.hidden_transform.weight.val())
        );
        let forget = reverse.forget_gate.as_ref().unwrap();
        assert_eq!(lstm[1], burn(forget.hidden_transform.weight.val()));
        assert_eq!(
            lstm[2],
            burn(reverse.cell_gate.hidden_transform.weight.val())
        );
        assert_eq!(
            lstm[3],
            burn(reverse.output_gate.hidden_transform.weight.val())
        );
        let entry = param_paths(&rnn)
            .into_iter()
            .find(|e| e.path == "lstm.forward.cell_gate.input_transform.bias")
            .unwrap();
        assert_eq!(entry.torch, "lstm.bias_ih_l0");
        assert_eq!(entry.part, Some(Part { index: 2, of: 4 }));
    }

    #[derive(Module, Debug)]
    struct Encoder {
        attn: burn::nn::attention::MultiHeadAttention,
    }

    #[test]
    fn attention_projections_stack_into_pytorchs_in_proj_and_the_output_is_out_proj() {
        let device = Device::default();
        let encoder = Encoder {
            attn: burn::nn::attention::MultiHeadAttentionConfig::new(4, 2).init(&device),
        };
        let values = param_values(&encoder, &TorchNames::new()).unwrap();
        let shapes = torch_shapes(&values);
        assert_eq!(
            shapes,
            vec![
                ("attn.in_proj_weight", vec![12, 4]),
                ("attn.in_proj_bias", vec![12]),
                ("attn.out_proj.weight", vec![4, 4]),
                ("attn.out_proj.bias", vec![4]),
            ]
        );
        let burn = |t: Tensor<2>| HostTensor::from_data(t.into_data()).unwrap().transposed();
        let rows = values[0].1.split0(3).unwrap();
        assert_eq!(rows[0], burn(encoder.attn.query.weight.val()));
        assert_eq!(rows[1], burn(encoder.attn.key.weight.val()));
        assert_eq!(rows[2], burn(encoder.attn.value.weight.val()));
        assert_eq!(values[2].1, burn(encoder.attn.output.weight.val()));
    }

    #[derive(Module, Debug)]
    struct Stacked {
        rnn: Vec<burn::nn::Lstm>,
    }

    #[test]
    fn a_stack_of_burn_lstms_renames_to_pytorchs_num_layers_names() {
        let device = Device::default();
        let stacked = Stacked {
            rnn: vec![
                burn::nn::LstmConfig::new(3, 2, true).init(&device),
                burn::nn::LstmConfig::new(2, 2, true).init(&device),
            ],
        };
        // the rename rust/README.md gives for PyTorch's `nn.LSTM(3, 2, num_layers=2)`
        let names = TorchNames::new()
            .rename(r"^rnn\.(\d+)\.(\w+)_l0$", "rnn.${2}_l$1")
            .unwrap();
        let values = param_values(&stacked, &names).unwrap();
        let shapes = torch_shapes(&values);
        assert_eq!(
            shapes,
            vec![
                ("rnn.weight_ih_l0", vec![8, 3]),
                ("rnn.bias_ih_l0", vec![8]),
                ("rnn.weight_hh_l0", vec![8, 2]),
                ("rnn.bias_hh_l0", vec![8]),
                ("rnn.weight_ih_l1", vec![8, 2]),
                ("rnn.bias_ih_l1", vec![8]),
                ("rnn.weight_hh_l1", vec![8, 2]),
                ("rnn.bias_hh_l1", vec![8]),
            ]
        );
    }

    #[test]
    fn a_packed_tensor_with_a_slice_absent_is_left_out_whole() {
        let rnn = recurrent(&Device::default());
        let mut values = param_values(&rnn, &TorchNames::new()).unwrap();
        // Back to slices, then drop one gate's: as when a gate has no gradient.
        let entries = param_paths(&rnn);
        let mut slices: Vec<(ParamEntry, HostTensor)> = Vec::new();
        for entry in entries.iter().filter(|e| e.torch.starts_with("gru.")) {
            let (_, packed) = values.iter().find(|(e, _)| e.torch == entry.torch).unwrap();
            let part = entry.part.unwrap();
            slices.push((
                entry.clone(),
                packed.split0(part.of).unwrap()[part.index].clone(),
            ));
        }
        let repacked = pack_parts(slices.clone()).unwrap();
        values.truncate(4);
        assert_eq!(repacked, values, "slices stack back into the same tensors");
        slices.remove(0);
        let names: Vec<String> = pack_parts(slices)
            .unwrap()
            .into_iter()
            .map(|(e, _)| e.torch)
            .collect();
        assert_eq!(
            names,
            vec!["gru.bias_ih_l0", "gru.weight_hh_l0", "gru.bias_hh_l0"]
        );
    }

    #[test]
    fn a_rename_applies_after_the_standard_rules() {
        let device = Device::default();
        let net = Net {
            encoder: LinearConfig::new(2, 3).init(&device),
            layers: vec![],
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
