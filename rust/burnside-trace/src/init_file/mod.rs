use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use burn::module::Module;

use crate::safetensors_file::Deferred;
use crate::{
    FORMAT_VERSION, HostTensor, SafetensorsFile, TorchNames, TraceError, param_paths_with,
};

mod batches;
mod load;
#[cfg(test)]
mod tests;

pub(crate) use load::{Source, load_tensors};
#[cfg(test)]
pub(crate) use tests::init_with;

/// A starting point written by `burnside.torch.export_init` or `burnside check`: `params.{path}`
/// in PyTorch names and layout, `inputs.{name}` the (first) batch, `step{k}.inputs.{name}` the
/// batch of step k >= 1 when the PyTorch side fed one per step, metadata `burnside.format = init`.
#[derive(Debug, Clone)]
pub struct InitFile {
    file: SafetensorsFile,
    /// The parameters (`params.*`), left on disk until a port asks for them ([`param`](Self::param),
    /// [`load_module`](Self::load_module)): a port that loads its own checkpoint never holds them (a
    /// 1.24 B-parameter model's are 5 GB).
    deferred: BTreeMap<String, Deferred>,
    source: Arc<std::fs::File>,
    params: OnceLock<Result<BTreeMap<String, HostTensor>, String>>,
    names: TorchNames,
    /// Metadata `full_steps`: the steps the PyTorch side recorded in full (absent: every step).
    full_steps: Option<Vec<usize>>,
    /// Metadata `layer_statistics`: layer inputs and activations recorded as statistics.
    layer_statistics: bool,
    /// Metadata `params_statistics`: a forward trace's parameters recorded as statistics (the
    /// file then holds no `params.*`: the port loads the checkpoint).
    params_statistics: bool,
    /// Metadata `constant_buffers`: the buffers the PyTorch run never changed (a positional table, a causal
    /// mask): a port may compute them inline, so loading leaves those it has no place for unused.
    constant_buffers: BTreeSet<String>,
}

impl InitFile {
    /// Read an init file, refusing anything that is not `burnside.format = init`, version 1.
    pub fn read(path: impl AsRef<Path>) -> Result<Self, TraceError> {
        let (file, deferred, source) =
            SafetensorsFile::read_deferring(path, &|name| name.starts_with("params."))?;
        let format = file.meta("burnside.format")?;
        if format != "init" {
            return Err(TraceError::Format {
                path: file.path.clone(),
                message: format!(
                    "burnside.format is `{format}`, expected `init` (an init file from burnside.torch.export_init)"
                ),
            });
        }
        let version = file.meta("burnside.version")?;
        if version != FORMAT_VERSION {
            return Err(TraceError::Format {
                path: file.path.clone(),
                message: format!(
                    "burnside.version {version} is not one this burnside-trace reads (it reads {FORMAT_VERSION})"
                ),
            });
        }
        let bad = |key: &str, value: &str, expected: &str| TraceError::Format {
            path: file.path.clone(),
            message: format!("metadata `{key}` is `{value}`, expected {expected}; re-export it"),
        };
        let full_steps = match file.metadata.get("full_steps") {
            None => None,
            Some(text) => {
                let steps: Vec<usize> = serde_json::from_str(text).map_err(|_| {
                    bad(
                        "full_steps",
                        text,
                        "a JSON list of step indices (0, 1, ...)",
                    )
                })?;
                if steps.windows(2).any(|w| w[0] >= w[1]) {
                    return Err(bad("full_steps", text, "step indices in ascending order"));
                }
                Some(steps)
            }
        };
        let layer_statistics = match file.metadata.get("layer_statistics").map(String::as_str) {
            None | Some("false") => false,
            Some("true") => true,
            Some(text) => return Err(bad("layer_statistics", text, "`true` or `false`")),
        };
        let params_statistics = match file.metadata.get("params_statistics").map(String::as_str) {
            None | Some("false") => false,
            Some("true") => true,
            Some(text) => return Err(bad("params_statistics", text, "`true` or `false`")),
        };
        let constant_buffers = match file.metadata.get("constant_buffers") {
            None => BTreeSet::new(),
            Some(text) => serde_json::from_str::<Vec<String>>(text)
                .map_err(|_| bad("constant_buffers", text, "a JSON list of buffer names"))?
                .into_iter()
                .collect(),
        };
        Ok(Self {
            file,
            deferred,
            source,
            params: OnceLock::new(),
            names: TorchNames::new(),
            full_steps,
            layer_statistics,
            params_statistics,
            constant_buffers,
        })
    }

    /// Whether the PyTorch side recorded a forward trace's parameters as statistics (metadata
    /// `params_statistics`; false when absent): [`Inference`](crate::Inference) records them so
    /// too (the load check compares their hashes), and the file holds no `params.*` to load.
    pub fn params_statistics(&self) -> bool {
        self.params_statistics
    }

    /// The steps the PyTorch side recorded in full (metadata `full_steps`, ascending), the others
    /// as statistics; `None` when every step is full. [`Training`](crate::Training) records the
    /// same steps the same way.
    pub fn full_steps(&self) -> Option<Vec<usize>> {
        self.full_steps.clone()
    }

    /// Whether the PyTorch side recorded the layers' inputs and activations of every step as
    /// statistics (metadata `layer_statistics`; false when absent).
    pub fn layer_statistics(&self) -> bool {
        self.layer_statistics
    }

    /// The initial value of parameter `path` in PyTorch layout, if the file has it.
    pub fn param(&self, path: &str) -> Option<&HostTensor> {
        let key = format!("params.{path}");
        (self.file.tensors.get(&key)).or_else(|| self.deferred_params().ok()?.get(&key))
    }

    /// The parameters left on disk, read once, when first asked for.
    fn deferred_params(&self) -> Result<&BTreeMap<String, HostTensor>, TraceError> {
        let read = || -> Result<BTreeMap<String, HostTensor>, String> {
            (self.deferred.iter())
                .map(|(name, place)| {
                    let tensor = place
                        .read(&self.source)
                        .map_err(|e| format!("reading `{name}`: {e}"))?;
                    Ok((name.clone(), tensor))
                })
                .collect()
        };
        (self.params.get_or_init(read).as_ref()).map_err(|message| TraceError::Format {
            path: self.file.path.clone(),
            message: message.clone(),
        })
    }

    /// Refuse an init file `burnside check` made from the other kind of PyTorch trace: `kind` is
    /// `training` (for [`Training`](crate::Training)) or `forward` (for [`Inference`](crate::Inference)).
    /// A file without the key (`burnside.torch.export_init`) serves both.
    pub(crate) fn check_kind(&self, kind: &str) -> Result<(), TraceError> {
        let made_from = match self.file.metadata.get("kind") {
            Some(made_from) if made_from != kind => made_from.as_str(),
            _ => return Ok(()),
        };
        let (theirs, recorder, other) = if made_from == "forward" {
            (
                "a forward trace (burnside.torch.record_forward)",
                "Inference",
                "Training",
            )
        } else {
            (
                "a training trace (burnside.torch.record)",
                "Training",
                "Inference",
            )
        };
        Err(TraceError::Format {
            path: self.file.path.clone(),
            message: format!(
                "this init file comes from {theirs}, which a port checks with burnside_trace::{recorder}, \
                 not {other}: record the PyTorch side the way the port runs (record_forward for a forward \
                 pass, record for training steps)"
            ),
        })
    }

    /// Use `names` (the port's renames, the same value given to
    /// [`TraceRecorder::with_names`](crate::TraceRecorder::with_names)) to pair the module's
    /// tensors with the file's.
    pub fn with_names(mut self, names: TorchNames) -> Self {
        self.names = names;
        self
    }

    /// The initial value of buffer `name` (`bn.running_mean`) in the file, if it has it.
    pub fn buffer(&self, name: &str) -> Option<&HostTensor> {
        self.file.tensors.get(&format!("buffers.{name}"))
    }

    /// Replace every float parameter of `module` by the file's `params.{name}` and every
    /// running statistic by `buffers.{name}`, bit for bit, in burn's names and layout (burn-store's
    /// `PyTorchToBurnAdapter`: `Linear` weights transposed, norm layers' `weight`/`bias` as
    /// `gamma`/`beta`, PyTorch's packed RNN tensors cut into burn's gates, plus the renames of
    /// [`with_names`](Self::with_names)). Parameter ids,
    /// devices and `require_grad` are kept.
    ///
    /// Every parameter must be in the file and every tensor of the file must be used, with the
    /// right shape; otherwise the error lists every missing and every unused tensor at once,
    /// each missing one with the closest unused name. A buffer the file does not hold keeps the
    /// module's own initial value, PyTorch's `num_batches_tracked`, which burn does not keep, is
    /// not required to be used, nor is a constant buffer (metadata `constant_buffers`: one the
    /// PyTorch run never changed, such as a positional table) the module has no place for: the
    /// port computes it inline or reads it with [`buffer`](Self::buffer).
    pub fn load_module<M: Module>(&self, module: M) -> Result<M, TraceError> {
        if self.params_statistics {
            return Err(TraceError::Format {
                path: self.file.path.clone(),
                message: "holds no parameters: the PyTorch trace recorded them as statistics \
                          (`record_forward(..., statistics=True)`, the default from 50,000,000 \
                          parameters); load the model from its checkpoint (burn-store's \
                          PytorchStore), or record the trace with `statistics=False`"
                    .to_string(),
            });
        }
        let held: BTreeSet<String> = param_paths_with(&module, &self.names)
            .into_iter()
            .map(|entry| entry.torch)
            .collect();
        let deferred = self.deferred_params()?;
        let all: BTreeMap<&String, &HostTensor> =
            self.file.tensors.iter().chain(deferred).collect();
        let tensors = all.into_iter().filter_map(|(key, value)| {
            let (kind, name) = key.split_once('.')?;
            let constant =
                kind == "buffers" && self.constant_buffers.contains(name) && !held.contains(name);
            ((kind == "params" || kind == "buffers") && !constant).then_some((name, value))
        });
        load_tensors(module, tensors, &self.names, &Source::INIT).map_err(|message| {
            TraceError::Format {
                path: self.file.path.clone(),
                message,
            }
        })
    }
}
