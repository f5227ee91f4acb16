use std::collections::{BTreeMap, BTreeSet};
use std::path::Path;
use std::sync::{Arc, OnceLock};

use burn::module::Module;
use burn::store::{ApplyError, ModuleSnapshot, PyTorchToBurnAdapter, bridge};
use burn::tensor::{DType, Device, Int, IntDType, Tensor};

use crate::packed::cut_parts;
use crate::safetensors_file::Deferred;
use crate::torch_names::torch_leaf_of;
use crate::{
    FORMAT_VERSION, HostDType, HostTensor, ParamEntry, SafetensorsFile, TorchNames, TraceError,
    param_paths_with,
};

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

    /// The names of the inputs (`x`, `y`, ...).
    pub fn input_names(&self) -> Vec<&str> {
        self.file
            .tensors
            .keys()
            .filter_map(|k| k.strip_prefix("inputs."))
            .collect()
    }

    /// How many batches the file holds: 1 when one batch (`inputs.*`) feeds every step, N when
    /// the PyTorch side fed a different batch at each of its N steps (`inputs.*` for step 0,
    /// `step{k}.inputs.*` for step k >= 1) or recorded its layers' inputs for N forward passes
    /// (`step{k}.layer_inputs.*`, an init file made from a forward trace).
    pub fn batches(&self) -> usize {
        self.file
            .tensors
            .keys()
            .filter_map(|k| step_of(k, "inputs.").or_else(|| step_of(k, "layer_inputs.")))
            .max()
            .map_or(1, |last| last + 1)
    }

    /// How many batches of inputs the file holds (1: `inputs.*` feeds every step).
    fn input_batches(&self) -> usize {
        self.file
            .tensors
            .keys()
            .filter_map(|k| step_of(k, "inputs."))
            .max()
            .map_or(1, |last| last + 1)
    }

    /// Refuse `count` forward passes or steps where the file holds fewer batches than that, one
    /// per pass (a file with one batch feeds it to every pass, as it feeds every training step).
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

    pub(crate) fn check_batches(&self, count: usize, flag: &str) -> Result<(), TraceError> {
        let batches = self.batches();
        if count > batches && batches > 1 {
            return Err(TraceError::Format {
                path: self.file.path.clone(),
                message: format!(
                    "{flag} {count} asks for more batches than the file's {batches} (batch 0 to \
                     batch {}); run the port for as many batches as the PyTorch trace has",
                    batches - 1
                ),
            });
        }
        Ok(())
    }

    /// Input `name` of the batch step `step` trains on, as the file holds it: step 0's
    /// `inputs.{name}` for every step when the file has one batch, otherwise
    /// `step{step}.inputs.{name}`.
    pub fn input_at(&self, step: usize, name: &str) -> Result<&HostTensor, TraceError> {
        let batches = self.batches();
        let inputs = self.input_batches();
        if step >= batches && batches > 1 {
            return Err(TraceError::Format {
                path: self.file.path.clone(),
                message: format!(
                    "no batch for step {step}: the file holds one batch per step for {batches} steps \
                     (step 0 to step {}); run the port for as many steps as the PyTorch trace has",
                    batches - 1
                ),
            });
        }
        let key = input_key(if inputs == 1 { 0 } else { step }, name);
        self.file
            .tensors
            .get(&key)
            .ok_or_else(|| TraceError::Format {
                path: self.file.path.clone(),
                message: format!("no tensor `{key}` (inputs here: {:?})", self.input_names()),
            })
    }

    /// Float input `name` of step `step`'s batch (see [`input_at`](Self::input_at)) as a burn
    /// tensor of rank `D` on `device`, bit for bit.
    pub fn float_input_at<const D: usize>(
        &self,
        step: usize,
        name: &str,
        device: &Device,
    ) -> Result<Tensor<D>, TraceError> {
        let input = self.input_at(step, name)?;
        float_tensor(&format!("inputs.{name}"), input, "int_input", device)
    }

    /// Integer input `name` of step `step`'s batch (see [`input_at`](Self::input_at)) as a burn
    /// tensor of rank `D` on `device`.
    pub fn int_input_at<const D: usize>(
        &self,
        step: usize,
        name: &str,
        device: &Device,
    ) -> Result<Tensor<D, Int>, TraceError> {
        let input = self.input_at(step, name)?;
        int_tensor(&format!("inputs.{name}"), input, "float_input", device)
    }

    /// Refuse batch `step`'s integer inputs that `device`'s integers cannot hold, as
    /// [`int_input_at`](Self::int_input_at) on that device would: checked before a forward pass
    /// runs under graph capture, whose device holds them all and whose replay would panic.
    pub(crate) fn check_int_inputs(&self, step: usize, device: &Device) -> Result<(), TraceError> {
        for name in self.input_names() {
            let input = self.input_at(step, name)?;
            if input.dtype == HostDType::I64 {
                check_int_range(
                    &format!("inputs.{name}"),
                    input,
                    device.settings().int_dtype,
                )?;
            }
        }
        Ok(())
    }

    /// The modules whose input the file holds for forward pass `step` (`step{step}.layer_inputs.*`,
    /// what PyTorch fed each module: an init file made from a forward trace), in name order.
    pub fn layer_inputs(&self, step: usize) -> Vec<&str> {
        let prefix = format!("step{}.layer_inputs.", self.layer_step(step));
        self.file
            .tensors
            .keys()
            .filter_map(|k| k.strip_prefix(prefix.as_str()))
            .collect()
    }

    /// The step whose layer inputs forward pass `step` reads: its own, or step 0's when the file
    /// holds one batch (which feeds every pass).
    fn layer_step(&self, step: usize) -> usize {
        if self.batches() == 1 { 0 } else { step }
    }

    /// What PyTorch fed module `module` (its module path, `encoder.gru`) in forward pass `step`:
    /// the file's `step{step}.layer_inputs.{module}` (step 0's for every pass when the file holds
    /// one batch). For layer isolation: feed one layer PyTorch's input to judge it without the
    /// drift of the layers before it. A module the file does not hold is an error naming it and
    /// listing those it holds, the most alike first.
    pub fn layer_input_at(&self, step: usize, module: &str) -> Result<&HostTensor, TraceError> {
        let batches = self.batches();
        if step >= batches && batches > 1 {
            return Err(TraceError::Format {
                path: self.file.path.clone(),
                message: format!(
                    "no layer input for batch {step}: the file holds {batches} batches (batch 0 to batch {})",
                    batches - 1
                ),
            });
        }
        let key = format!("step{}.layer_inputs.{module}", self.layer_step(step));
        if let Some(tensor) = self.file.tensors.get(&key) {
            return Ok(tensor);
        }
        let mut recorded = self.layer_inputs(step);
        let message = if recorded.is_empty() {
            format!(
                "no input of module `{module}` for batch {step}: the file records no layer inputs \
                 (make it from a trace recorded with `burnside.torch.record_forward(..., layer_inputs=True)`)"
            )
        } else {
            // the most alike first, by the whole path or by its last segment (a module moved
            // under another parent keeps its own name)
            let leaf = |s: &str| s.rsplit('.').next().unwrap_or(s).to_string();
            let alike = |c: &str| {
                let whole = textdistance::nstr::jaro_winkler(module, c);
                whole.max(textdistance::nstr::jaro_winkler(&leaf(module), &leaf(c)))
            };
            recorded.sort_by(|a, b| alike(b).total_cmp(&alike(a)));
            format!(
                "no input of module `{module}` for batch {step}; the file records the inputs of: {}",
                recorded
                    .iter()
                    .map(|m| format!("`{m}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        Err(TraceError::Format {
            path: self.file.path.clone(),
            message,
        })
    }

    /// What PyTorch fed module `module` in forward pass `step` (see
    /// [`layer_input_at`](Self::layer_input_at)) as a float burn tensor of rank `D` on
    /// `device`, bit for bit.
    pub fn float_layer_input_at<const D: usize>(
        &self,
        step: usize,
        module: &str,
        device: &Device,
    ) -> Result<Tensor<D>, TraceError> {
        let input = self.layer_input_at(step, module)?;
        float_tensor(
            &format!("layer_inputs.{module}"),
            input,
            "int_layer_input",
            device,
        )
    }

    /// What PyTorch fed module `module` in forward pass `step` as an integer burn tensor of rank
    /// `D` (an embedding's token ids).
    pub fn int_layer_input_at<const D: usize>(
        &self,
        step: usize,
        module: &str,
        device: &Device,
    ) -> Result<Tensor<D, Int>, TraceError> {
        let input = self.layer_input_at(step, module)?;
        int_tensor(
            &format!("layer_inputs.{module}"),
            input,
            "layer_input",
            device,
        )
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

/// Where the tensors a module is loaded from come from, for the messages of [`load_tensors`].
pub(crate) struct Source {
    /// What the file is: `init file`, `checkpoint`.
    pub(crate) what: &'static str,
    /// How a port gives the loading its renames.
    pub(crate) with_names: &'static str,
}

impl Source {
    const INIT: Source = Source {
        what: "init file",
        with_names: "`InitFile::read(..)?.with_names(names.clone())`",
    };
}

/// Replace every float tensor of `module` by the tensor of its PyTorch name in `tensors`
/// (PyTorch names and layout), bit for bit (see [`InitFile::load_module`]); the message lists
/// everything that does not fit, else.
pub(crate) fn load_tensors<'t, M: Module>(
    mut module: M,
    tensors: impl IntoIterator<Item = (&'t str, &'t HostTensor)>,
    names: &TorchNames,
    source: &Source,
) -> Result<M, String> {
    let entries = param_paths_with(&module, names);
    // One PyTorch name, several burn tensors where PyTorch packs them (an RNN's gates).
    let mut by_torch: BTreeMap<&str, Vec<&ParamEntry>> = BTreeMap::new();
    for entry in &entries {
        by_torch
            .entry(entry.torch.as_str())
            .or_default()
            .push(entry);
    }
    // Each float tensor's own dtype: a half file's tensor goes into an f32 (f64) module widened exactly,
    // as the module holds it (burn-store would load it as itself, a bf16 parameter in an f32 model).
    let own: BTreeMap<String, DType> = module
        .collect(None, None, false)
        .into_iter()
        .map(|t| (t.name.clone(), t.dtype))
        .collect();
    let mut loaded = Vec::new();
    let mut unused = Vec::new();
    let mut uncut = Vec::new();
    let mut uncut_names = BTreeSet::new();
    for (name, value) in tensors {
        match by_torch.get(name) {
            Some(group) if value.dtype != HostDType::I64 => match cut_parts(value, group) {
                Some(parts) => {
                    for (entry, part) in parts {
                        let mut data = part.to_data();
                        if let Some(&dtype) = own.get(&entry.path)
                            && dtype.is_float()
                            && dtype != data.dtype()
                            && matches!(part.dtype, HostDType::BF16 | HostDType::F16)
                        {
                            data = data.convert_dtype(dtype);
                        }
                        loaded.push(bridge::from_data(data, entry.path.clone(), None));
                    }
                }
                None => {
                    uncut_names.insert(name.to_string());
                    let of = group[0].part.map_or(1, |p| p.of);
                    uncut.push(format!(
                            "  `{name}`: the file's tensor is {:?}, which does not cut into {of} gates along dimension 0",
                            value.shape
                        ));
                }
            },
            // PyTorch's BatchNorm step count: burn keeps none
            None if name.ends_with("num_batches_tracked") => {}
            Some(_) => {
                // An integer tensor where burn has a float one: say so, not "missing" and "unused".
                uncut_names.insert(name.to_string());
                uncut.push(format!(
                        "  `{name}`: the file's tensor is {:?} {:?}, the burn module's is a float tensor",
                        value.dtype, value.shape
                    ));
            }
            _ => unused.push(name.to_string()),
        }
    }
    let result = module.apply(loaded, None, Some(Box::new(PyTorchToBurnAdapter)), false);
    let missing_paths: BTreeSet<&str> = result.missing.iter().map(|(p, _)| p.as_str()).collect();
    let missing: Vec<&ParamEntry> = entries
        .iter()
        .filter(|e| !e.buffer && missing_paths.contains(e.path.as_str()))
        .collect();
    unused.extend(
        result
            .unused
            .iter()
            .filter_map(|path| entries.iter().find(|e| &e.path == path))
            .map(|e| e.torch.clone()),
    );
    let missing: Vec<&ParamEntry> = missing
        .into_iter()
        .filter(|e| !uncut_names.contains(&e.torch))
        .collect();
    if missing.is_empty() && unused.is_empty() && uncut.is_empty() && result.errors.is_empty() {
        return Ok(module);
    }
    Err(misfit(
        source,
        &entries,
        &missing,
        &unused,
        &uncut,
        &result.errors,
    ))
}

/// Everything that keeps the module from loading, in one message that says what to do.
fn misfit(
    source: &Source,
    entries: &[ParamEntry],
    missing: &[&ParamEntry],
    unused: &[String],
    uncut: &[String],
    errors: &[ApplyError],
) -> String {
    let mut lines = vec![format!("the burn module does not fit this {}", source.what)];
    if !missing.is_empty() {
        lines.push(format!(
                "  {} burn tensor(s) not in the file (burn path -> PyTorch name <- closest unused name in the file):",
                missing.len()
            ));
        for entry in missing {
            let hint = closest(&entry.torch, unused)
                .map(|(_, u)| format!(" <- `{u}`?"))
                .unwrap_or_default();
            let slice = entry
                .part
                .map(|p| format!(" (gate {} of {})", p.index + 1, p.of))
                .unwrap_or_default();
            lines.push(format!(
                "    `{}` -> `{}`{slice}{hint}",
                entry.path, entry.torch
            ));
        }
    }
    if !unused.is_empty() {
        lines.push(format!(
                "  {} tensor(s) of the file used by no burn tensor (closest burn tensor's PyTorch name):",
                unused.len()
            ));
        let names: Vec<String> = entries.iter().map(|e| e.torch.clone()).collect();
        for name in unused {
            let hint = closest(name, &names)
                .map(|(_, n)| format!(" (`{n}`?)"))
                .unwrap_or_default();
            lines.push(format!("    `{name}`{hint}"));
        }
    }
    lines.extend(uncut.iter().cloned());
    for error in errors {
        lines.push(match error {
            ApplyError::ShapeMismatch {
                path,
                expected,
                found,
            } => format!(
                "  `{path}`: the file's tensor is {:?} in burn's layout, the burn module's is {:?}",
                found.as_slice(),
                expected.as_slice()
            ),
            other => format!("  {other}"),
        });
    }
    let pair = missing
        .iter()
        .filter_map(|e| closest(&e.torch, unused).map(|(s, u)| (s, e.torch.clone(), u)))
        .max_by(|a, b| a.0.total_cmp(&b.0))
        .map(|(_, torch, file)| (torch, file));
    lines.push(match pair {
            Some((torch, file)) => format!(
                "fix: name the burn fields like the PyTorch module's attributes, or map the names once \
                 and use the mapping for loading and recording alike: \
                 `let names = TorchNames::new().table([(\"{torch}\", \"{file}\")])?;` then \
                 {} and the same names to the recorder, `Training::new(..).with_names(names)` \
                 (`Inference::new().with_names(names)`, `TraceRecorder::new(..).with_names(names)`)",
                source.with_names
            ),
            None => "fix: build the burn module with the PyTorch model's sizes and attribute names \
                     (or map names with TorchNames, given to the loading (InitFile::with_names, \
                     load_pytorch_checkpoint_with) and the recorder (Training::with_names, \
                     Inference::with_names or TraceRecorder::with_names))"
                .to_string(),
        });
    lines.join("\n")
}

/// The name in `candidates` most like `name` and how alike (Jaro-Winkler, 0..1): among those
/// with the same last segment (`weight`, `bias`, `running_var`) if there are any, since a rename
/// keeps it; otherwise only one alike enough to be a likely rename.
///
/// A burn leaf that PyTorch names otherwise (`gamma` -> `weight`, `beta` -> `bias`, `alpha` ->
/// `weight`), or the reverse, under the same parent is the match before any likeness: the
/// rename the file's name most likely needs (`blk.gamma` <- `blk.weight`, not `blk.bias`).
fn closest(name: &str, candidates: &[String]) -> Option<(f64, String)> {
    let split = |s: &str| match s.rsplit_once('.') {
        Some((parent, leaf)) => (parent.to_string(), leaf.to_string()),
        None => (String::new(), s.to_string()),
    };
    let (parent, own) = split(name);
    let paired = candidates.iter().find(|c| {
        let (their_parent, theirs) = split(c);
        their_parent == parent
            && (torch_leaf_of(&own) == Some(theirs.as_str())
                || torch_leaf_of(&theirs) == Some(own.as_str()))
    });
    if let Some(c) = paired {
        return Some((1.0, c.clone()));
    }
    let leaf = |s: &str| s.rsplit('.').next().map(str::to_string);
    let best = |pool: &mut dyn Iterator<Item = &String>| {
        pool.map(|c| (textdistance::nstr::jaro_winkler(name, c), c))
            .max_by(|a, b| a.0.total_cmp(&b.0))
            .map(|(similarity, c)| (similarity, c.clone()))
    };
    best(&mut candidates.iter().filter(|c| leaf(c) == leaf(name)))
        .or_else(|| best(&mut candidates.iter()).filter(|(similarity, _)| *similarity >= 0.8))
}

/// The tensor name of input `name` in step `step`'s batch: step 0's is `inputs.{name}`, as
/// in an init file with one batch, so a port that reads only step 0 reads either kind of file.
fn input_key(step: usize, name: &str) -> String {
    if step == 0 {
        format!("inputs.{name}")
    } else {
        format!("step{step}.inputs.{name}")
    }
}

/// `k` of a `step{k}.{stage}{name}` tensor name (`stage` as `inputs.`).
fn step_of(key: &str, stage: &str) -> Option<usize> {
    let (step, rest) = key.strip_prefix("step")?.split_once('.')?;
    rest.starts_with(stage).then(|| step.parse().ok()).flatten()
}

/// `tensor` (the file's `name`) as a float burn tensor of rank `D` on `device`; an integer
/// tensor is refused, pointing at `int_reader`.
fn float_tensor<const D: usize>(
    name: &str,
    tensor: &HostTensor,
    int_reader: &str,
    device: &Device,
) -> Result<Tensor<D>, TraceError> {
    check_rank(name, tensor, D)?;
    if tensor.dtype == HostDType::I64 {
        return Err(TraceError::Mismatch {
            name: name.to_string(),
            message: format!("is an integer tensor; read it with {int_reader}"),
        });
    }
    Ok(Tensor::from_data(tensor.to_data(), device))
}

/// `tensor` (the file's `name`) as an integer burn tensor of rank `D` on `device`; a float
/// tensor is refused, pointing at `float_reader`.
fn int_tensor<const D: usize>(
    name: &str,
    tensor: &HostTensor,
    float_reader: &str,
    device: &Device,
) -> Result<Tensor<D, Int>, TraceError> {
    check_rank(name, tensor, D)?;
    if tensor.dtype != HostDType::I64 {
        return Err(TraceError::Mismatch {
            name: name.to_string(),
            message: format!("is a float tensor; read it with {float_reader}"),
        });
    }
    check_int_range(name, tensor, device.settings().int_dtype)?;
    Ok(Tensor::from_data(tensor.to_data(), device))
}

/// An error naming the first element of the i64 tensor `tensor` that burn's `int_dtype`
/// cannot hold (burn panics converting it), if there is one.
fn check_int_range(name: &str, tensor: &HostTensor, int_dtype: IntDType) -> Result<(), TraceError> {
    let (low, high): (i64, i64) = match int_dtype {
        IntDType::I64 => (i64::MIN, i64::MAX),
        IntDType::I32 => (i32::MIN.into(), i32::MAX.into()),
        IntDType::I16 => (i16::MIN.into(), i16::MAX.into()),
        IntDType::I8 => (i8::MIN.into(), i8::MAX.into()),
        IntDType::U64 => (0, i64::MAX),
        IntDType::U32 => (0, u32::MAX.into()),
        IntDType::U16 => (0, u16::MAX.into()),
        IntDType::U8 => (0, u8::MAX.into()),
    };
    let values = tensor.to_i64().unwrap_or_default();
    match values
        .iter()
        .enumerate()
        .find(|(_, v)| !(low..=high).contains(*v))
    {
        Some((index, value)) => Err(TraceError::Mismatch {
            name: name.to_string(),
            message: format!(
                "element {index} is {value}, which burn's {int_dtype:?} integers on this device cannot hold \
                 ({low} to {high}); a class label or an index is never this large"
            ),
        }),
        None => Ok(()),
    }
}

fn check_rank(name: &str, tensor: &HostTensor, rank: usize) -> Result<(), TraceError> {
    if tensor.shape.len() != rank {
        return Err(TraceError::Mismatch {
            name: name.to_string(),
            message: format!("has shape {:?}, asked for rank {rank}", tensor.shape),
        });
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::{BatchNorm, BatchNormConfig, LayerNorm, LayerNormConfig};

    #[derive(Module, Debug)]
    struct Norms {
        bn: BatchNorm,
        ln: LayerNorm,
    }

    #[test]
    fn pytorch_norm_weights_and_running_stats_load_into_burn_names() {
        let f32s = |v: &[f32]| HostTensor::from_f32(v, vec![v.len()]);
        let init = init_with(
            "norms",
            &[
                ("params.bn.weight", f32s(&[1.5, 2.5])),
                ("params.bn.bias", f32s(&[0.5, -0.5])),
                ("buffers.bn.running_mean", f32s(&[0.25, 0.75])),
                ("buffers.bn.running_var", f32s(&[2.0, 3.0])),
                (
                    "buffers.bn.num_batches_tracked",
                    HostTensor::from_i64(&[7], vec![]),
                ),
                ("params.ln.weight", f32s(&[3.0, 4.0, 5.0])),
                ("params.ln.bias", f32s(&[0.0, 1.0, 2.0])),
            ],
        );
        let device = Device::default().autodiff();
        let norms = Norms {
            bn: BatchNormConfig::new(2).init(&device),
            ln: LayerNormConfig::new(3).init(&device),
        };
        let norms = init.load_module(norms).unwrap();
        let values = |t: Tensor<1>| t.into_data().try_to_vec::<f32>().unwrap();
        assert_eq!(values(norms.bn.gamma.val()), vec![1.5, 2.5]);
        assert_eq!(values(norms.bn.running_mean.value()), vec![0.25, 0.75]);
        assert_eq!(values(norms.bn.running_var.value()), vec![2.0, 3.0]);
        assert_eq!(
            values(norms.ln.beta.as_ref().unwrap().val()),
            vec![0.0, 1.0, 2.0]
        );
        assert!(norms.ln.gamma.val().is_require_grad());
        assert!(!norms.bn.running_mean.value().is_require_grad());
    }

    #[test]
    fn a_constant_buffer_the_module_has_no_place_for_is_left_unused_and_readable() {
        let f32s = |v: &[f32]| HostTensor::from_f32(v, vec![v.len()]);
        let tensors = [
            ("params.ln.weight", f32s(&[3.0, 4.0, 5.0])),
            ("params.ln.bias", f32s(&[0.0, 1.0, 2.0])),
            ("buffers.pe", f32s(&[0.0, 1.0, 0.5, 0.25])),
        ];
        #[derive(Module, Debug)]
        struct Ln {
            ln: LayerNorm,
        }
        let device = Device::default();
        let module = || Ln {
            ln: LayerNormConfig::new(3).init(&device),
        };
        // declared constant (the PyTorch run never changed it): the port computes it inline or reads it
        let init = init_with_metadata(
            "constant-buffer",
            &tensors,
            &[("constant_buffers", "[\"pe\"]")],
        );
        init.load_module(module()).unwrap();
        assert_eq!(init.buffer("pe").unwrap().shape, vec![4]);
        // not declared constant: a tensor of the file no part of the module takes is still refused
        let strict = init_with("strict-buffer", &tensors);
        let message = strict.load_module(module()).unwrap_err().to_string();
        assert!(message.contains("pe"), "{message}");
    }
}

/// For the crate's unit tests: an init file holding `tensors`, written to a temporary file (named by
/// `tag`) and read back.
#[cfg(test)]
pub(crate) fn init_with(tag: &str, tensors: &[(&str, HostTensor)]) -> InitFile {
    init_with_metadata(tag, tensors, &[])
}

/// [`init_with`], with metadata keys of its own (`full_steps`, ...).
#[cfg(test)]
pub(crate) fn init_with_metadata(
    tag: &str,
    tensors: &[(&str, HostTensor)],
    extra: &[(&str, &str)],
) -> InitFile {
    try_init_with(tag, tensors, extra).unwrap()
}

/// The init file holding `tensors` and `extra` metadata, as `InitFile::read` reads it.
#[cfg(test)]
pub(crate) fn try_init_with(
    tag: &str,
    tensors: &[(&str, HostTensor)],
    extra: &[(&str, &str)],
) -> Result<InitFile, TraceError> {
    let tensors: BTreeMap<String, HostTensor> = tensors
        .iter()
        .map(|(k, v)| (k.to_string(), v.clone()))
        .collect();
    let metadata: BTreeMap<String, String> =
        [("burnside.format", "init"), ("burnside.version", "1")]
            .into_iter()
            .chain(extra.iter().copied())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
    let path = std::env::temp_dir().join(format!(
        "burnside-init-{tag}-{}.safetensors",
        std::process::id()
    ));
    crate::write_safetensors(&path, &tensors, &metadata).unwrap();
    let init = InitFile::read(&path);
    std::fs::remove_file(&path).unwrap();
    init
}

#[cfg(test)]
mod batch_tests {
    use super::*;

    fn floats(t: Tensor<2>) -> Vec<f32> {
        t.into_data().try_to_vec::<f32>().unwrap()
    }

    fn ints(t: Tensor<1, Int>) -> Vec<i64> {
        t.into_data().iter::<i64>().collect()
    }

    #[test]
    fn full_steps_and_layer_statistics_come_from_the_metadata() {
        let x = || ("inputs.x", HostTensor::from_f32(&[0.5], vec![1, 1]));
        let plain = init_with("plain", &[x()]);
        assert_eq!(plain.full_steps(), None);
        assert!(!plain.layer_statistics());
        let asked = init_with_metadata(
            "asked",
            &[x()],
            &[("full_steps", "[0, 4]"), ("layer_statistics", "true")],
        );
        assert_eq!(asked.full_steps(), Some(vec![0, 4]));
        assert!(asked.layer_statistics());
        assert!(!asked.params_statistics());
        // a forward trace's parameters recorded as statistics: no `params.*` to load
        let forward = init_with_metadata("forward", &[x()], &[("params_statistics", "true")]);
        assert!(forward.params_statistics());
        let layer = burn::nn::LinearConfig::new(1, 1).init(&Device::default());
        let line = forward.load_module(layer).unwrap_err().to_string();
        assert!(
            line.contains("holds no parameters") && line.contains("statistics=False"),
            "{line}"
        );
        assert!(!line.contains('\n'), "{line}");
        for (key, value, says) in [
            ("full_steps", "[-1]", "a JSON list of step indices"),
            ("full_steps", "0,4", "a JSON list of step indices"),
            ("full_steps", "[4, 0]", "ascending"),
            ("layer_statistics", "True", "`true` or `false`"),
            ("params_statistics", "1", "`true` or `false`"),
        ] {
            let error = try_init_with("bad", &[x()], &[(key, value)]).unwrap_err();
            let line = error.to_string();
            assert!(
                line.contains(&format!("metadata `{key}` is `{value}`")) && line.contains(says),
                "{line}"
            );
            assert!(!line.contains('\n'), "{line}");
        }
    }

    #[test]
    fn one_batch_feeds_every_step() {
        let init = init_with(
            "one",
            &[
                ("inputs.x", HostTensor::from_f32(&[0.5, -1.5], vec![1, 2])),
                ("inputs.y", HostTensor::from_i64(&[2], vec![1])),
            ],
        );
        let device = Device::default();
        assert_eq!(init.batches(), 1);
        for step in [0, 1, 7] {
            assert_eq!(
                floats(init.float_input_at::<2>(step, "x", &device).unwrap()),
                vec![0.5, -1.5]
            );
            assert_eq!(
                ints(init.int_input_at::<1>(step, "y", &device).unwrap()),
                vec![2]
            );
        }
    }

    #[test]
    fn a_batch_per_step_is_read_by_step_and_step_0_stays_the_plain_inputs() {
        let init = init_with(
            "per-step",
            &[
                ("inputs.x", HostTensor::from_f32(&[0.5, -1.5], vec![1, 2])),
                ("inputs.y", HostTensor::from_i64(&[2], vec![1])),
                (
                    "step1.inputs.x",
                    HostTensor::from_f32(&[3.0, 4.0], vec![1, 2]),
                ),
                ("step1.inputs.y", HostTensor::from_i64(&[0], vec![1])),
                (
                    "step2.inputs.x",
                    HostTensor::from_f32(&[-0.0, 1e-30], vec![1, 2]),
                ),
                ("step2.inputs.y", HostTensor::from_i64(&[1], vec![1])),
            ],
        );
        let device = Device::default();
        assert_eq!(init.batches(), 3);
        let mut names = init.input_names();
        names.sort();
        assert_eq!(names, vec!["x", "y"]);
        // step 0's batch is the plain `inputs.*`
        assert_eq!(
            floats(init.float_input_at::<2>(0, "x", &device).unwrap()),
            vec![0.5, -1.5]
        );
        assert_eq!(
            floats(init.float_input_at::<2>(1, "x", &device).unwrap()),
            vec![3.0, 4.0]
        );
        let step2 = floats(init.float_input_at::<2>(2, "x", &device).unwrap());
        assert_eq!(step2[0].to_bits(), (-0.0f32).to_bits());
        assert_eq!(step2[1].to_bits(), 1e-30f32.to_bits());
        assert_eq!(
            ints(init.int_input_at::<1>(1, "y", &device).unwrap()),
            vec![0]
        );
        assert_eq!(
            ints(init.int_input_at::<1>(2, "y", &device).unwrap()),
            vec![1]
        );

        let beyond = init
            .float_input_at::<2>(3, "x", &device)
            .unwrap_err()
            .to_string();
        assert!(
            beyond.contains("no batch for step 3: the file holds one batch per step for 3 steps"),
            "{beyond}"
        );
        let unknown = init.input_at(1, "z").unwrap_err().to_string();
        assert!(unknown.contains("no tensor `step1.inputs.z`"), "{unknown}");
        let kind = init
            .int_input_at::<2>(1, "x", &device)
            .unwrap_err()
            .to_string();
        assert!(kind.contains("is a float tensor"), "{kind}");
    }
}
