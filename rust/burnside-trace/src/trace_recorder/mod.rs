//! [`TraceRecorder`], the recording of one training loop or forward pass, by concept: the stage
//! calls (`stages`, `forward`, `accumulation`), which tensors become statistics
//! (`statistics_rule`), where tensors go (`sink`) and which are written as aliases (`aliasing`),
//! the metadata and the completeness check (`metadata`), a forward pass's [`Tap`] (`tap`), and
//! what the panic hook reads (`last_recorded`).

use std::collections::{BTreeMap, BTreeSet};
use std::sync::Mutex;

use crate::recorded_on::RecordedOn;
use crate::{
    ClipGradNorm, HostDType, HostTensor, OptimizerSpec, Statistics, TorchNames, TraceError,
};

mod accumulation;
mod aliasing;
mod forward;
mod last_recorded;
mod metadata;
mod sink;
mod stages;
mod statistics_rule;
mod tap;
#[cfg(test)]
mod tests;

use aliasing::stream_put;
use last_recorded::note_recorded;
pub(crate) use last_recorded::{last_recorded_line, recorded_shape_lines};
use sink::Sink;
pub use tap::Tap;
use tap::TapTo;

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

/// What a recorder records: a training loop's steps, or forward passes only (a forward trace,
/// `kind = forward`, with its `mode`: `inference` on a device without autodiff, `autodiff`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Kind {
    Training,
    Forward { mode: &'static str },
}

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

    /// Set metadata `key` after the recorder was built.
    pub(crate) fn insert_metadata(&mut self, key: &str, value: &str) {
        self.metadata.insert(key.to_string(), value.to_string());
    }
}
