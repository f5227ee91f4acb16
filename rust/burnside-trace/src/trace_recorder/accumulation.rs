use burn::tensor::{Device, Tensor, TensorData};

use super::TraceRecorder;
use super::stages::scalar;
use crate::{HostTensor, InitFile, Step, TraceError};

impl TraceRecorder {
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
}
