use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::sync::{Mutex, MutexGuard};

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Tensor, TensorData};
use serde_json::{Value, json};

use crate::recorded_on::RecordedOn;
use crate::stream_writer::StreamWriter;
use crate::stream_writer::statistics_json;
use crate::{
    ALIASES_VERSION, BURN_VERSION, ClipGradNorm, FORMAT_VERSION, HostDType, HostRead, HostTensor,
    InitFile, OptimizerSpec, ParamEntry, STATISTICS_VERSION, Statistics, Step, TorchNames,
    TraceError, ValuesVisitor, optimizer_state, pack_parts, param_paths_with, write_safetensors,
};

/// Records what one burn training loop computes, step by step, and writes it as a burnside
/// trace (version 1, or 2 with aliases): `step{k}.inputs.*`, `params_before.*`, `activations.*`,
/// `logits`, `loss`, `grads.*`, `params_after.*`, `buffers.*`, `optim.*`, and `loss_after` on the
/// last step, in PyTorch names and layout.
///
/// Call the stage methods in any order within a step; [`write`](Self::write) refuses a trace
/// with a stage missing (every step needs its inputs, `params_before`, logits, loss, grads,
/// `params_after` and `optim`; the last step `loss_after`), naming the call to add.
/// [`Training`](crate::Training) makes every call itself.
///
/// The tensors are kept in memory until `write`, unless [`stream_to`](Self::stream_to) sends
/// them to the file as they are recorded (what [`Training`](crate::Training) and
/// [`Inference`](crate::Inference) do: a large model's steps need not fit in memory).
///
/// Step k's `params_before.{p}` is written as an alias of step k-1's `params_after.{p}` (no
/// second copy of the bytes: format version 2, metadata `aliases`) when the two are the same
/// tensor bit for bit; a loop that hands the next step another model (the step's result
/// dropped) records both in full, and the comparison sees the difference.
///
/// With [`with_statistics`](Self::with_statistics) a tensor may be recorded as its
/// [`Statistics`] only (format version 3, metadata `statistics`), by the rule the PyTorch
/// recorder follows: the steps not in `full_steps`, and with `layer_statistics` the layers'
/// activations of every step; never an `inputs` tensor, step 0's `params_before`, a 0-d scalar
/// or an integer tensor.
#[derive(Debug)]
pub struct TraceRecorder {
    optimizer: OptimizerSpec,
    clip: Option<ClipGradNorm>,
    lrs: BTreeMap<usize, f64>,
    groups: Vec<(OptimizerSpec, Vec<String>)>,
    tensors: BTreeMap<String, HostTensor>,
    params: Vec<String>,
    buffers: Vec<String>,
    activations: Vec<String>,
    names: TorchNames,
    grads_len: BTreeMap<usize, usize>,
    /// The stages recorded by a call (not by their tensors: a module whose optimizer has no
    /// state, or gradients keyed to another module, record none and still made the call).
    called: BTreeMap<usize, BTreeSet<&'static str>>,
    steps: usize,
    /// Where the recorded tensors were and their dtype: the trace's `device` and `dtype`.
    on: RecordedOn,
    metadata: BTreeMap<String, String>,
    /// A training trace, or a forward trace ([`Inference`](crate::Inference)) and its `mode`.
    kind: Kind,
    /// The names of the model's outputs, in the order first recorded (forward traces).
    outputs: Vec<String>,
    /// Where recorded tensors go: `tensors` (memory), or the file being streamed. A lock only
    /// so that [`write`](Self::write) (which takes `&self`) can finish the file.
    sink: Mutex<Sink>,
    /// Streaming: each parameter's last `params_after` (step, dtype, shape, xxh3-128 of the
    /// bytes), to tell whether the next step's `params_before` is the same tensor.
    after: BTreeMap<String, (usize, HostDType, Vec<usize>, u128)>,
    /// Gradient accumulation: the micro-batches of one optimizer step (metadata `accumulate`),
    /// and the micro-batches whose loss each step recorded.
    accumulate: Option<usize>,
    micro_losses: BTreeMap<usize, BTreeSet<usize>>,
    /// What [`with_statistics`](Self::with_statistics) asked for, if it was called: the steps
    /// recorded in full (`None`: every step) and whether layers are statistics everywhere.
    statistics_rule: Option<(Option<BTreeSet<usize>>, bool)>,
    /// A forward trace's parameters (`step0.params_before.*`) recorded as statistics
    /// ([`with_params_statistics`](Self::with_params_statistics)).
    params_statistics: bool,
    /// In memory: the tensors recorded as statistics, by full name.
    statistics: BTreeMap<String, Statistics>,
}

/// Where a recorder's tensors go.
#[derive(Debug)]
enum Sink {
    /// Kept in `tensors`, written by `write`.
    Memory,
    /// Written to the file as they are recorded (boxed: the writer is large beside the others).
    File(Box<StreamWriter>),
    /// The streamed file was finished (renamed to this path).
    Finished(PathBuf),
}

/// What a recorder records: a training loop's steps, or forward passes only (a forward trace,
/// `kind = forward`, with its `mode`: `inference` on a device without autodiff, `autodiff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Training,
    Forward { mode: &'static str },
}

/// The name and shape of the tensor recorded last, for a port that panics afterwards (a shape
/// mismatch inside burn): `run_port`'s panic hook says where the recording had got to.
static LAST_RECORDED: std::sync::Mutex<Option<(String, Vec<usize>)>> = std::sync::Mutex::new(None);

/// The layer outputs (and outputs) recorded at the step being recorded, by name and shape, for the
/// panic hook: a port that panics on a shape (a ConvTranspose2d without its output_padding) says
/// which of its layers' shapes it had recorded, and `burnside check` names the first that parts.
static STEP_SHAPES: std::sync::Mutex<Vec<(String, Vec<usize>)>> = std::sync::Mutex::new(Vec::new());
/// At most this many shapes are kept for a step.
const STEP_SHAPES_KEPT: usize = 4096;

fn note_recorded(name: &str, shape: &[usize]) {
    if name.contains(".activations.") || name.contains(".outputs.") || name.ends_with(".logits") {
        let mut shapes = STEP_SHAPES.lock().unwrap_or_else(|e| e.into_inner());
        let step = name.split('.').next().unwrap_or("");
        if shapes
            .first()
            .is_some_and(|(first, _)| first.split('.').next() != Some(step))
        {
            shapes.clear(); // a new step: the shapes of the one that panics are what tells
        }
        if shapes.len() < STEP_SHAPES_KEPT {
            shapes.push((name.to_string(), shape.to_vec()));
        }
    }
    let mut last = LAST_RECORDED.lock().unwrap_or_else(|e| e.into_inner());
    match last.as_mut() {
        Some((n, s)) => {
            n.clear();
            n.push_str(name);
            s.clear();
            s.extend_from_slice(shape);
        }
        None => *last = Some((name.to_string(), shape.to_vec())),
    }
}

/// `burnside-trace: recorded NAME [SHAPE]` for each layer output of the step being recorded, the
/// lines the panic hook prints before the last one.
pub(crate) fn recorded_shape_lines() -> Vec<String> {
    let shapes = STEP_SHAPES.lock().unwrap_or_else(|e| e.into_inner());
    shapes
        .iter()
        .map(|(name, shape)| format!("burnside-trace: recorded {name} {shape:?}"))
        .collect()
}

/// `burnside-trace: last recorded NAME [SHAPE]`, the line the panic hook prints last (None before
/// any tensor was recorded).
pub(crate) fn last_recorded_line() -> Option<String> {
    let last = LAST_RECORDED.lock().unwrap_or_else(|e| e.into_inner());
    last.as_ref()
        .map(|(name, shape)| format!("burnside-trace: last recorded {name} {shape:?}"))
}

/// Every step's stages in pipeline order: the mark its call leaves, the stage's name, and the call
/// that records it (closed by its backtick, or followed by where it goes).
const STAGES: [(&str, &str, &str); 7] = [
    (
        "input",
        "inputs",
        "recorder.input(step, name, tensor.to_data())` for each tensor of the batch, or read it \
         with `step.float_input` / `step.int_input` on the `recorder.step(k, ..)` of this very step k",
    ),
    (
        "params_before",
        "params_before",
        "recorder.params_before(step, &model)` before the forward pass",
    ),
    ("logits", "logits", "recorder.logits(step, &logits)`"),
    ("loss", "loss", "recorder.loss(step, &loss)`"),
    (
        "grads",
        "grads",
        "recorder.grads(step, &model, &grads)` before `optim.step",
    ),
    (
        "params_after",
        "params_after",
        "recorder.params_after(step, &model)` on the model `optim.step` returned",
    ),
    (
        "optim",
        "optimizer state",
        "recorder.optim(step, &model, &optim)` after `optim.step` (plain SGD records nothing, but the call says the step was taken)",
    ),
];

impl TraceRecorder {
    /// A recorder for a loop that uses `optimizer` (its configuration goes into the metadata).
    /// The trace's `device` and `dtype` are those of the parameters it records; its `loss_fn` is
    /// what [`with_loss_fn`](Self::with_loss_fn) declares, and absent otherwise.
    pub fn new(optimizer: OptimizerSpec) -> Self {
        Self {
            optimizer,
            clip: None,
            lrs: BTreeMap::new(),
            groups: Vec::new(),
            tensors: BTreeMap::new(),
            params: Vec::new(),
            buffers: Vec::new(),
            activations: Vec::new(),
            names: TorchNames::new(),
            grads_len: BTreeMap::new(),
            called: BTreeMap::new(),
            steps: 0,
            on: RecordedOn::default(),
            metadata: BTreeMap::new(),
            kind: Kind::Training,
            outputs: Vec::new(),
            sink: Mutex::new(Sink::Memory),
            after: BTreeMap::new(),
            accumulate: None,
            micro_losses: BTreeMap::new(),
            statistics_rule: None,
            params_statistics: false,
            statistics: BTreeMap::new(),
        }
    }

    /// A forward trace's rule (`Inference`, from the init file: [`InitFile::params_statistics`]):
    /// its parameters recorded as statistics, the load check then by their hashes. A training
    /// trace's step 0 parameters are never statistics.
    pub(crate) fn with_params_statistics(mut self, on: bool) -> Self {
        self.params_statistics = on;
        self
    }

    /// Record the steps not in `full_steps` as statistics (each tensor that may be one), and
    /// with `layer_statistics` the layers' activations (and inputs) of every step, full steps
    /// too; `full_steps = None` keeps every step in full. What the PyTorch side was asked for
    /// is in its init file ([`InitFile::full_steps`], [`InitFile::layer_statistics`]), which
    /// [`Training`](crate::Training) follows by itself, and so does a recorder without this
    /// call from its first [`step`](Self::step) or [`micro_step`](Self::micro_step) on. The
    /// trace's metadata says it (`full_steps`, `layer_statistics`).
    ///
    /// Never statistics: a step's `inputs` (and micro-batches' inputs), step 0's
    /// `params_before` (the start), a 0-d scalar (`loss`, `loss_after`, the optimizer's `step`)
    /// and an integer tensor.
    pub fn with_statistics(
        mut self,
        full_steps: Option<Vec<usize>>,
        layer_statistics: bool,
    ) -> Self {
        self.statistics_rule = Some((
            full_steps.map(|s| s.into_iter().collect()),
            layer_statistics,
        ));
        self
    }

    /// Whether tensor `rest` of step `step` is recorded as statistics (see
    /// [`with_statistics`](Self::with_statistics)).
    fn as_statistics(&self, step: usize, rest: &str, tensor: &HostTensor) -> bool {
        if tensor.shape.is_empty() || tensor.dtype == HostDType::I64 {
            return false;
        }
        if let Kind::Forward { .. } = self.kind {
            // a forward trace: its parameters, and its layers (taps and captured operations) outside
            // the full steps; its inputs, outputs and buffers always in full
            if step == 0 && rest.starts_with("params_before.") {
                return self.params_statistics;
            }
            let layer = rest.starts_with("activations.")
                || rest.starts_with("layer_inputs.")
                || rest.starts_with("captured.");
            let Some((full_steps, layers)) = &self.statistics_rule else {
                return false;
            };
            return layer
                && (*layers
                    || full_steps
                        .as_ref()
                        .is_some_and(|full| !full.contains(&step)));
        }
        let Some((full_steps, layers)) = &self.statistics_rule else {
            return false;
        };
        if tensor.shape.is_empty()
            || tensor.dtype == HostDType::I64
            || rest.starts_with("inputs.")
            || rest.starts_with("micro_inputs.")
            || (step == 0 && rest.starts_with("params_before."))
        {
            return false;
        }
        if *layers && (rest.starts_with("activations.") || rest.starts_with("layer_inputs.")) {
            return true;
        }
        full_steps
            .as_ref()
            .is_some_and(|full| !full.contains(&step))
    }

    /// Declare that the loop accumulates gradients over `micro_batches` micro-batches per
    /// optimizer step (PyTorch's `backward()` on each without `zero_grad`, then one
    /// `optimizer.step()`; burn's `GradientsAccumulator`): metadata `accumulate`. Record each
    /// micro-batch j of step k with [`micro_step`](Self::micro_step) (its batch),
    /// [`micro_logits`](Self::micro_logits) and [`micro_loss`](Self::micro_loss), the step's
    /// [`loss`](Self::loss) as the micro-batches' losses summed in order, its [`grads`](Self::grads)
    /// as the accumulated gradients the optimizer steps on, and `loss_after` as the same sum on the
    /// last step's micro-batches. 1 is a loop without accumulation.
    pub fn with_accumulation(mut self, micro_batches: usize) -> Self {
        self.accumulate = (micro_batches > 1).then_some(micro_batches);
        self
    }

    /// The micro-batches per optimizer step declared with
    /// [`with_accumulation`](Self::with_accumulation) (1 without accumulation).
    pub fn accumulation(&self) -> usize {
        self.accumulate.unwrap_or(1)
    }

    /// The batch input `name` of micro-batch `micro` of step `step`
    /// (`step{k}.micro_inputs.{j}.{name}`).
    pub fn micro_input(
        &mut self,
        step: usize,
        micro: usize,
        name: &str,
        data: TensorData,
    ) -> Result<(), TraceError> {
        let tensor = HostTensor::from_data(data)?;
        self.mark(step, "input");
        self.put(step, &format!("micro_inputs.{micro}.{name}"), tensor)
    }

    /// The model's output on micro-batch `micro` of step `step` (`step{k}.micro_logits.{j}`).
    pub fn micro_logits<const D: usize>(
        &mut self,
        step: usize,
        micro: usize,
        logits: &Tensor<D>,
    ) -> Result<(), TraceError> {
        let tensor = HostTensor::of(logits)?;
        self.on.tensor(logits);
        self.mark(step, "logits");
        self.put(step, &format!("micro_logits.{micro}"), tensor)
    }

    /// The loss of micro-batch `micro` of step `step`, as `backward` is called on it
    /// (`step{k}.micro_loss.{j}`).
    pub fn micro_loss(
        &mut self,
        step: usize,
        micro: usize,
        loss: &Tensor<1>,
    ) -> Result<(), TraceError> {
        let tensor = scalar(loss, "micro_loss")?;
        self.micro_losses.entry(step).or_default().insert(micro);
        self.put(step, &format!("micro_loss.{micro}"), tensor)
    }

    /// Micro-batch `micro` of step `step` as a forward pass sees it: batch `step * M + micro` of
    /// `init` (M from [`with_accumulation`](Self::with_accumulation)), recorded as the
    /// micro-batch's inputs; its tap is off (an accumulating trace records no activations).
    pub fn micro_step<'a>(
        &'a mut self,
        step: usize,
        micro: usize,
        init: &'a InitFile,
        device: &'a Device,
    ) -> Step<'a> {
        let m = self.accumulation();
        self.follow(init);
        Step::recorded(step, init, device, self).micro(micro, m)
    }

    /// A loop recorded call by call records what the PyTorch side was asked for, as
    /// [`Training`](crate::Training) does: unless [`with_statistics`](Self::with_statistics) said
    /// otherwise, the init file's `full_steps` and `layer_statistics`, from the first step read
    /// from it on. Nothing before that may be statistics anyway (step 0's `params_before`).
    fn follow(&mut self, init: &InitFile) {
        if self.statistics_rule.is_none()
            && (init.full_steps().is_some() || init.layer_statistics())
        {
            self.statistics_rule = Some((
                init.full_steps().map(|s| s.into_iter().collect()),
                init.layer_statistics(),
            ));
        }
    }

    /// From now on, write every tensor recorded to the trace file `path` at once (a temporary
    /// file beside it, `.{name}.{pid}.{hex}.partial`), instead of keeping it in memory;
    /// [`write`](Self::write) with the same path finishes the file and renames it to `path`.
    /// A recorder dropped before that (an error, a panic) removes the temporary file: `path`
    /// never holds half a trace, and a file already there stays.
    ///
    /// `expected_tensors` is an estimate of the tensors the trace will hold (steps x tensors
    /// per step), for the room reserved for the file's header: more wastes a little padding,
    /// fewer only makes `write` copy the data once into a file with a larger header. Tensors
    /// recorded before this call go to the file first. A name recorded twice is an error for a
    /// streaming recorder (in memory the second replaces the first).
    pub fn stream_to(
        &mut self,
        path: impl AsRef<Path>,
        expected_tensors: usize,
    ) -> Result<(), TraceError> {
        self.stream_to_reserving(path, expected_tensors, 0)
    }

    /// [`stream_to`](Self::stream_to) with `metadata_bytes` more header room, for metadata
    /// larger than the usual few KiB (a captured graph's JSON, known once batch 0 is captured).
    pub(crate) fn stream_to_reserving(
        &mut self,
        path: impl AsRef<Path>,
        expected_tensors: usize,
        metadata_bytes: usize,
    ) -> Result<(), TraceError> {
        let path = path.as_ref();
        if let Some(error) = self.not_streaming("stream_to") {
            return Err(error);
        }
        let reserve =
            crate::stream_writer::header_reserve(expected_tensors.max(self.tensors.len()))
                .saturating_add(metadata_bytes);
        let mut writer = StreamWriter::create_with_reserve(path, reserve)?;
        let mut earlier: Vec<(String, HostTensor)> =
            std::mem::take(&mut self.tensors).into_iter().collect();
        // step by step, so step k-1's params_after is seen before step k's params_before
        earlier.sort_by_cached_key(|(name, _)| (split_step(name).map(|(k, _)| k), name.clone()));
        for (name, tensor) in earlier {
            stream_put(&mut writer, &mut self.after, name, tensor)?;
        }
        for (name, statistics) in std::mem::take(&mut self.statistics) {
            writer.add_statistics(name, statistics)?;
        }
        *self.sink.get_mut().unwrap_or_else(|e| e.into_inner()) = Sink::File(Box::new(writer));
        Ok(())
    }

    /// `None` if the recorder keeps its tensors in memory, else the error for `call`.
    fn not_streaming(&mut self, call: &str) -> Option<TraceError> {
        match &*self.sink.get_mut().unwrap_or_else(|e| e.into_inner()) {
            Sink::Memory => None,
            Sink::File(writer) => Some(TraceError::Setup(format!(
                "{call}: the recorder streams to {} already",
                writer.path().display()
            ))),
            Sink::Finished(path) => Some(TraceError::Setup(format!(
                "{call}: the trace was written to {} already",
                path.display()
            ))),
        }
    }

    fn sink(&self) -> MutexGuard<'_, Sink> {
        self.sink.lock().unwrap_or_else(|e| e.into_inner())
    }

    /// Whether tensor `name` (a full name, `step0.inputs.x`) was recorded, in full or as
    /// statistics, streaming or not.
    pub fn contains(&self, name: &str) -> bool {
        match &*self.sink() {
            Sink::Memory => self.tensors.contains_key(name) || self.statistics.contains_key(name),
            Sink::File(writer) => writer.contains(name),
            Sink::Finished(_) => false,
        }
    }

    /// The aliases the trace will hold (alias -> target): step k's `params_before.{p}` that is
    /// step k-1's `params_after.{p}` bit for bit; with the sink's lock held.
    fn aliases_in(&self, sink: &Sink) -> BTreeMap<String, String> {
        match sink {
            Sink::Memory => self
                .tensors
                .iter()
                .filter_map(|(name, tensor)| {
                    let target = alias_candidate(name)?;
                    (self.tensors.get(&target) == Some(tensor)).then(|| (name.clone(), target))
                })
                .collect(),
            Sink::File(writer) => writer.aliases().clone(),
            Sink::Finished(_) => BTreeMap::new(),
        }
    }

    /// A recorder of forward passes (a forward trace): no optimizer, no gradients; `mode` is
    /// the trace's `mode` (`inference` or `autodiff`). The optimizer a training recorder keeps
    /// is never read nor written for this kind.
    pub(crate) fn forward(mode: &'static str) -> Self {
        Self {
            kind: Kind::Forward { mode },
            ..Self::new(OptimizerSpec::sgd(0.0))
        }
    }

    /// Declare the loss the loop computes, by the name the PyTorch recorder writes for its
    /// `loss_fn`, which `name` must equal: the Python loss function's `__name__` (`cross_entropy`
    /// for `nn.functional.cross_entropy`, `mse_loss`, ...) or a loss module's class name
    /// (`SmoothL1Loss`). It is the trace's `loss_fn` metadata, shown beside the PyTorch trace's.
    pub fn with_loss_fn(self, name: &str) -> Self {
        self.with_metadata("loss_fn", name)
    }

    /// Declare that the loop clips gradients with `clip` between `grads` and `optim.step`
    /// (PyTorch's `clip_grad_norm_`): the trace's `optimizer` metadata gets `clip_grad_norm`, which
    /// the comparison checks against the PyTorch side's and replays. Gradients are still recorded
    /// as `backward` gave them: call [`grads`](Self::grads) before [`ClipGradNorm::apply`].
    pub fn with_clip_grad_norm(mut self, clip: ClipGradNorm) -> Self {
        self.clip = Some(clip);
        self
    }

    /// Declare a parameter group, as PyTorch's `param_groups`: the parameters named `params` (PyTorch
    /// names) are trained by a second optimizer built from `spec` (e.g. no weight decay on biases and
    /// norms), the others by the recorder's own. The trace's `optimizer` metadata then lists the groups
    /// as the PyTorch recorder does, so the comparison checks each parameter's settings. Split the
    /// gradients with `GradientsParams::from_params` and step each optimizer with its part.
    pub fn with_group(mut self, spec: OptimizerSpec, params: &[&str]) -> Self {
        self.groups
            .push((spec, params.iter().map(|p| p.to_string()).collect()));
        self
    }

    /// The learning rate step `step` passed to `optim.step`, for a loop with a learning-rate
    /// schedule (PyTorch's `lr_scheduler`, burnside's `record(..., lr_schedule=)`): the trace's
    /// `optimizer` metadata then lists every step's (`lr_per_step`), which the comparison checks
    /// against PyTorch's and the forensics replay. Record it for every step or for none.
    pub fn lr(&mut self, step: usize, lr: f64) {
        self.lrs.insert(step, lr);
    }

    /// Set a plain-string metadata key of your own (the loss: [`with_loss_fn`](Self::with_loss_fn)).
    /// The keys the recorder writes itself win: the format's, `framework`, `device` and `dtype`
    /// (seen on the recorded parameters), `steps`, `optimizer`, `params` and the lists.
    pub fn with_metadata(mut self, key: &str, value: &str) -> Self {
        self.metadata.insert(key.to_string(), value.to_string());
        self
    }

    /// Name tensors with `names` (the port's renames, the same value given to
    /// [`InitFile::with_names`](crate::InitFile::with_names)).
    pub fn with_names(mut self, names: TorchNames) -> Self {
        self.names = names;
        self
    }

    /// The names tensors are recorded under.
    pub(crate) fn names(&self) -> &TorchNames {
        &self.names
    }

    fn mark(&mut self, step: usize, stage: &'static str) {
        self.steps = self.steps.max(step + 1);
        self.called.entry(step).or_default().insert(stage);
    }

    fn put(&mut self, step: usize, name: &str, tensor: HostTensor) -> Result<(), TraceError> {
        self.steps = self.steps.max(step + 1);
        note_recorded(&format!("step{step}.{name}"), &tensor.shape);
        let statistics = self
            .as_statistics(step, name, &tensor)
            .then(|| Statistics::of(&tensor));
        let name = format!("step{step}.{name}");
        match (
            self.sink.get_mut().unwrap_or_else(|e| e.into_inner()),
            statistics,
        ) {
            (Sink::Memory, None) => {
                self.statistics.remove(&name);
                self.tensors.insert(name, tensor);
                Ok(())
            }
            (Sink::Memory, Some(statistics)) => {
                self.tensors.remove(&name);
                self.statistics.insert(name, statistics);
                Ok(())
            }
            (Sink::File(writer), None) => stream_put(writer, &mut self.after, name, tensor),
            (Sink::File(writer), Some(statistics)) => writer.add_statistics(name, statistics),
            (Sink::Finished(path), _) => Err(TraceError::Setup(format!(
                "tensor `{name}` recorded after the trace was written to {}",
                path.display()
            ))),
        }
    }

    /// The batch input `name` fed to step `step` (`x`, `y`, ...), from `tensor.to_data()`.
    pub fn input(&mut self, step: usize, name: &str, data: TensorData) -> Result<(), TraceError> {
        let tensor = HostTensor::from_data(data)?;
        self.mark(step, "input");
        self.put(step, &format!("inputs.{name}"), tensor)
    }

    /// The parameters before step `step`'s update.
    pub fn params_before<M: Module>(&mut self, step: usize, module: &M) -> Result<(), TraceError> {
        self.record_params(step, "params_before", module, false)
    }

    /// The parameters and the buffers the model holds before step `step`'s forward pass, as
    /// `params_before.*` and `buffers.*` (a forward trace's starting point, recorded once).
    pub(crate) fn params_and_buffers<M: Module>(
        &mut self,
        step: usize,
        module: &M,
    ) -> Result<(), TraceError> {
        self.record_params(step, "params_before", module, true)
    }

    /// The parameters after step `step`'s optimizer step, and the buffers (BatchNorm's running
    /// statistics) after step `step`'s forward pass, as `buffers.{name}`.
    pub fn params_after<M: Module>(&mut self, step: usize, module: &M) -> Result<(), TraceError> {
        self.record_params(step, "params_after", module, true)
    }

    fn record_params<M: Module>(
        &mut self,
        step: usize,
        stage: &'static str,
        module: &M,
        with_buffers: bool,
    ) -> Result<(), TraceError> {
        self.mark(step, stage);
        if with_buffers {
            // A forward pass leaves a RunningState's new value pending until the next forward
            // reads it; `valid` syncs it now, so the buffers recorded are this step's.
            drop(module.valid());
        }
        self.on.params(module);
        let entries = param_paths_with(module, &self.names);
        if self.params.is_empty() {
            // PyTorch's tensors in module order, a packed one where its first slice is
            let names = |buffer: bool| {
                let mut seen = BTreeSet::new();
                (entries.iter())
                    .filter(|entry| entry.buffer == buffer && seen.insert(entry.torch.as_str()))
                    .map(|entry| entry.torch.clone())
                    .collect::<Vec<_>>()
            };
            self.params = names(false);
            self.buffers = names(true);
        }
        let mut visitor = ValuesVisitor::default();
        module.visit(&mut visitor);
        self.put_each(step, &entries, visitor.found, |entry| {
            if !entry.buffer {
                Some(format!("{stage}.{}", entry.torch))
            } else {
                with_buffers.then(|| format!("buffers.{}", entry.torch))
            }
        })
    }

    /// Read each tensor of `found` (by its index in `entries`) to the host and put it under
    /// `name(entry)` (none: not recorded) one at a time, so that one tensor's host copy is out at
    /// a time (all of them at once held the model's size again, the recording's peak at GPT-2
    /// size, and their buffers could not be reused): a whole tensor goes to the trace as soon as
    /// it is read, the slices of a packed one once the last of them is.
    fn put_each(
        &mut self,
        step: usize,
        entries: &[ParamEntry],
        found: Vec<(usize, Box<HostRead>)>,
        name: impl Fn(&ParamEntry) -> Option<String>,
    ) -> Result<(), TraceError> {
        let mut parts: BTreeMap<String, Vec<(ParamEntry, HostTensor)>> = BTreeMap::new();
        for (index, read) in found {
            let entry = &entries[index];
            let Some(recorded_as) = name(entry) else {
                continue;
            };
            let tensor = read(entry, &self.names)?;
            let Some(part) = entry.part else {
                self.put(step, &recorded_as, tensor)?;
                continue;
            };
            let group = parts.entry(entry.torch.clone()).or_default();
            group.push((entry.clone(), tensor));
            if group.len() == part.of {
                let group = parts.remove(&entry.torch).unwrap_or_default();
                for (entry, tensor) in pack_parts(group)? {
                    self.put(step, &name(&entry).unwrap_or_default(), tensor)?;
                }
            }
        }
        for (_, group) in parts {
            // a packed tensor some of whose slices have no value: `pack_parts` leaves it out
            for (entry, tensor) in pack_parts(group)? {
                self.put(step, &name(&entry).unwrap_or_default(), tensor)?;
            }
        }
        Ok(())
    }

    /// The output of the layer PyTorch calls `name` (its module path: `ln2`, `attn.q`) during
    /// step `step`'s forward pass. Record the layers in the order the forward pass runs them:
    /// the comparison reports the first one out of tolerance.
    pub fn activation<const D: usize>(
        &mut self,
        step: usize,
        name: &str,
        output: &Tensor<D>,
    ) -> Result<(), TraceError> {
        let tensor = HostTensor::of(output)?;
        self.on.tensor(output);
        if !self.activations.iter().any(|a| a == name) {
            self.activations.push(name.to_string());
        }
        self.put(step, &format!("activations.{name}"), tensor)
    }

    /// A captured batch's forward pass as its replay computed it (`Inference`): its inputs, every
    /// recorded operation's output (`captured.{n}`), its taps and its outputs.
    pub(crate) fn replayed(
        &mut self,
        step: usize,
        replayed: crate::capture::Replayed,
    ) -> Result<(), TraceError> {
        for (name, data) in replayed.inputs {
            self.input(step, &name, data)?;
        }
        for (name, tensor) in replayed.tensors {
            self.put(step, &name, tensor)?;
        }
        for (name, tensor) in replayed.taps {
            if !self.activations.iter().any(|a| a == &name) {
                self.activations.push(name.clone());
            }
            self.put(step, &format!("activations.{name}"), tensor)?;
        }
        let named = !replayed.named.is_empty();
        for (name, tensor) in replayed.named {
            self.output_host(step, &name, tensor)?;
        }
        if let (false, Some(output)) = (named, replayed.output) {
            self.output_host(step, "output", output)?;
        }
        Ok(())
    }

    /// One operation's output of a captured forward pass (`captured.{n}`), as the replay makes it.
    pub(crate) fn put_captured(
        &mut self,
        step: usize,
        name: &str,
        tensor: HostTensor,
    ) -> Result<(), TraceError> {
        self.put(step, name, tensor)
    }

    /// The operations' outputs of a batch captured beside its eager forward pass (`captured.{n}`).
    pub(crate) fn replayed_layers(
        &mut self,
        step: usize,
        replayed: crate::capture::Replayed,
    ) -> Result<(), TraceError> {
        for (name, tensor) in replayed.tensors {
            self.put(step, &name, tensor)?;
        }
        Ok(())
    }

    fn output_host(
        &mut self,
        step: usize,
        name: &str,
        tensor: HostTensor,
    ) -> Result<(), TraceError> {
        if !self.outputs.iter().any(|o| o == name) {
            self.outputs.push(name.to_string());
        }
        self.mark(step, "output");
        self.put(step, &format!("outputs.{name}"), tensor)
    }

    /// Set metadata `key` after the recorder was built.
    pub(crate) fn insert_metadata(&mut self, key: &str, value: &str) {
        self.metadata.insert(key.to_string(), value.to_string());
    }

    /// Where step `step`'s forward pass reports its layers' outputs: pass it to the model's
    /// forward and call [`Tap::activation`] once per layer.
    pub fn tap(&mut self, step: usize) -> Tap<'_> {
        Tap(TapTo::Recorder(self, step))
    }

    /// Step `step` as a forward pass sees it: its batch read from `init` and recorded as its
    /// inputs ([`Step::float_input`](crate::Step::float_input)), and its tap. What
    /// [`Training`](crate::Training) hands its closure, for a loop recorded call by call.
    pub fn step<'a>(&'a mut self, step: usize, init: &'a InitFile, device: &'a Device) -> Step<'a> {
        self.follow(init);
        Step::recorded(step, init, device, self)
    }

    /// The model's output `name` at forward pass `step` (`outputs.{name}`, forward traces).
    pub(crate) fn output<const D: usize>(
        &mut self,
        step: usize,
        name: &str,
        output: &Tensor<D>,
    ) -> Result<(), TraceError> {
        let tensor = HostTensor::of(output)?;
        self.on.tensor(output);
        if !self.outputs.iter().any(|o| o == name) {
            self.outputs.push(name.to_string());
        }
        self.mark(step, "output");
        self.put(step, &format!("outputs.{name}"), tensor)
    }

    /// Whether forward pass `step` recorded an output.
    pub(crate) fn has_output(&self, step: usize) -> bool {
        self.called
            .get(&step)
            .is_some_and(|called| called.contains("output"))
    }

    /// The model's output at step `step`.
    pub fn logits<const D: usize>(
        &mut self,
        step: usize,
        logits: &Tensor<D>,
    ) -> Result<(), TraceError> {
        let tensor = HostTensor::of(logits)?;
        self.on.tensor(logits);
        self.mark(step, "logits");
        self.put(step, "logits", tensor)
    }

    /// The loss at step `step`; burn's `[1]` becomes the format's 0-d scalar.
    pub fn loss(&mut self, step: usize, loss: &Tensor<1>) -> Result<(), TraceError> {
        let tensor = scalar(loss, "loss")?;
        self.mark(step, "loss");
        self.put(step, "loss", tensor)
    }

    /// The loss of the final parameters on the last step's inputs.
    pub fn loss_after(&mut self, step: usize, loss: &Tensor<1>) -> Result<(), TraceError> {
        let tensor = scalar(loss, "loss_after")?;
        self.put(step, "loss_after", tensor)
    }

    /// The gradients of step `step`, by parameter path, and `grads.len()` for `grads_len` (in
    /// PyTorch's count: the gates packed into one PyTorch tensor count as one). With parameter
    /// groups, call it once per group's part of the gradients (the counts add up).
    ///
    /// A parameter with no gradient in `grads` (a mismatched model, a frozen parameter) is left
    /// out, which the comparison reports as missing.
    pub fn grads<M: Module>(
        &mut self,
        step: usize,
        module: &M,
        grads: &GradientsParams,
    ) -> Result<(), TraceError> {
        let entries = param_paths_with(module, &self.names);
        let mut visitor = GradsVisitor {
            grads,
            index: 0,
            found: Vec::new(),
            seen: BTreeSet::new(),
        };
        module.visit(&mut visitor);
        // `grads_len` counts PyTorch's tensors: the slices of one packed tensor count once.
        let sliced = |index: &usize| entries[*index].part.is_some();
        let slices = visitor.found.iter().filter(|(i, _)| sliced(i)).count();
        let packed: BTreeSet<&str> = (visitor.found.iter())
            .filter(|(i, _)| sliced(i))
            .map(|(i, _)| entries[*i].torch.as_str())
            .collect();
        let len = grads.len() - slices + packed.len();
        self.put_each(step, &entries, visitor.found, |entry| {
            Some(format!("grads.{}", entry.torch))
        })?;
        // a port with parameter groups records each group's part: the counts add up
        *self.grads_len.entry(step).or_insert(0) += len;
        self.mark(step, "grads");
        Ok(())
    }

    /// The optimizer's state after step `step` (`optim.{slot}.{param}`); plain SGD has none.
    ///
    /// One parameter's state at a time goes to the trace (a streaming recorder writes it, or its
    /// statistics, before the next is read out of the optimizer): the recording holds one
    /// parameter's state beside the optimizer's own, not a copy of all of it.
    pub fn optim<M: Module>(
        &mut self,
        step: usize,
        module: &M,
        optim: &ModuleOptimizer,
    ) -> Result<(), TraceError> {
        self.mark(step, "optim");
        let names = self.names.clone();
        let entries: Vec<ParamEntry> = param_paths_with(module, &names);
        let groups = self.groups.clone();
        let main = self.optimizer.clone();
        optimizer_state(optim, &entries, &names, |slot, path, tensor| {
            // each parameter's state in PyTorch's terms by its group's optimizer (Muon's buffer)
            let spec = (groups.iter().find(|(_, names)| names.contains(&path)))
                .map_or(&main, |(spec, _)| spec);
            let tensor = spec.torch_state(&slot, tensor);
            self.put(step, &format!("optim.{slot}.{path}"), tensor)
        })
    }

    /// The tensors recorded so far, by full name (`step0.logits`, ...), for a recorder that keeps
    /// them in memory; a recorder streaming to a file ([`stream_to`](Self::stream_to)) holds
    /// none here (ask [`contains`](Self::contains)).
    pub fn tensors(&self) -> &BTreeMap<String, HostTensor> {
        &self.tensors
    }

    /// The tensors recorded as statistics so far, by full name, for a recorder that keeps them
    /// in memory (see [`tensors`](Self::tensors)).
    pub fn statistics(&self) -> &BTreeMap<String, Statistics> {
        &self.statistics
    }

    /// The keys every trace this recorder writes carries, training or forward (`kind`): the port's own
    /// metadata, the format and version, the framework, the device and dtype seen, the step count.
    fn common_metadata(&self, kind: Option<&str>) -> BTreeMap<String, String> {
        let mut metadata = self.metadata.clone();
        let mut set = |key: &str, value: String| {
            metadata.insert(key.to_string(), value);
        };
        set("burnside.format", "trace".to_string());
        set("burnside.version", FORMAT_VERSION.to_string());
        if let Some(kind) = kind {
            set("kind", kind.to_string());
        }
        set("framework", "burn".to_string());
        set("framework_version", BURN_VERSION.to_string());
        if let (Some(device), Some(dtype)) = (self.on.device(), self.on.dtype()) {
            set("device", device);
            set("dtype", dtype);
        }
        set("steps", json!(self.steps).to_string());
        let sink = self.sink();
        let aliases = self.aliases_in(&sink);
        if !aliases.is_empty() {
            set("burnside.version", ALIASES_VERSION.to_string());
            set(
                "aliases",
                serde_json::to_string(&aliases).expect("a map of strings is JSON"),
            );
        }
        let statistics = match &*sink {
            Sink::Memory => statistics_json(&self.statistics),
            Sink::File(writer) => statistics_json(writer.statistics()),
            Sink::Finished(_) => statistics_json(&BTreeMap::new()),
        };
        if statistics != "{}" {
            set("burnside.version", STATISTICS_VERSION.to_string());
            set("statistics", statistics);
        }
        if let Some((full_steps, layers)) = &self.statistics_rule {
            if let Some(full) = full_steps {
                set("full_steps", json!(full).to_string());
            }
            set("layer_statistics", json!(layers).to_string());
        }
        if self.params_statistics {
            set("params_statistics", "true".to_string());
        }
        metadata
    }

    /// The metadata the trace will carry.
    pub fn metadata(&self) -> Result<BTreeMap<String, String>, TraceError> {
        let incomplete = TraceError::Incomplete;
        if let Kind::Forward { mode } = self.kind {
            return self.forward_metadata(mode);
        }
        if self.steps == 0 {
            return Err(incomplete("no step recorded".to_string()));
        }
        let none = BTreeSet::new();
        for step in 0..self.steps {
            let called = self.called.get(&step).unwrap_or(&none);
            if let Some((_, stage, call)) = STAGES.iter().find(|(mark, ..)| !called.contains(mark))
            {
                return Err(incomplete(format!(
                    "step {step} has no {stage}: call `{call}"
                )));
            }
        }
        if let Some(m) = self.accumulate {
            let none = BTreeSet::new();
            for step in 0..self.steps {
                let recorded = self.micro_losses.get(&step).unwrap_or(&none);
                if let Some(j) = (0..m).find(|j| !recorded.contains(j)) {
                    return Err(incomplete(format!(
                        "step {step} has no loss of micro-batch {j} (of the {m} declared by \
                         `with_accumulation`): call `recorder.micro_loss(step, j, &loss)` on each"
                    )));
                }
                if let Some(j) = recorded.iter().find(|&&j| j >= m) {
                    return Err(incomplete(format!(
                        "step {step} recorded micro-batch {j}, beyond the {m} declared by \
                         `with_accumulation` (micro-batches count from 0)"
                    )));
                }
            }
        } else if let Some(step) = self.micro_losses.keys().next() {
            return Err(incomplete(format!(
                "step {step} recorded micro-batch losses, but the recorder declares no accumulation: \
                 `TraceRecorder::new(..).with_accumulation(M)`"
            )));
        }
        // every step called `grads`, so each has its count
        let grads_len: Vec<usize> = (0..self.steps).map(|step| self.grads_len[&step]).collect();
        let last = self.steps - 1;
        if !self.contains(&format!("step{last}.loss_after")) {
            return Err(incomplete(format!(
                "the last step ({last}) has no loss_after"
            )));
        }
        // logits were recorded (checked above), so something was seen
        let mut metadata = self.common_metadata(None);
        let mut set = |key: &str, value: String| {
            metadata.insert(key.to_string(), value);
        };
        let mut optimizer = self.optimizer.to_json();
        if let (Some(clip), Some(object)) = (self.clip, optimizer.as_object_mut()) {
            object.insert(
                "clip_grad_norm".to_string(),
                crate::optimizer_spec::f32_json(clip.max_norm()),
            );
        }
        if !self.groups.is_empty() {
            let main = optimizer.clone();
            let grouped: BTreeSet<&str> = self
                .groups
                .iter()
                .flat_map(|(_, params)| params.iter().map(String::as_str))
                .collect();
            let first: Vec<&str> = self
                .params
                .iter()
                .map(String::as_str)
                .filter(|p| !grouped.contains(p))
                .collect();
            let mut groups = vec![json!({ "params": first })];
            for (spec, params) in &self.groups {
                let mut group = serde_json::Map::new();
                group.insert("params".to_string(), json!(params));
                if let (Some(own), Some(main)) = (spec.to_json().as_object(), main.as_object()) {
                    for (key, value) in own {
                        if key != "name" && main.get(key) != Some(value) {
                            group.insert(key.clone(), value.clone());
                        }
                    }
                }
                groups.push(Value::Object(group));
            }
            if let Some(object) = optimizer.as_object_mut() {
                object.insert("param_groups".to_string(), json!(groups.len()));
                object.insert("groups".to_string(), Value::Array(groups));
            }
        }
        if !self.lrs.is_empty() {
            if let Some(missing) = (0..self.steps).find(|k| !self.lrs.contains_key(k)) {
                return Err(incomplete(format!(
                    "step {missing} has no learning rate: call `lr(step, lr)` on every step or none"
                )));
            }
            let lrs: Vec<f64> = self.lrs.values().copied().collect();
            if let Some(object) = optimizer.as_object_mut() {
                object.insert("lr_per_step".to_string(), json!(lrs));
            }
        }
        set("optimizer", optimizer.to_string());
        set("params", Value::from(self.params.clone()).to_string());
        if !self.buffers.is_empty() {
            set("buffers", Value::from(self.buffers.clone()).to_string());
        }
        if !self.activations.is_empty() {
            set(
                "activations",
                Value::from(self.activations.clone()).to_string(),
            );
        }
        set("grads_len", json!(grads_len).to_string());
        if !self.outputs.is_empty() {
            // the outputs a step recorded beside its logits (`Step::output`)
            set("outputs", Value::from(self.outputs.clone()).to_string());
        }
        if let Some(m) = self.accumulate {
            set("accumulate", json!(m).to_string());
        }
        set(
            "recorder",
            format!("burnside-trace {}", env!("CARGO_PKG_VERSION")),
        );
        Ok(metadata)
    }

    /// A forward trace's metadata: `kind = forward`, no optimizer, no `grads_len`.
    fn forward_metadata(&self, mode: &str) -> Result<BTreeMap<String, String>, TraceError> {
        let incomplete = TraceError::Incomplete;
        if self.steps == 0 {
            return Err(incomplete("no batch recorded".to_string()));
        }
        if !self
            .called
            .get(&0)
            .is_some_and(|c| c.contains("params_before"))
        {
            return Err(incomplete(
                "batch 0 has no params_before: the model's parameters are recorded before batch 0"
                    .to_string(),
            ));
        }
        // a crashed forward pass (metadata `crashed`) has no output: what ran before it is the trace
        if let Some(k) = (0..self.steps).find(|&k| !self.has_output(k))
            && !self.metadata.contains_key("crashed")
        {
            return Err(incomplete(format!("batch {k} has no output")));
        }
        let mut metadata = self.common_metadata(Some("forward"));
        let mut set = |key: &str, value: String| {
            metadata.insert(key.to_string(), value);
        };
        set("params", Value::from(self.params.clone()).to_string());
        if !self.buffers.is_empty() {
            set("buffers", Value::from(self.buffers.clone()).to_string());
        }
        if !self.activations.is_empty() {
            set(
                "activations",
                Value::from(self.activations.clone()).to_string(),
            );
        }
        set("outputs", Value::from(self.outputs.clone()).to_string());
        set("mode", mode.to_string());
        set(
            "recorder",
            format!("burnside-trace {}", env!("CARGO_PKG_VERSION")),
        );
        Ok(metadata)
    }

    /// Write the trace to `path` (safetensors), atomically, after checking it is complete
    /// ([`metadata`](Self::metadata)); for a streaming recorder, finish the file
    /// [`stream_to`](Self::stream_to) started (`path` must be the same).
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), TraceError> {
        let path = path.as_ref();
        if let Sink::File(writer) = &mut *self.sink() {
            // a write that failed since the last tensor: its error, not what the trace lacks
            writer.settle()?;
        }
        let metadata = self.metadata()?;
        let mut sink = self.sink();
        match &*sink {
            Sink::Memory => {
                let aliases = self.aliases_in(&sink);
                let tensors = self
                    .tensors
                    .iter()
                    .filter(|(name, _)| !aliases.contains_key(*name));
                write_safetensors(path, tensors, &metadata)
            }
            Sink::File(writer) if !same_path(writer.path(), path) => {
                Err(TraceError::Setup(format!(
                    "write({}): the recorder streams to {}; write there",
                    path.display(),
                    writer.path().display()
                )))
            }
            Sink::File(_) => {
                let Sink::File(writer) =
                    std::mem::replace(&mut *sink, Sink::Finished(path.to_path_buf()))
                else {
                    unreachable!("matched above")
                };
                writer.finish(metadata)
            }
            Sink::Finished(done) => Err(TraceError::Setup(format!(
                "write: the streamed trace was written to {} already",
                done.display()
            ))),
        }
    }
}

/// Whether `a` and `b` name the same file (as given, or once made absolute).
fn same_path(a: &Path, b: &Path) -> bool {
    a == b
        || matches!(
            (std::path::absolute(a), std::path::absolute(b)),
            (Ok(a), Ok(b)) if a == b
        )
}

/// `step{k}.{rest}` split into `k` and `rest`.
fn split_step(name: &str) -> Option<(usize, &str)> {
    let (step, rest) = name.strip_prefix("step")?.split_once('.')?;
    Some((step.parse().ok()?, rest))
}

/// The tensor `name` would be an alias of if equal: step k-1's `params_after.{p}` for step k's
/// `params_before.{p}` (k >= 1).
fn alias_candidate(name: &str) -> Option<String> {
    let (step, rest) = split_step(name)?;
    let param = rest.strip_prefix("params_before.")?;
    let previous = step.checked_sub(1)?;
    Some(format!("step{previous}.params_after.{param}"))
}

/// Stream one tensor: a `params_before` equal (dtype, shape, xxh3-128) to the previous step's
/// `params_after` becomes an alias of it; a `params_after`'s hash is kept for the next step.
fn stream_put(
    writer: &mut StreamWriter,
    after: &mut BTreeMap<String, (usize, HostDType, Vec<usize>, u128)>,
    name: String,
    tensor: HostTensor,
) -> Result<(), TraceError> {
    if let Some((step, rest)) = split_step(&name) {
        if let Some(param) = rest.strip_prefix("params_after.") {
            let hash = xxhash_rust::xxh3::xxh3_128(&tensor.bytes);
            let seen = (step, tensor.dtype, tensor.shape.clone(), hash);
            if !writer.contains(&name) {
                after.insert(param.to_string(), seen);
            }
        } else if let (Some(param), Some(previous)) =
            (rest.strip_prefix("params_before."), step.checked_sub(1))
            && let Some((at, dtype, shape, hash)) = after.get(param)
            && *at == previous
            && *dtype == tensor.dtype
            && *shape == tensor.shape
            && *hash == xxhash_rust::xxh3::xxh3_128(&tensor.bytes)
        {
            let target = format!("step{previous}.params_after.{param}");
            if writer.contains(&target) && !writer.aliases().contains_key(&target) {
                return writer.alias(name, &target);
            }
        }
    }
    writer.add(name, tensor)
}

/// A forward pass's view of the recorder: layer outputs go to one step of a trace, or nowhere
/// ([`Tap::off`], for a forward pass that is not recorded, such as the final loss).
///
/// ```no_run
/// # use burn::tensor::Tensor;
/// # use burnside_trace::{Tap, TraceError};
/// # struct Model { ln2: burn::nn::LayerNorm }
/// impl Model {
///     fn forward(&self, x: Tensor<3>, mut tap: Tap) -> Result<Tensor<3>, TraceError> {
///         let x = self.ln2.forward(x);
///         tap.activation("ln2", &x)?;
///         Ok(x)
///     }
/// }
/// ```
#[derive(Debug)]
pub struct Tap<'a>(TapTo<'a>);

/// Where a tap's tensors go.
#[derive(Debug)]
enum TapTo<'a> {
    /// Nowhere.
    Off,
    /// Into a step of the recorder, as they come.
    Recorder(&'a mut TraceRecorder, usize),
    /// A forward pass under graph capture: the tensors have no values yet, so their ids are kept
    /// and the replay records them.
    Deferred(&'a mut Vec<(String, burn_ir::TensorId)>),
}

impl<'a> Tap<'a> {
    /// A tap of a captured forward pass.
    pub(crate) fn deferred(taps: &'a mut Vec<(String, burn_ir::TensorId)>) -> Self {
        Tap(TapTo::Deferred(taps))
    }
}

impl Tap<'static> {
    /// A tap that records nothing.
    pub fn off() -> Self {
        Tap(TapTo::Off)
    }
}

impl Tap<'_> {
    /// Record `output` as the output of the layer PyTorch calls `name` (see
    /// [`TraceRecorder::activation`]); nothing when the tap is off.
    pub fn activation<const D: usize>(
        &mut self,
        name: &str,
        output: &Tensor<D>,
    ) -> Result<(), TraceError> {
        match &mut self.0 {
            TapTo::Recorder(recorder, step) => recorder.activation(*step, name, output),
            TapTo::Off => Ok(()),
            TapTo::Deferred(taps) => {
                let id = crate::capture::tensor_id(output)
                    .ok_or_else(|| crate::capture::not_captured(&format!("tap `{name}`")))?;
                taps.push((name.to_string(), id));
                Ok(())
            }
        }
    }
}

fn scalar(loss: &Tensor<1>, what: &str) -> Result<HostTensor, TraceError> {
    let tensor = HostTensor::of(loss)?;
    if tensor.len() != 1 {
        return Err(TraceError::Mismatch {
            name: what.to_string(),
            message: format!("has shape {:?}, expected one element", tensor.shape),
        });
    }
    Ok(tensor.reshaped(vec![]))
}

/// Collects `grads.get::<D>(id)` for every float parameter, by its index in module order
/// (the order `param_paths` lists them in; the rank `D` is only known inside the visit).
///
/// Two parameters with one `ParamId` (a module `clone()`d into another field, as a target
/// network often is) share one gradient, which burn's optimizer gives to the first of them in
/// module order (it removes the gradient once used): the gradient is recorded there only.
/// Each parameter's gradient (its index among the module's parameters), read to the host only
/// when asked: the tensor's handle, not its data.
struct GradsVisitor<'a> {
    grads: &'a GradientsParams,
    index: usize,
    found: Vec<(usize, Box<HostRead>)>,
    seen: BTreeSet<burn::module::ParamId>,
}

impl ModuleVisitor for GradsVisitor<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if self.seen.insert(param.id)
            && let Some(grad) = self.grads.get::<D>(param.id)
        {
            let read =
                move |entry: &ParamEntry, names: &TorchNames| entry.torch_value(&grad, names);
            self.found.push((self.index, Box::new(read)));
        }
        self.index += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::LinearConfig;

    #[test]
    fn a_trace_without_loss_after_is_refused_before_anything_is_written() {
        let device = Device::default().autodiff();
        let layer = LinearConfig::new(2, 2).init(&device);
        let x = Tensor::<2>::ones([1, 2], &device);
        let spec = OptimizerSpec::sgd(0.1);
        let mut optim = spec.init();
        let mut recorder = TraceRecorder::new(spec);
        let missing = |recorder: &TraceRecorder| recorder.metadata().unwrap_err().to_string();
        assert!(missing(&recorder).contains("no step recorded"));
        recorder.input(0, "x", x.to_data()).unwrap();
        assert_eq!(
            missing(&recorder),
            "incomplete trace: step 0 has no params_before: call `recorder.params_before(step, &model)` before the forward pass"
        );
        recorder.params_before(0, &layer).unwrap();
        let logits = layer.forward(x);
        recorder.logits(0, &logits).unwrap();
        assert!(
            missing(&recorder).contains("step 0 has no loss: call `recorder.loss(step, &loss)`")
        );
        let loss = logits.sum();
        recorder.loss(0, &loss).unwrap();
        assert!(missing(&recorder).contains("step 0 has no grads: call `recorder.grads("));
        let grads = GradientsParams::from_grads(loss.backward(), &layer);
        recorder.grads(0, &layer, &grads).unwrap();
        assert!(
            missing(&recorder)
                .contains("step 0 has no params_after: call `recorder.params_after(step, &model)`")
        );
        let layer = optim.step(0.1, layer, grads);
        recorder.params_after(0, &layer).unwrap();
        assert!(missing(&recorder).contains(
            "step 0 has no optimizer state: call `recorder.optim(step, &model, &optim)`"
        ));
        recorder.optim(0, &layer, &optim).unwrap();
        let error = recorder.metadata().unwrap_err();
        assert!(error.to_string().contains("loss_after"), "{error}");
        assert_eq!(recorder.tensors()["step0.grads.weight"].shape, vec![2, 2]);
        assert_eq!(recorder.tensors()["step0.loss"].shape, Vec::<usize>::new());
    }

    /// One complete step of a `Linear` on `device`, recorded by `recorder`.
    fn one_step(mut recorder: TraceRecorder, device: &Device) -> TraceRecorder {
        let layer = LinearConfig::new(2, 2).init(device);
        let spec = OptimizerSpec::sgd(0.1);
        let mut optim = spec.init();
        let x = Tensor::<2>::ones([1, 2], device);
        recorder.input(0, "x", x.to_data()).unwrap();
        recorder.params_before(0, &layer).unwrap();
        let logits = layer.forward(x.clone());
        recorder.logits(0, &logits).unwrap();
        let loss = logits.sum();
        recorder.loss(0, &loss).unwrap();
        let grads = GradientsParams::from_grads(loss.backward(), &layer);
        recorder.grads(0, &layer, &grads).unwrap();
        let layer = optim.step(0.1, layer, grads);
        recorder.params_after(0, &layer).unwrap();
        recorder.optim(0, &layer, &optim).unwrap();
        recorder.loss_after(0, &layer.forward(x).sum()).unwrap();
        recorder
    }

    #[test]
    fn device_and_dtype_are_the_parameters_and_loss_fn_only_what_the_port_declares() {
        let device = Device::default().autodiff();
        let metadata = one_step(TraceRecorder::new(OptimizerSpec::sgd(0.1)), &device)
            .metadata()
            .unwrap();
        assert_eq!(metadata["device"], "flex");
        assert_eq!(metadata["dtype"], "float32");
        assert!(!metadata.contains_key("loss_fn"), "{metadata:?}");
        let declared = TraceRecorder::new(OptimizerSpec::sgd(0.1))
            .with_loss_fn("cross_entropy")
            .with_metadata("device", "tpu");
        let metadata = one_step(declared, &device).metadata().unwrap();
        assert_eq!(metadata["loss_fn"], "cross_entropy");
        assert_eq!(
            metadata["device"], "flex",
            "seen on the tensors, not declared"
        );
    }

    #[test]
    fn a_streaming_recorder_keeps_nothing_in_memory_and_aliases_the_unchanged_parameters() {
        let device = Device::default().autodiff();
        let dir = std::env::temp_dir().join(format!("burnside-recorder-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("streamed.safetensors");
        let mut recorder = TraceRecorder::new(OptimizerSpec::sgd(0.1));
        recorder.stream_to(&path, 20).unwrap();
        let layer = LinearConfig::new(2, 2).init(&device);
        recorder.params_after(0, &layer).unwrap();
        recorder.params_before(1, &layer).unwrap();
        assert!(recorder.tensors().is_empty());
        assert!(recorder.contains("step1.params_before.weight"));
        let metadata = recorder.common_metadata(None);
        assert_eq!(metadata["burnside.version"], "2");
        assert_eq!(
            metadata["aliases"],
            r#"{"step1.params_before.bias":"step0.params_after.bias","step1.params_before.weight":"step0.params_after.weight"}"#
        );
        drop(recorder);
        assert!(!path.exists());
        assert_eq!(
            std::fs::read_dir(&dir).unwrap().count(),
            0,
            "no .partial left"
        );
    }

    #[test]
    fn an_alias_needs_the_same_dtype_shape_and_bytes_of_the_step_before() {
        let path = std::env::temp_dir().join(format!("burnside-alias-{}.st", std::process::id()));
        let mut writer = StreamWriter::create(&path, 10).unwrap();
        let mut after = BTreeMap::new();
        let w = |values: &[f32], shape: Vec<usize>| HostTensor::from_f32(values, shape);
        let mut put = |name: &str, tensor: HostTensor| {
            stream_put(&mut writer, &mut after, name.to_string(), tensor).unwrap()
        };
        put("step0.params_after.a", w(&[1.0, 2.0], vec![2]));
        put("step0.params_after.b", w(&[1.0, 2.0], vec![2]));
        put("step0.params_after.c", w(&[1.0, 2.0], vec![2]));
        put("step0.params_after.d", w(&[1.0, 2.0], vec![2]));
        put("step1.params_before.a", w(&[1.0, 2.0], vec![2])); // the same: an alias
        put("step1.params_before.b", w(&[1.0, 2.0], vec![1, 2])); // another shape
        put("step1.params_before.c", w(&[1.0, 2.5], vec![2])); // other bytes
        let same_bits_as_i64 = HostTensor {
            dtype: crate::HostDType::I64,
            shape: vec![1],
            bytes: w(&[1.0, 2.0], vec![2]).bytes,
        };
        put("step1.params_before.d", same_bits_as_i64); // another dtype
        put("step2.params_before.a", w(&[1.0, 2.0], vec![2])); // not the step before's
        let aliases: Vec<(&str, &str)> = writer
            .aliases()
            .iter()
            .map(|(a, t)| (a.as_str(), t.as_str()))
            .collect();
        assert_eq!(
            aliases,
            vec![("step1.params_before.a", "step0.params_after.a")]
        );
    }

    #[test]
    fn with_statistics_records_the_steps_not_full_as_statistics_by_the_rule() {
        let device = Device::default().autodiff();
        let recorder =
            TraceRecorder::new(OptimizerSpec::sgd(0.1)).with_statistics(Some(vec![]), false);
        let recorder = one_step(recorder, &device);
        let names: Vec<&str> = recorder.statistics().keys().map(String::as_str).collect();
        assert_eq!(
            names,
            vec![
                "step0.grads.bias",
                "step0.grads.weight",
                "step0.logits",
                "step0.params_after.bias",
                "step0.params_after.weight",
            ]
        );
        for full in [
            "step0.inputs.x",
            "step0.params_before.weight",
            "step0.loss",
            "step0.loss_after",
        ] {
            assert!(recorder.tensors().contains_key(full), "{full}");
        }
        let recorded = &recorder.statistics()["step0.grads.weight"];
        assert_eq!(recorded.shape, vec![2, 2], "PyTorch layout");
        let metadata = recorder.metadata().unwrap();
        assert_eq!(metadata["burnside.version"], "3");
        assert_eq!(metadata["full_steps"], "[]");
        assert_eq!(metadata["layer_statistics"], "false");
        let entries: Value = serde_json::from_str(&metadata["statistics"]).unwrap();
        assert_eq!(entries["step0.grads.weight"], recorded.to_json());
        // the same step in full gives the tensors these are the statistics of
        let full = one_step(TraceRecorder::new(OptimizerSpec::sgd(0.1)), &device);
        assert!(!full.metadata().unwrap().contains_key("statistics"));
        let full_steps = one_step(
            TraceRecorder::new(OptimizerSpec::sgd(0.1)).with_statistics(Some(vec![0]), true),
            &device,
        );
        assert!(
            full_steps.statistics().is_empty(),
            "a full step, no layer tapped"
        );
        assert_eq!(full_steps.metadata().unwrap()["burnside.version"], "1");
        assert_eq!(full.tensors()["step0.logits"].shape, vec![1, 2]);
    }

    #[test]
    fn a_forward_trace_records_its_parameters_and_layers_outside_full_steps_as_statistics() {
        let device = Device::default();
        let layer = LinearConfig::new(3, 2).init(&device);
        let mut recorder = TraceRecorder::forward("inference")
            .with_statistics(Some(vec![0]), false)
            .with_params_statistics(true);
        recorder.params_and_buffers(0, &layer).unwrap();
        for k in 0..2 {
            let x = Tensor::<2>::ones([1, 3], &device);
            recorder.input(k, "x", x.to_data()).unwrap();
            let y = layer.forward(x);
            recorder.activation(k, "fc", &y).unwrap();
            recorder
                .put_captured(k, "captured.0", HostTensor::of(&y).unwrap())
                .unwrap();
            recorder.output(k, "output", &y).unwrap();
        }
        let names: Vec<&str> = recorder.statistics().keys().map(String::as_str).collect();
        assert_eq!(
            names,
            vec![
                "step0.params_before.bias",
                "step0.params_before.weight",
                "step1.activations.fc",
                "step1.captured.0",
            ]
        );
        for full in [
            "step0.inputs.x",
            "step0.activations.fc",
            "step0.captured.0",
            "step0.outputs.output",
            "step1.inputs.x",
            "step1.outputs.output",
        ] {
            assert!(recorder.tensors().contains_key(full), "{full}");
        }
        // hashed in PyTorch's layout: burn's [in, out] weight transposed to [out, in], as the
        // full tensor would be stored
        let weight = &recorder.statistics()["step0.params_before.weight"];
        assert_eq!(weight.shape, vec![2, 3]);
        let full = {
            let mut plain = TraceRecorder::forward("inference");
            plain.params_and_buffers(0, &layer).unwrap();
            plain.tensors()["step0.params_before.weight"].clone()
        };
        assert_eq!(weight, &Statistics::of(&full));
        let metadata = recorder.metadata().unwrap();
        assert_eq!(metadata["params_statistics"], "true");
        assert_eq!(metadata["full_steps"], "[0]");
        assert_eq!(metadata["burnside.version"], "3");
    }

    #[test]
    fn adam_state_is_recorded_parameter_by_parameter_and_foreign_state_is_refused() {
        let device = Device::default().autodiff();
        let layer = LinearConfig::new(2, 3).init(&device);
        let spec = OptimizerSpec::adam(0.1);
        let mut optim = spec.init();
        let loss = layer.forward(Tensor::<2>::ones([1, 2], &device)).sum();
        let grads = GradientsParams::from_grads(loss.backward(), &layer);
        let layer = optim.step(spec.lr(), layer, grads);
        let mut recorder = TraceRecorder::new(spec.clone());
        recorder.optim(0, &layer, &optim).unwrap();
        let names: Vec<&str> = recorder.tensors().keys().map(String::as_str).collect();
        assert_eq!(
            names,
            vec![
                "step0.optim.exp_avg.bias",
                "step0.optim.exp_avg.weight",
                "step0.optim.exp_avg_sq.bias",
                "step0.optim.exp_avg_sq.weight",
                "step0.optim.step.bias",
                "step0.optim.step.weight",
            ]
        );
        assert_eq!(
            recorder.tensors()["step0.optim.exp_avg.weight"].shape,
            vec![3, 2]
        );
        assert_eq!(
            recorder.tensors()["step0.optim.step.weight"]
                .to_f32()
                .unwrap(),
            vec![1.0]
        );
        // the state of another module's parameters is no state of this one
        let other = LinearConfig::new(2, 3).init(&device);
        let error = TraceRecorder::new(spec)
            .optim(0, &other, &optim)
            .unwrap_err();
        assert!(
            error
                .to_string()
                .contains("belongs to no parameter of this module"),
            "{error}"
        );
    }

    #[test]
    fn plain_sgd_has_no_optimizer_state() {
        let device = Device::default().autodiff();
        let layer = LinearConfig::new(2, 3).init(&device);
        let spec = OptimizerSpec::sgd(0.1);
        let mut optim = spec.init();
        let loss = layer.forward(Tensor::<2>::ones([1, 2], &device)).sum();
        let grads = GradientsParams::from_grads(loss.backward(), &layer);
        let layer = optim.step(spec.lr(), layer, grads);
        let mut recorder = TraceRecorder::new(spec);
        recorder.optim(0, &layer, &optim).unwrap();
        assert!(recorder.tensors().is_empty());
    }

    #[test]
    fn sgd_momentum_velocity_is_recorded_as_momentum_buffer_in_pytorch_layout() {
        let device = Device::default().autodiff();
        let layer = LinearConfig::new(2, 3).init(&device);
        let spec = OptimizerSpec::Sgd {
            lr: 0.1,
            momentum: Some(0.9),
            dampening: 0.0,
            nesterov: false,
            weight_decay: 0.0,
        };
        let mut optim = spec.init();
        let loss = layer.forward(Tensor::<2>::ones([1, 2], &device)).sum();
        let grads = GradientsParams::from_grads(loss.backward(), &layer);
        let mut recorder = TraceRecorder::new(spec);
        recorder.grads(0, &layer, &grads).unwrap();
        let layer = optim.step(0.1, layer, grads);
        recorder.optim(0, &layer, &optim).unwrap();
        let names: Vec<&str> = recorder.tensors().keys().map(String::as_str).collect();
        assert_eq!(
            names,
            vec![
                "step0.grads.bias",
                "step0.grads.weight",
                "step0.optim.momentum_buffer.bias",
                "step0.optim.momentum_buffer.weight",
            ]
        );
        let buffer = &recorder.tensors()["step0.optim.momentum_buffer.weight"];
        assert_eq!(buffer.shape, vec![3, 2], "PyTorch layout");
        // With dampening 0, the first velocity is the gradient itself.
        assert_eq!(buffer, &recorder.tensors()["step0.grads.weight"]);
    }

    fn loss_grads_again(layer: &burn::nn::Linear) -> burn::tensor::Gradients {
        let device = layer.weight.val().device();
        layer
            .forward(Tensor::<2>::ones([1, 2], &device))
            .sum()
            .backward()
    }

    #[test]
    fn parameter_groups_step_with_their_own_optimizers_and_are_declared_as_pytorchs() {
        let device = Device::default().autodiff();
        let layer = LinearConfig::new(2, 2).init(&device);
        let decayed = OptimizerSpec::adamw(0.1).with_weight_decay(0.5);
        let plain = OptimizerSpec::adamw(0.1).with_weight_decay(0.0);
        let (mut optim_decayed, mut optim_plain) = (decayed.init(), plain.init());
        let mut recorder = TraceRecorder::new(decayed.clone()).with_group(plain.clone(), &["bias"]);
        let loss = layer.forward(Tensor::<2>::ones([1, 2], &device)).sum();
        recorder.loss(0, &loss).unwrap();
        recorder.logits(0, &loss.clone().reshape([1, 1])).unwrap();
        let mut grads = loss.backward();
        let bias_id = layer.bias.as_ref().unwrap().id;
        let bias_grads = GradientsParams::from_params(&mut grads, &layer, &[bias_id]);
        let weight_grads = GradientsParams::from_params(&mut grads, &layer, &[layer.weight.id]);
        let (weight_grads_copy, bias_grads_copy) = (
            GradientsParams::from_params(&mut loss_grads_again(&layer), &layer, &[layer.weight.id]),
            GradientsParams::from_params(&mut loss_grads_again(&layer), &layer, &[bias_id]),
        );
        recorder.params_before(0, &layer).unwrap();
        let bias_before = layer.bias.as_ref().unwrap().val().into_data();
        let layer = optim_decayed.step(0.1, layer, weight_grads);
        assert_eq!(
            layer.bias.as_ref().unwrap().val().into_data(),
            bias_before,
            "not this optimizer's"
        );
        let layer = optim_plain.step(0.1, layer, bias_grads);
        assert_ne!(layer.bias.as_ref().unwrap().val().into_data(), bias_before);
        recorder.grads(0, &layer, &weight_grads_copy).unwrap();
        recorder.grads(0, &layer, &bias_grads_copy).unwrap();
        recorder
            .input(0, "x", TensorData::from([[1.0f32, 1.0]]))
            .unwrap();
        recorder.params_after(0, &layer).unwrap();
        recorder.optim(0, &layer, &optim_decayed).unwrap();
        recorder.optim(0, &layer, &optim_plain).unwrap();
        recorder.loss_after(0, &loss).unwrap();
        assert_eq!(recorder.grads_len[&0], 2, "one per group's part");
        let metadata = recorder.metadata().unwrap();
        let optimizer: Value = serde_json::from_str(&metadata["optimizer"]).unwrap();
        assert_eq!(optimizer["weight_decay"], json!(0.5));
        assert_eq!(optimizer["param_groups"], json!(2));
        assert_eq!(
            optimizer["groups"],
            json!([{"params": ["weight"]}, {"params": ["bias"], "weight_decay": 0.0}])
        );
    }

    #[derive(Module, Debug)]
    struct Twins {
        online: burn::nn::Linear,
        target: burn::nn::Linear,
    }

    #[test]
    fn a_cloned_module_sharing_param_ids_has_its_gradient_and_state_recorded_once() {
        let device = Device::default().autodiff();
        let online = LinearConfig::new(2, 2).init(&device);
        let twins = Twins {
            target: online.clone(), // the same ParamIds, as `model.q.clone()` gives
            online,
        };
        let loss = twins
            .online
            .forward(Tensor::<2>::ones([1, 2], &device))
            .sum();
        let grads = GradientsParams::from_grads(loss.backward(), &twins);
        let spec = OptimizerSpec::adam(0.1);
        let mut optim = spec.init();
        let mut recorder = TraceRecorder::new(spec.clone());
        recorder.grads(0, &twins, &grads).unwrap();
        let twins = optim.step(spec.lr(), twins, grads);
        recorder.optim(0, &twins, &optim).unwrap();
        let names: Vec<&str> = recorder.tensors().keys().map(String::as_str).collect();
        assert!(names.iter().all(|n| n.contains(".online.")), "{names:?}");
        assert!(names.contains(&"step0.grads.online.weight"));
        assert!(names.contains(&"step0.optim.exp_avg.online.weight"));
        // burn's optimizer updated the first of the two only
        assert_ne!(
            twins.online.weight.val().into_data(),
            twins.target.weight.val().into_data()
        );
    }

    #[test]
    fn buffers_are_recorded_after_the_forward_that_updated_them() {
        use burn::nn::BatchNormConfig;
        let device = Device::default().autodiff();
        let bn = BatchNormConfig::new(2).init(&device);
        // Channel 0 has mean 2 and biased variance 1 (unbiased 4/3); channel 1 is constant 0.
        let x = Tensor::<3>::from_data(
            [[[1.0, 3.0], [0.0, 0.0]], [[1.0, 3.0], [0.0, 0.0]]],
            &device,
        );
        let mut recorder = TraceRecorder::new(OptimizerSpec::sgd(0.1));
        let out = bn.forward(x);
        recorder.activation(0, "bn", &out).unwrap();
        recorder.params_before(0, &bn).unwrap();
        recorder.params_after(0, &bn).unwrap();
        let names: Vec<&str> = recorder.tensors().keys().map(String::as_str).collect();
        assert_eq!(
            names,
            vec![
                "step0.activations.bn",
                "step0.buffers.running_mean",
                "step0.buffers.running_var",
                "step0.params_after.bias",
                "step0.params_after.weight",
                "step0.params_before.bias",
                "step0.params_before.weight",
            ]
        );
        let mean = recorder.tensors()["step0.buffers.running_mean"]
            .to_f32()
            .unwrap();
        assert_eq!(
            mean,
            vec![0.2, 0.0],
            "0.9 * 0 + 0.1 * batch mean, not the initial zeros"
        );
        let var = recorder.tensors()["step0.buffers.running_var"]
            .to_f32()
            .unwrap();
        // burn 0.22.1 uses the biased batch variance (PyTorch: 0.9 + 0.1 * 4/3).
        assert!((var[0] - (0.9 + 0.1 * 1.0)).abs() < 1e-6, "{var:?}");
        assert_eq!(recorder.params, vec!["weight", "bias"]);
        assert_eq!(recorder.buffers, vec!["running_mean", "running_var"]);
        assert_eq!(recorder.activations, vec!["bn"]);
    }
}
