use std::collections::BTreeMap;

use super::{Kind, TraceRecorder};
use crate::{HostDType, HostTensor, InitFile, Statistics};

impl TraceRecorder {
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
    pub(super) fn as_statistics(&self, step: usize, rest: &str, tensor: &HostTensor) -> bool {
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

    /// A loop recorded call by call records what the PyTorch side was asked for, as
    /// [`Training`](crate::Training) does: unless [`with_statistics`](Self::with_statistics) said
    /// otherwise, the init file's `full_steps` and `layer_statistics`, from the first step read
    /// from it on. Nothing before that may be statistics anyway (step 0's `params_before`).
    pub(super) fn follow(&mut self, init: &InitFile) {
        if self.statistics_rule.is_none()
            && (init.full_steps().is_some() || init.layer_statistics())
        {
            self.statistics_rule = Some((
                init.full_steps().map(|s| s.into_iter().collect()),
                init.layer_statistics(),
            ));
        }
    }

    /// The tensors recorded as statistics so far, by full name, for a recorder that keeps them
    /// in memory (see [`tensors`](Self::tensors)).
    pub fn statistics(&self) -> &BTreeMap<String, Statistics> {
        &self.statistics
    }
}
