use burn::module::{Module, ModuleVisitor, Param, ParamId};
use burn::tensor::Tensor;

use crate::{HostTensor, TraceError};

/// One float parameter of a module: its id, its path and whether burn stores it transposed.
#[derive(Debug, Clone, PartialEq)]
pub struct ParamEntry {
    /// The parameter's id, which the optimizer and `GradientsParams` key on.
    pub id: ParamId,
    /// The module's field path, e.g. `fc1.weight` (PyTorch's name for a faithful port).
    pub path: String,
    /// A `Linear` weight: burn `[in, out]`, PyTorch `[out, in]`.
    pub linear_weight: bool,
}

impl ParamEntry {
    /// Bring a tensor shaped like this parameter in burn (its value, a gradient, a moment) to
    /// PyTorch layout.
    pub fn to_torch_layout(&self, tensor: HostTensor) -> HostTensor {
        if self.linear_weight {
            tensor.transposed()
        } else {
            tensor
        }
    }
}

/// Every float parameter of `module` in module order, with its field path (no data copied).
pub fn param_paths<M: Module>(module: &M) -> Vec<ParamEntry> {
    let mut visitor = PathVisitor {
        stack: Vec::new(),
        entries: Vec::new(),
        values: None,
    };
    module.visit(&mut visitor);
    visitor.entries
}

/// Every float parameter of `module` in module order with its value in PyTorch layout.
pub fn param_values<M: Module>(module: &M) -> Result<Vec<(ParamEntry, HostTensor)>, TraceError> {
    let mut visitor = PathVisitor {
        stack: Vec::new(),
        entries: Vec::new(),
        values: Some(Vec::new()),
    };
    module.visit(&mut visitor);
    let values = visitor
        .values
        .unwrap_or_default()
        .into_iter()
        .collect::<Result<Vec<_>, _>>()?;
    Ok(visitor
        .entries
        .into_iter()
        .zip(values)
        .map(|(entry, value)| {
            let value = entry.to_torch_layout(value);
            (entry, value)
        })
        .collect())
}

/// Walks a module keeping the stack of field names and the types that declare them.
struct PathVisitor {
    stack: Vec<(String, String)>,
    entries: Vec<ParamEntry>,
    /// The values in burn layout, when asked for.
    values: Option<Vec<Result<HostTensor, TraceError>>>,
}

impl PathVisitor {
    fn path(&self) -> String {
        self.stack
            .iter()
            .map(|(name, _)| name.as_str())
            .collect::<Vec<_>>()
            .join(".")
    }
}

impl ModuleVisitor for PathVisitor {
    fn enter_module(&mut self, name: &str, container_type: &str) {
        self.stack
            .push((name.to_string(), container_type.to_string()));
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.stack.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.entries.push(ParamEntry {
            id: param.id,
            path: self.path(),
            linear_weight: is_linear_weight(&self.stack, D),
        });
        if let Some(values) = self.values.as_mut() {
            values.push(HostTensor::from_data(param.val().into_data()));
        }
    }
}

/// Whether the innermost field is `weight` of a `Struct:Linear` and the tensor is 2-d.
///
/// burn's derive calls `enter_module(field, container)` with the type of the struct that
/// *declares* the field, so a Linear weight arrives as `("weight", "Struct:Linear")`.
pub(crate) fn is_linear_weight(stack: &[(String, String)], rank: usize) -> bool {
    matches!(stack.last(), Some((name, container)) if rank == 2 && name == "weight" && container == "Struct:Linear")
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{Linear, LinearConfig};
    use burn::tensor::Device;

    #[derive(Module, Debug)]
    struct Net {
        encoder: Linear,
        layers: Vec<Linear>,
        scale: Param<Tensor<2>>,
    }

    #[test]
    fn paths_follow_fields_and_mark_only_linear_weights() {
        let device = Device::default();
        let net = Net {
            encoder: LinearConfig::new(2, 3).init(&device),
            layers: vec![LinearConfig::new(3, 3).with_bias(false).init(&device)],
            scale: Param::from_tensor(Tensor::zeros([2, 2], &device)),
        };
        let entries = param_paths(&net);
        let names: Vec<(&str, bool)> = entries
            .iter()
            .map(|e| (e.path.as_str(), e.linear_weight))
            .collect();
        assert_eq!(
            names,
            vec![
                ("encoder.weight", true),
                ("encoder.bias", false),
                ("layers.0.weight", true),
                ("scale", false)
            ]
        );
        let values = param_values(&net).unwrap();
        assert_eq!(values[0].0, entries[0]);
        assert_eq!(values[0].1.shape, vec![3, 2], "PyTorch layout");
        assert_eq!(net.encoder.weight.val().dims(), [2, 3], "burn layout");
    }
}
