use std::collections::BTreeMap;

use super::{Sink, TraceRecorder};
use crate::stream_writer::StreamWriter;
use crate::{HostDType, HostTensor, TraceError};

impl TraceRecorder {
    /// The aliases the trace will hold (alias -> target): step k's `params_before.{p}` that is
    /// step k-1's `params_after.{p}` bit for bit; with the sink's lock held.
    pub(super) fn aliases_in(&self, sink: &Sink) -> BTreeMap<String, String> {
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
}

/// `step{k}.{rest}` split into `k` and `rest`.
pub(super) fn split_step(name: &str) -> Option<(usize, &str)> {
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
pub(super) fn stream_put(
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
