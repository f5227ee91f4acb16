//! Where the recorded tensors live and what float type they hold, seen on the tensors themselves:
//! the trace's `device` and `dtype` metadata.

use std::collections::BTreeSet;

use burn::module::{Module, ModuleVisitor, Param};
use burn::tensor::{DType, Device, Tensor};

/// The devices and float dtypes of the tensors a recorder was given: the parameters' (what the
/// trace format's `dtype` means), and the other float tensors' (logits, loss, activations) for a
/// module without parameters.
#[derive(Debug, Clone, Default)]
pub(crate) struct RecordedOn {
    params: Seen,
    others: Seen,
}

#[derive(Debug, Clone, Default)]
struct Seen {
    devices: BTreeSet<String>,
    dtypes: BTreeSet<String>,
}

impl Seen {
    fn add<const D: usize>(&mut self, tensor: &Tensor<D>) {
        self.devices.insert(device_name(&tensor.device()));
        self.dtypes.insert(dtype_name(tensor.dtype()));
    }
}

impl RecordedOn {
    /// Note the device and dtype of every float parameter of `module` (buffers included: they
    /// live where the parameters do).
    pub(crate) fn params<M: Module>(&mut self, module: &M) {
        module.visit(&mut ParamsOn(&mut self.params));
    }

    /// Note the device and dtype of a float tensor other than a parameter.
    pub(crate) fn tensor<const D: usize>(&mut self, tensor: &Tensor<D>) {
        self.others.add(tensor);
    }

    /// The trace's `device`: the parameters' device (several, comma-separated, if they are on
    /// more than one), or the other tensors' if there are no parameters.
    pub(crate) fn device(&self) -> Option<String> {
        joined(&self.seen().devices)
    }

    /// The trace's `dtype`: the parameters' float dtype (`float32`; several, comma-separated, if
    /// they differ), or the other tensors' if there are no parameters.
    pub(crate) fn dtype(&self) -> Option<String> {
        joined(&self.seen().dtypes)
    }

    fn seen(&self) -> &Seen {
        if self.params.devices.is_empty() {
            &self.others
        } else {
            &self.params
        }
    }
}

fn joined(names: &BTreeSet<String>) -> Option<String> {
    (!names.is_empty()).then(|| names.iter().cloned().collect::<Vec<_>>().join(","))
}

struct ParamsOn<'a>(&'a mut Seen);

impl ModuleVisitor for ParamsOn<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        self.0.add(&param.val());
    }
}

/// A device by its burn backend, without autodiff (which says how gradients are kept, not where
/// the tensor is): `flex` for burn's Flex CPU backend, the device burn's `Debug` shows for any
/// other (`cube:Cuda(CudaDevice { index: 0 })`).
pub(crate) fn device_name(device: &Device) -> String {
    // burn 0.22.1 shows a device as `Device<Backend(device)>`, e.g. `Device<Flex(Cpu)>`; its
    // backend enum (burn-dispatch's `DispatchDevice`) is not re-exported by burn to match on.
    let shown = format!("{:?}", device.clone().inner());
    let inner = shown
        .strip_prefix("Device<")
        .and_then(|s| s.strip_suffix('>'))
        .unwrap_or(&shown);
    match inner.split_once('(') {
        Some((backend, rest)) => {
            let own = rest.strip_suffix(')').unwrap_or(rest);
            let backend = backend.to_lowercase();
            // a CPU backend has one device, named `Cpu`: the backend says it all
            if own == "Cpu" {
                backend
            } else {
                format!("{backend}:{own}")
            }
        }
        None => inner.to_lowercase(),
    }
}

/// A float dtype by PyTorch's name for it (`float32`), as the PyTorch recorder writes its own.
pub(crate) fn dtype_name(dtype: DType) -> String {
    match dtype {
        DType::F64 => "float64".to_string(),
        DType::F32 => "float32".to_string(),
        DType::F16 => "float16".to_string(),
        DType::BF16 => "bfloat16".to_string(),
        // burn's f32 storage whose arithmetic may run in less: not PyTorch's float32
        DType::Flex32 => "flex32".to_string(),
        other => format!("{other:?}").to_lowercase(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::LinearConfig;

    #[test]
    fn the_flex_device_is_flex_with_autodiff_or_without() {
        assert_eq!(device_name(&Device::default()), "flex");
        assert_eq!(device_name(&Device::default().autodiff()), "flex");
        assert_eq!(device_name(&Device::flex()), "flex");
    }

    #[test]
    fn the_parameters_say_the_device_and_dtype_and_other_tensors_only_without_parameters() {
        let device = Device::default().autodiff();
        let mut on = RecordedOn::default();
        assert_eq!((on.device(), on.dtype()), (None, None));
        on.tensor(&Tensor::<1>::zeros([2], &device).cast(DType::F64));
        assert_eq!(on.dtype().as_deref(), Some("float64"));
        on.params(&LinearConfig::new(2, 3).init(&device));
        assert_eq!(on.device().as_deref(), Some("flex"));
        assert_eq!(on.dtype().as_deref(), Some("float32"));
        assert_eq!(dtype_name(DType::BF16), "bfloat16");
    }
}
