use std::collections::BTreeMap;

use burn::module::{ParamGroup, ParamId};
use burn::optim::{ModuleOptimizer, SgdConfig};
use burn::tensor::DType;
use burn_pack::{Reader, Scalar};

use super::{OPTIMIZERS, adafactor, rmsprop};
use crate::{HostDType, HostTensor, ParamEntry, TorchNames, TraceError, pack_parts};

/// The optimizer's per-parameter state in PyTorch's names and layout:
/// `(slot, param path) -> tensor`, e.g. `("exp_avg", "fc1.weight")`.
///
/// burn keeps the state private; it comes out through the optimizer's record
/// (`ModuleOptimizer::into_bytes`, a burnpack buffer whose tensors are named
/// `{param_id}.{field}`, e.g. `{id}.momentum.moment_1`, and whose scalars hold `{id}.momentum.time`).
/// Slots are renamed by the optimizers' files ([`Optimizer::state_slots`](super::Optimizer::state_slots):
/// `moment_1` → `exp_avg`, `moment_2` → `exp_avg_sq`, `max_moment_2` → `max_exp_avg_sq`,
/// `velocity` → `momentum_buffer`, RMSprop's `buf` → `momentum_buffer`), `time` → `step` as an f32
/// scalar; RMSprop's `square_avg` and `grad_avg`, Adagrad's `sum` keep their names,
/// PyTorch's too); a field without a PyTorch counterpart keeps its burn name. RMSprop's
/// `centered.avg` is not recorded: it is a copy of `square_avg` (minus `grad_avg²` when centered) that
/// burn keeps between steps and PyTorch recomputes each step, no state of its own. Adafactor's
/// `second_moment` and `column_second_moment` are PyTorch's `row_var` and `col_var` in PyTorch's layout
/// (a transposed `Linear` weight swaps them: burn's rows are PyTorch's columns), a vector's
/// `second_moment` its `variance`. Parameters get their PyTorch names from `names`
/// and moments their PyTorch layout (`Linear` weight moments are transposed, an RNN's gates
/// stacked into PyTorch's packed tensors).
/// State of a parameter that is not in `params` (another module's) is an error.
///
/// The state goes to `emit(slot, param, tensor)` one PyTorch tensor at a time (its slots
/// together), so only one parameter's state is ever out of the optimizer: each comes from the
/// record of a clone of the optimizer that keeps that parameter's state alone (burn's
/// `with_group` drops the state of the parameters a new group matches; the clone shares the
/// state's tensors, it copies none).
pub(crate) fn optimizer_state(
    optim: &ModuleOptimizer,
    params: &[ParamEntry],
    names: &TorchNames,
    mut emit: impl FnMut(String, String, HostTensor) -> Result<(), TraceError>,
) -> Result<(), TraceError> {
    // A `ParamId` shared by two parameters (a cloned module) has one state, the first parameter's
    // in module order: the one burn's optimizer updates.
    let mut by_id: BTreeMap<u64, &ParamEntry> = BTreeMap::new();
    // The parameters by PyTorch tensor (a packed tensor's slices together), in module order.
    let mut tensors: Vec<(&str, Vec<ParamId>)> = Vec::new();
    for entry in params {
        if by_id.contains_key(&entry.id.val()) {
            continue;
        }
        by_id.insert(entry.id.val(), entry);
        match tensors.iter_mut().find(|(torch, _)| *torch == entry.torch) {
            Some((_, ids)) => ids.push(entry.id),
            None => tensors.push((entry.torch.as_str(), vec![entry.id])),
        }
    }
    // State kept for no parameter of the module: the record of the state of the others.
    let all: Vec<ParamId> = by_id.values().map(|e| e.id).collect();
    let others = only(optim, ParamGroup::from_ids(all));
    record_state(&others, &by_id, names)?;
    for (_, ids) in tensors {
        let one = only(optim, ParamGroup::all().exclude(ParamGroup::from_ids(ids)));
        for ((slot, path), tensor) in record_state(&one, &by_id, names)? {
            emit(slot, path, tensor)?;
        }
    }
    Ok(())
}

/// A clone of `optim` without the state of the parameters `drop` matches.
fn only(optim: &ModuleOptimizer, drop: ParamGroup) -> ModuleOptimizer {
    optim
        .clone()
        .with_group(drop, SgdConfig::new().build(), None)
}

/// The state `optim`'s record holds, by (PyTorch slot, PyTorch name); state of a parameter not in
/// `by_id` is an error.
fn record_state(
    optim: &ModuleOptimizer,
    by_id: &BTreeMap<u64, &ParamEntry>,
    names: &TorchNames,
) -> Result<BTreeMap<(String, String), HostTensor>, TraceError> {
    let bad = |what: String| TraceError::OptimizerState(what);
    let bytes = optim
        .into_bytes()
        .map_err(|e| bad(format!("cannot serialize the optimizer record: {e:?}")))?;
    let reader = Reader::from_bytes(bytes)
        .map_err(|e| bad(format!("cannot read the optimizer record: {e:?}")))?;
    let param_of = |name: &str| -> Result<(&ParamEntry, String), TraceError> {
        let (id, field) = name
            .split_once('.')
            .ok_or_else(|| bad(format!("unexpected record entry `{name}`")))?;
        let entry = id
            .parse::<u64>()
            .ok()
            .and_then(|id| by_id.get(&id).copied())
            .ok_or_else(|| {
                bad(format!(
                    "record entry `{name}` belongs to no parameter of this module"
                ))
            })?;
        Ok((entry, field.rsplit('.').next().unwrap_or(field).to_string()))
    };

    // By slot, each parameter's value; the slices of a packed tensor are stacked at the end.
    let mut slots: BTreeMap<String, Vec<(ParamEntry, HostTensor)>> = BTreeMap::new();
    // Adafactor's factored moments, named once both are seen: (field, burn shape, PyTorch value)
    type Moments = Vec<(String, Vec<usize>, HostTensor)>;
    let mut factored: BTreeMap<u64, (ParamEntry, Moments)> = BTreeMap::new();
    for (name, scalar) in reader.scalars() {
        let (entry, leaf) = param_of(name)?;
        if leaf.starts_with("__") {
            continue; // burn's own bookkeeping (the parameter's rank)
        }
        let value = match *scalar {
            Scalar::Int(v) => v as f32,
            Scalar::UInt(v) => v as f32,
            Scalar::Float(v) => v as f32,
            Scalar::Bool(v) => f32::from(u8::from(v)),
        };
        slots
            .entry(torch_slot(&leaf))
            .or_default()
            .push((entry.clone(), HostTensor::from_f32(&[value], vec![])));
    }
    let tensors = reader
        .into_tensors()
        .map_err(|e| bad(format!("cannot read the record's tensors: {e:?}")))?;
    for tensor in tensors {
        let (name, dtype, shape, _param_id, bytes) = tensor
            .into_parts()
            .map_err(|e| bad(format!("cannot read a record tensor: {e:?}")))?;
        if name.ends_with(rmsprop::DERIVED) {
            continue;
        }
        let (entry, leaf) = param_of(&name)?;
        let burn_shape = shape.clone();
        let value = if dtype == DType::F32 {
            // burnpack's bytes are little-endian f32s already: one copy, or one transposing pass
            entry.torch_value_from(HostDType::F32, &shape, &bytes, names)?
        } else {
            let data = burn::tensor::TensorData::from_bytes_vec(bytes.to_vec(), shape, dtype);
            entry.to_torch_layout(HostTensor::from_data(data.convert::<f32>())?, names)?
        };
        if adafactor::MOMENTS.contains(&leaf.as_str()) {
            factored
                .entry(entry.id.val())
                .or_insert_with(|| (entry.clone(), Vec::new()))
                .1
                .push((leaf, burn_shape.to_vec(), value));
            continue;
        }
        slots
            .entry(torch_slot(&leaf))
            .or_default()
            .push((entry.clone(), value));
    }
    for (entry, moments) in factored.into_values() {
        // PyTorch's layout moved burn's [rows, 1] to [1, rows]: the parameter is transposed
        let transposed = moments
            .iter()
            .any(|(_, burn_shape, value)| value.shape.as_slice() != burn_shape.as_slice());
        let factored = moments.len() > 1;
        for (leaf, _, value) in moments {
            let slot = adafactor::moment_slot(&leaf, factored, transposed);
            slots
                .entry(slot.to_string())
                .or_default()
                .push((entry.clone(), value));
        }
    }
    let mut state = BTreeMap::new();
    for (slot, values) in slots {
        for (entry, value) in pack_parts(values)? {
            state.insert((slot.clone(), entry.torch), value);
        }
    }
    Ok(state)
}

/// PyTorch's name for a burn optimizer state field: the one an optimizer's file gives it, burn's
/// `time` is `step`, any other keeps its name. Every optimizer's names are looked up, not the
/// declared optimizer's: the record names what burn holds, whatever the port declares.
fn torch_slot(leaf: &str) -> String {
    if leaf == "time" {
        return "step".to_string();
    }
    (OPTIMIZERS.iter())
        .flat_map(|optimizer| optimizer.state_slots())
        .find(|(burn, _)| *burn == leaf)
        .map_or(leaf, |(_, torch)| torch)
        .to_string()
}
