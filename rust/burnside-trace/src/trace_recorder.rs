use std::collections::BTreeMap;
use std::path::Path;

use burn::module::{Module, ModuleVisitor, Param};
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::{Tensor, TensorData};
use serde_json::{Value, json};

use crate::{
    BURN_VERSION, FORMAT_VERSION, HostTensor, OptimizerSpec, ParamEntry, TraceError,
    optimizer_state, param_paths, param_values, write_safetensors,
};

/// Records what one burn training loop computes, step by step, and writes it as a burnside
/// trace (v1): `step{k}.inputs.*`, `params_before.*`, `logits`, `loss`, `grads.*`,
/// `params_after.*`, `optim.*`, and `loss_after` on the last step, in PyTorch names and layout.
///
/// Call the stage methods in any order within a step; [`write`](Self::write) checks that
/// every step has its loss and grads and that the last step has `loss_after`.
#[derive(Debug, Clone)]
pub struct TraceRecorder {
    optimizer: OptimizerSpec,
    tensors: BTreeMap<String, HostTensor>,
    params: Vec<String>,
    grads_len: BTreeMap<usize, usize>,
    steps: usize,
    metadata: BTreeMap<String, String>,
}

impl TraceRecorder {
    /// A recorder for a loop that uses `optimizer` (its configuration goes into the metadata).
    pub fn new(optimizer: OptimizerSpec) -> Self {
        let mut metadata = BTreeMap::new();
        metadata.insert("device".to_string(), "flex".to_string());
        metadata.insert("dtype".to_string(), "float32".to_string());
        metadata.insert("loss_fn".to_string(), "cross_entropy".to_string());
        Self {
            optimizer,
            tensors: BTreeMap::new(),
            params: Vec::new(),
            grads_len: BTreeMap::new(),
            steps: 0,
            metadata,
        }
    }

    /// Set a plain-string metadata key (`device`, `dtype`, `loss_fn`, or your own).
    pub fn with_metadata(mut self, key: &str, value: &str) -> Self {
        self.metadata.insert(key.to_string(), value.to_string());
        self
    }

    fn put(&mut self, step: usize, name: &str, tensor: HostTensor) {
        self.steps = self.steps.max(step + 1);
        self.tensors.insert(format!("step{step}.{name}"), tensor);
    }

    /// The batch input `name` fed to step `step` (`x`, `y`, ...), from `tensor.to_data()`.
    pub fn input(&mut self, step: usize, name: &str, data: TensorData) -> Result<(), TraceError> {
        let tensor = HostTensor::from_data(data)?;
        self.put(step, &format!("inputs.{name}"), tensor);
        Ok(())
    }

    /// The parameters before step `step`'s update.
    pub fn params_before<M: Module>(&mut self, step: usize, module: &M) -> Result<(), TraceError> {
        self.record_params(step, "params_before", module)
    }

    /// The parameters after step `step`'s optimizer step.
    pub fn params_after<M: Module>(&mut self, step: usize, module: &M) -> Result<(), TraceError> {
        self.record_params(step, "params_after", module)
    }

    fn record_params<M: Module>(
        &mut self,
        step: usize,
        stage: &str,
        module: &M,
    ) -> Result<(), TraceError> {
        let values = param_values(module)?;
        if self.params.is_empty() {
            self.params = values.iter().map(|(entry, _)| entry.path.clone()).collect();
        }
        for (entry, value) in values {
            self.put(step, &format!("{stage}.{}", entry.path), value);
        }
        Ok(())
    }

    /// The model's output at step `step`.
    pub fn logits<const D: usize>(
        &mut self,
        step: usize,
        logits: &Tensor<D>,
    ) -> Result<(), TraceError> {
        let tensor = HostTensor::from_data(logits.to_data())?;
        self.put(step, "logits", tensor);
        Ok(())
    }

    /// The loss at step `step`; burn's `[1]` becomes the format's 0-d scalar.
    pub fn loss(&mut self, step: usize, loss: &Tensor<1>) -> Result<(), TraceError> {
        let tensor = scalar(loss, "loss")?;
        self.put(step, "loss", tensor);
        Ok(())
    }

    /// The loss of the final parameters on the last step's inputs.
    pub fn loss_after(&mut self, step: usize, loss: &Tensor<1>) -> Result<(), TraceError> {
        let tensor = scalar(loss, "loss_after")?;
        self.put(step, "loss_after", tensor);
        Ok(())
    }

    /// The gradients of step `step`, by parameter path, and `grads.len()` for `grads_len`.
    ///
    /// A parameter with no gradient in `grads` (a mismatched model, a frozen parameter) is left
    /// out, which the comparison reports as missing.
    pub fn grads<M: Module>(
        &mut self,
        step: usize,
        module: &M,
        grads: &GradientsParams,
    ) -> Result<(), TraceError> {
        let entries = param_paths(module);
        let mut visitor = GradsVisitor {
            grads,
            index: 0,
            found: Vec::new(),
        };
        module.visit(&mut visitor);
        for (index, data) in visitor.found {
            let entry = &entries[index];
            let tensor = entry.to_torch_layout(HostTensor::from_data(data)?);
            self.put(step, &format!("grads.{}", entry.path), tensor);
        }
        self.grads_len.insert(step, grads.len());
        Ok(())
    }

    /// The optimizer's state after step `step` (`optim.{slot}.{param}`); plain SGD has none.
    pub fn optim<M: Module>(
        &mut self,
        step: usize,
        module: &M,
        optim: &ModuleOptimizer,
    ) -> Result<(), TraceError> {
        let entries: Vec<ParamEntry> = param_paths(module);
        for ((slot, path), tensor) in optimizer_state(optim, &entries)? {
            self.put(step, &format!("optim.{slot}.{path}"), tensor);
        }
        Ok(())
    }

    /// The tensors recorded so far, by full name (`step0.logits`, ...).
    pub fn tensors(&self) -> &BTreeMap<String, HostTensor> {
        &self.tensors
    }

    /// The metadata the trace will carry.
    pub fn metadata(&self) -> Result<BTreeMap<String, String>, TraceError> {
        let incomplete = |message: String| TraceError::Mismatch {
            name: "trace".to_string(),
            message,
        };
        if self.steps == 0 {
            return Err(incomplete("no step recorded".to_string()));
        }
        let mut grads_len = Vec::with_capacity(self.steps);
        for step in 0..self.steps {
            for stage in ["loss", "logits"] {
                if !self.tensors.contains_key(&format!("step{step}.{stage}")) {
                    return Err(incomplete(format!("step {step} has no {stage}")));
                }
            }
            let len = self
                .grads_len
                .get(&step)
                .ok_or_else(|| incomplete(format!("step {step} has no grads")))?;
            grads_len.push(*len);
        }
        let last = self.steps - 1;
        if !self.tensors.contains_key(&format!("step{last}.loss_after")) {
            return Err(incomplete(format!(
                "the last step ({last}) has no loss_after"
            )));
        }
        let mut metadata = self.metadata.clone();
        let mut set = |key: &str, value: String| {
            metadata.insert(key.to_string(), value);
        };
        set("burnside.format", "trace".to_string());
        set("burnside.version", FORMAT_VERSION.to_string());
        set("framework", "burn".to_string());
        set("framework_version", BURN_VERSION.to_string());
        set("steps", json!(self.steps).to_string());
        set("optimizer", self.optimizer.to_json().to_string());
        set("params", Value::from(self.params.clone()).to_string());
        set("grads_len", json!(grads_len).to_string());
        set(
            "recorder",
            format!("burnside-trace {}", env!("CARGO_PKG_VERSION")),
        );
        Ok(metadata)
    }

    /// Write the trace to `path` (safetensors), atomically.
    pub fn write(&self, path: impl AsRef<Path>) -> Result<(), TraceError> {
        write_safetensors(path, &self.tensors, &self.metadata()?)
    }
}

fn scalar(loss: &Tensor<1>, what: &str) -> Result<HostTensor, TraceError> {
    let tensor = HostTensor::from_data(loss.to_data())?;
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
struct GradsVisitor<'a> {
    grads: &'a GradientsParams,
    index: usize,
    found: Vec<(usize, TensorData)>,
}

impl ModuleVisitor for GradsVisitor<'_> {
    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(grad) = self.grads.get::<D>(param.id) {
            self.found.push((self.index, grad.into_data()));
        }
        self.index += 1;
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use burn::nn::LinearConfig;
    use burn::tensor::Device;

    #[test]
    fn a_trace_without_loss_after_is_refused_before_anything_is_written() {
        let device = Device::default().autodiff();
        let layer = LinearConfig::new(2, 2).init(&device);
        let x = Tensor::<2>::ones([1, 2], &device);
        let mut recorder = TraceRecorder::new(OptimizerSpec::sgd(0.1));
        let logits = layer.forward(x);
        recorder.logits(0, &logits).unwrap();
        let loss = logits.sum();
        recorder.loss(0, &loss).unwrap();
        let grads = GradientsParams::from_grads(loss.backward(), &layer);
        recorder.grads(0, &layer, &grads).unwrap();
        let error = recorder.metadata().unwrap_err();
        assert!(error.to_string().contains("loss_after"), "{error}");
        assert_eq!(recorder.tensors()["step0.grads.weight"].shape, vec![2, 2]);
        assert_eq!(recorder.tensors()["step0.loss"].shape, Vec::<usize>::new());
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
}
