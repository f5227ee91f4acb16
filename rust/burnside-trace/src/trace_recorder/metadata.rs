use std::collections::{BTreeMap, BTreeSet};

use serde_json::{Value, json};

use super::stages::STAGES;
use super::{Kind, Sink, TraceRecorder};
use crate::stream_writer::statistics_json;
use crate::{ALIASES_VERSION, BURN_VERSION, FORMAT_VERSION, STATISTICS_VERSION, TraceError};

impl TraceRecorder {
    /// The keys every trace this recorder writes carries, training or forward (`kind`): the port's own
    /// metadata, the format and version, the framework, the device and dtype seen, the step count.
    pub(super) fn common_metadata(&self, kind: Option<&str>) -> BTreeMap<String, String> {
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
                crate::optimizers::f32_json(clip.max_norm()),
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
}
