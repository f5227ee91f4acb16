//! Loading a PyTorch checkpoint (`.pt`/`.pth` or `.safetensors` `state_dict`) into a burn module
//! with the rules of [`InitFile::load_module`](crate::InitFile::load_module), the files read by
//! burn-store's own readers.

use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;

use burn::module::Module;
use burn::store::{ModuleStore, PytorchStore, SafetensorsStore, bridge, map_indices_contiguous};

use crate::init_file::{Source, load_tensors};
use crate::param_paths::param_paths_with;
use crate::{HostTensor, TorchNames, TraceError};

/// Load the PyTorch checkpoint at `path` into `module`: the `state_dict` PyTorch saved
/// (`torch.save(model.state_dict(), "model.pt")`, `.pt`/`.pth`, or a `.safetensors` of it), read by
/// burn-store's `PytorchStore` / `SafetensorsStore`, loaded with the rules of
/// [`InitFile::load_module`](crate::InitFile::load_module): `Linear` weights transposed, norm
/// layers' `weight`/`bias` as `gamma`/`beta`, BatchNorm's running statistics, and PyTorch's
/// packed tensors cut into burn's (an `nn.GRU`/`nn.LSTM`'s `weight_ih_l0` into the gates of
/// burn's `Gru`/`Lstm`, an `nn.MultiheadAttention`'s `in_proj_weight` into query, key and value),
/// which burn-store alone does not load.
///
/// Every parameter must be in the checkpoint and every tensor of the checkpoint used, with the
/// right shape (burn-store alone does not fail on an unused tensor); otherwise the error lists
/// every missing and every unused tensor, each missing one with the closest unused name.
///
/// ```no_run
/// # use burn::nn::{Gru, GruConfig};
/// # use burn::tensor::Device;
/// # fn main() -> Result<(), burnside_trace::TraceError> {
/// let device = Device::default();
/// let gru: Gru = burnside_trace::load_pytorch_checkpoint(
///     GruConfig::new(6, 5, true).init(&device),
///     "gru.pt", // torch.save(nn.GRU(6, 5).state_dict(), "gru.pt")
/// )?;
/// # Ok(()) }
/// ```
pub fn load_pytorch_checkpoint<M: Module>(
    module: M,
    path: impl AsRef<Path>,
) -> Result<M, TraceError> {
    load_pytorch_checkpoint_with(module, path, &TorchNames::new())
}

/// [`load_pytorch_checkpoint`] with the port's renames (the same `names` given to
/// [`Inference::with_names`](crate::Inference::with_names)).
pub fn load_pytorch_checkpoint_with<M: Module>(
    module: M,
    path: impl AsRef<Path>,
    names: &TorchNames,
) -> Result<M, TraceError> {
    let path = path.as_ref();
    let (tensors, contiguous) = read_checkpoint(path)?;
    let source = Source {
        what: "checkpoint",
        with_names: "`load_pytorch_checkpoint_with(module, path, &names)`",
    };
    // The file's names as PyTorch saved them (as the trace and the init file have them), each read
    // under its contiguous name instead where the port holds that one and not PyTorch's: a port that
    // mirrors an `nn.Sequential` with gaps (Linear at 0 and 3, a ReLU and a Dropout between) as a
    // `Vec<Linear>` holds `fc.0` and `fc.1` for PyTorch's `fc.0` and `fc.3`.
    let expected: BTreeSet<String> = param_paths_with(&module, names)
        .into_iter()
        .map(|e| e.torch)
        .collect();
    load_tensors(
        module,
        tensors.iter().map(|(name, value)| {
            let name = match contiguous.get(name) {
                Some(other) if !expected.contains(name) && expected.contains(other) => other,
                _ => name,
            };
            (name.as_str(), value)
        }),
        names,
        &source,
    )
    .map_err(|message| TraceError::Format {
        path: path.to_path_buf(),
        message,
    })
}

/// A checkpoint's tensors by name.
type Tensors = BTreeMap<String, HostTensor>;
/// Names burn-store's contiguous mapping renumbers, each with the name it gives it.
type Renumbered = BTreeMap<String, String>;

/// The tensors of the checkpoint at `path` by their `state_dict` names, read by burn-store, and
/// each name whose list indices burn-store's contiguous mapping renumbers, with its renumbered name.
fn read_checkpoint(path: &Path) -> Result<(Tensors, Renumbered), TraceError> {
    let format = |message: String| TraceError::Format {
        path: path.to_path_buf(),
        message,
    };
    match std::fs::metadata(path) {
        Err(source) => {
            return Err(TraceError::Io {
                path: path.to_path_buf(),
                source,
            });
        }
        Ok(meta) if meta.is_dir() => {
            return Err(format(
                "it is a directory, not a checkpoint file".to_string(),
            ));
        }
        Ok(_) => {}
    }
    let extension = path
        .extension()
        .map(|e| e.to_string_lossy().to_lowercase())
        .unwrap_or_default();
    // burn-store renumbers a `.pt` file's list indices to be contiguous unless told not to (and a
    // `.safetensors` file's only when told): read as saved, the renumbering kept apart
    let (tensors, contiguous) = match extension.as_str() {
        "safetensors" => {
            let mut store = SafetensorsStore::from_file(path).map_indices_contiguous(false);
            let tensors = store
                .get_all_tensors()
                .map_err(|e| format(format!("not a readable safetensors checkpoint: {e}")))?;
            (host_tensors(tensors)?, renumbered(tensors))
        }
        "pt" | "pth" | "bin" => {
            let mut store = PytorchStore::from_file(path).map_indices_contiguous(false);
            let tensors = store
                .get_all_tensors()
                .map_err(|e| format(format!("not a readable PyTorch checkpoint: {e}")))?;
            (host_tensors(tensors)?, renumbered(tensors))
        }
        _ => {
            return Err(format(
                "a checkpoint is a `.pt`/`.pth` (torch.save of a state_dict) or a `.safetensors` file"
                    .to_string(),
            ));
        }
    };
    if tensors.is_empty() {
        return Err(format("the checkpoint holds no tensor".to_string()));
    }
    Ok((tensors, contiguous))
}

/// Each name burn-store's `map_indices_contiguous` renumbers (`fc.3.weight`), with the name it
/// gives it (`fc.1.weight`).
fn renumbered(tensors: &BTreeMap<String, burn::store::burn_pack::Tensor>) -> Renumbered {
    let (_, transformations) = map_indices_contiguous(tensors.values().cloned().collect());
    transformations
        .into_iter()
        .filter(|(new, original)| new != original)
        .map(|(new, original)| (original, new))
        .collect()
}

fn host_tensors(
    tensors: &BTreeMap<String, burn::store::burn_pack::Tensor>,
) -> Result<BTreeMap<String, HostTensor>, TraceError> {
    tensors
        .iter()
        .map(|(name, tensor)| {
            let data = bridge::into_data(tensor.clone()).map_err(|e| TraceError::Mismatch {
                name: name.clone(),
                message: format!("cannot read the checkpoint's tensor: {e:?}"),
            })?;
            let value = HostTensor::from_data(data).map_err(|e| match e {
                TraceError::Mismatch { message, .. } => TraceError::Mismatch {
                    name: name.clone(),
                    message,
                },
                other => other,
            })?;
            Ok((name.clone(), value))
        })
        .collect()
}
