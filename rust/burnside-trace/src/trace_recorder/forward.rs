use burn::tensor::Tensor;

use super::TraceRecorder;
use crate::{HostTensor, TraceError};

impl TraceRecorder {
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

    /// The model's output `name` at forward pass `step`, already on the host.
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

    /// The model's output `name` at forward pass `step` (`outputs.{name}`, forward traces).
    pub(crate) fn output<const D: usize>(
        &mut self,
        step: usize,
        name: &str,
        output: &Tensor<D>,
    ) -> Result<(), TraceError> {
        let tensor = HostTensor::of(output)?;
        self.on.tensor(output);
        self.output_host(step, name, tensor)
    }

    /// Whether forward pass `step` recorded an output.
    pub(crate) fn has_output(&self, step: usize) -> bool {
        self.called
            .get(&step)
            .is_some_and(|called| called.contains("output"))
    }
}
