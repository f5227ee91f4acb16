use std::collections::{BTreeMap, BTreeSet};

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::{Device, Tensor, TensorData};

use super::{Tap, TapTo, TraceRecorder};
use crate::{
    HostRead, HostTensor, InitFile, ParamEntry, Step, TorchNames, TraceError, ValuesVisitor,
    optimizer_state, pack_parts, param_paths_with,
};

/// Every step's stages in pipeline order: the mark its call leaves, the stage's name, and the call
/// that records it (closed by its backtick, or followed by where it goes).
pub(super) const STAGES: [(&str, &str, &str); 7] = [
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
}

pub(super) fn scalar(loss: &Tensor<1>, what: &str) -> Result<HostTensor, TraceError> {
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
