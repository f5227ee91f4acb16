//! The module visitor that lists a burn module's float tensors (parameters and BatchNorm's
//! running statistics) in module order, each with its burn path, its PyTorch name and, on
//! request, its value in PyTorch layout.

use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::store::bridge;
use burn::store::burn_pack::Error as PackError;
use burn::store::burn_pack::Tensor as PackTensor;
use burn::tensor::{DType, Tensor, TensorData};

use crate::packed::{Part, packed_name};
use crate::{HostDType, HostTensor, TorchNames, TraceError};

/// One float tensor of a module, a parameter or a running-statistics buffer, with its burn path
/// and its PyTorch name.
#[derive(Debug, Clone, PartialEq)]
pub(crate) struct ParamEntry {
    /// The parameter's id, which the optimizer and `GradientsParams` key on.
    pub(crate) id: ParamId,
    /// The module's field path, e.g. `bn.gamma`.
    pub(crate) path: String,
    /// PyTorch's name for it, e.g. `bn.weight`: the name in traces and init files.
    pub(crate) torch: String,
    /// A buffer (BatchNorm's `running_mean` / `running_var`, burn `RunningState`), not trained.
    pub(crate) buffer: bool,
    /// The slice of `torch` this tensor is, if PyTorch packs it with others (an RNN's gates,
    /// an attention's query, key and value).
    pub(crate) part: Option<Part>,
    /// The types of the structs declaring each field on the path, which decide the layout.
    containers: Vec<String>,
}

/// What PyTorch's layout of a burn tensor is, as burn-store's adapter and the port's renames
/// make it (found by [`ParamEntry::layout`]).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Layout {
    /// The same elements in the same order.
    Same,
    /// The 2-d transpose (a `Linear` weight).
    Transposed,
    /// Anything else: the tensor goes through burn-store itself.
    Other,
}

impl ParamEntry {
    /// Bring a tensor shaped like this parameter in burn (its value, a gradient, a moment) to
    /// PyTorch layout (`Linear` weights transposed, everything else as is).
    pub(crate) fn to_torch_layout(
        &self,
        tensor: HostTensor,
        names: &TorchNames,
    ) -> Result<HostTensor, TraceError> {
        match self.layout(tensor.shape.len(), names) {
            Layout::Same => Ok(tensor),
            Layout::Transposed => Ok(tensor.transpose_2d()),
            Layout::Other => self.through_store(tensor.to_data(), names),
        }
    }

    /// A burn tensor shaped like this parameter (its value, a gradient), on the host in PyTorch
    /// layout: one copy, or one transposing pass, of bytes read in place where the backend keeps
    /// them on the host.
    pub(crate) fn torch_value<const D: usize>(
        &self,
        tensor: &Tensor<D>,
        names: &TorchNames,
    ) -> Result<HostTensor, TraceError> {
        match self.layout(D, names) {
            Layout::Same => HostTensor::of(tensor),
            Layout::Transposed => HostTensor::transposed_of(tensor),
            Layout::Other => self.through_store(tensor.to_data(), names),
        }
    }

    /// Bytes of a tensor of `dtype` shaped like this parameter in burn (a moment out of the
    /// optimizer's record), on the host in PyTorch layout: one copy, or one transposing pass.
    pub(crate) fn torch_value_from(
        &self,
        dtype: HostDType,
        shape: &[usize],
        bytes: &[u8],
        names: &TorchNames,
    ) -> Result<HostTensor, TraceError> {
        let copied = || HostTensor::copied(dtype, shape, bytes);
        match self.layout(shape.len(), names) {
            Layout::Same => Ok(copied()),
            // `layout` finds a transpose of 2-d tensors only
            Layout::Transposed => {
                Ok(HostTensor::transposed_from(dtype, shape, bytes).unwrap_or_else(copied))
            }
            Layout::Other => self.through_store(copied().to_data(), names),
        }
    }

    /// `data` in PyTorch layout by burn-store's adapter (`to_torch`), data and all.
    fn through_store(
        &self,
        data: TensorData,
        names: &TorchNames,
    ) -> Result<HostTensor, TraceError> {
        let packed = bridge::from_data(data, self.path.clone(), None);
        // Only the layout matters here: the name is the entry's.
        let packed = names.to_torch(packed, &self.containers, None);
        host(packed, &self.torch)
    }

    /// The layout change `to_torch` (burn-store's adapter, then the renames) makes to a tensor of
    /// rank `rank` of this parameter, found by passing it a small probe of that rank (dimensions
    /// 2, 3, ..., elements numbered): burn-store decides by the layer type, the name and the rank,
    /// so the probe's fate is the tensor's, and the tensor itself is moved once, not element by
    /// element through burn-store's transpose and its copies.
    fn layout(&self, rank: usize, names: &TorchNames) -> Layout {
        let dims: Vec<usize> = (2..rank + 2).collect();
        let n: usize = dims.iter().product();
        let numbered: Vec<f32> = (0..n).map(|i| i as f32).collect();
        let probe = TensorData::new(numbered.clone(), dims.clone());
        let packed = names.to_torch(
            bridge::from_data(probe, self.path.clone(), None),
            &self.containers,
            None,
        );
        let Ok(out) = bridge::into_data(packed) else {
            return Layout::Other;
        };
        let Ok(values) = out.try_to_vec::<f32>() else {
            return Layout::Other;
        };
        if out.shape().as_slice() == dims.as_slice() && values == numbered {
            return Layout::Same;
        }
        if let &[rows, cols] = dims.as_slice()
            && out.shape().as_slice() == [cols, rows]
            && values
                .iter()
                .enumerate()
                .all(|(i, v)| *v == ((i % rows) * cols + i / rows) as f32)
        {
            return Layout::Transposed;
        }
        Layout::Other
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
#[cfg(test)]
pub(crate) fn param_paths<M: Module>(module: &M) -> Vec<ParamEntry> {
    param_paths_with(module, &TorchNames::new())
}

/// Every float tensor of `module` in module order, named by `names`.
pub(crate) fn param_paths_with<M: Module>(module: &M, names: &TorchNames) -> Vec<ParamEntry> {
    let mut visitor = PathVisitor {
        names,
        stack: Vec::new(),
        entries: Vec::new(),
    };
    module.visit(&mut visitor);
    visitor.entries
}

/// Every float tensor of `module` in module order with its value in PyTorch name and layout
/// (the slices of a packed tensor stacked into one, listed with its first slice's entry).
#[cfg(test)]
pub(crate) fn param_values<M: Module>(
    module: &M,
    names: &TorchNames,
) -> Result<Vec<(ParamEntry, HostTensor)>, TraceError> {
    let entries = param_paths_with(module, names);
    let mut visitor = ValuesVisitor::default();
    module.visit(&mut visitor);
    let values = (visitor.found.into_iter())
        .map(|(index, read)| Ok((entries[index].clone(), read(&entries[index], names)?)))
        .collect::<Result<Vec<_>, TraceError>>()?;
    crate::pack_parts(values)
}

/// Reads one tensor (a parameter's value, its gradient) to the host in PyTorch layout, given its
/// parameter's entry.
pub(crate) type HostRead = dyn FnOnce(&ParamEntry, &TorchNames) -> Result<HostTensor, TraceError>;

/// Every float tensor of a module (parameters and running statistics) in module order, by its
/// index in the order `param_paths_with` lists them, each read to the host only when asked: the
/// tensor's handle, not its data.
#[derive(Default)]
pub(crate) struct ValuesVisitor {
    index: usize,
    pub(crate) found: Vec<(usize, Box<HostRead>)>,
}

impl ModuleVisitor for ValuesVisitor {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        let value = param.val();
        let read = move |entry: &ParamEntry, names: &TorchNames| entry.torch_value(&value, names);
        self.found.push((self.index, Box::new(read)));
        self.index += 1;
    }
}

/// Walks a module keeping the stack of field names and the types that declare them.
struct PathVisitor<'a> {
    names: &'a TorchNames,
    stack: Vec<(String, String)>,
    entries: Vec<ParamEntry>,
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
        // Deferred: no data is read for the name. A parameter not yet initialized (a module just
        // built, about to be loaded) is named from its shape, which burn knows without running
        // its initializer: `param.val()` would fill it with random values first, at GPT-2 size
        // 2 s of every port's loading, only to be overwritten. The name and the layout depend on
        // the path, the layer types and the rank, not on the dtype.
        let packed = if !param.is_initialized() {
            let id = Some(param.id.val());
            bridge::deferred(path.clone(), DType::F32, param.lazy_shape(), id, || {
                Err(PackError::ValidationError(
                    "a lazy parameter named, never read".to_string(),
                ))
            })
        } else {
            bridge::from_tensor(&param.val(), path.clone(), Some(param.id.val()))
        };
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
}
