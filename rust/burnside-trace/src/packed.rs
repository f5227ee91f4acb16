//! Where PyTorch packs several of burn's tensors into one: which slice of which PyTorch tensor a
//! burn tensor is ([`Part`], named by [`packed_name`]), the slices stacked into PyTorch's tensor
//! for recording ([`pack_parts`]) and PyTorch's tensor cut into them for loading ([`cut_parts`]).

use std::collections::BTreeMap;

use crate::{HostTensor, ParamEntry, TraceError};

/// Which slice of a PyTorch tensor a burn tensor is, where PyTorch packs several of burn's tensors
/// into one: slice `index` of `of` equal slices along dimension 0.
///
/// burn's `Lstm` and `Gru` keep one `GateController` per gate, each an input and a hidden
/// `Linear`; PyTorch's `nn.LSTM` and `nn.GRU` stack the gates' rows into `weight_ih_l0`
/// (`[gates * hidden, input]`), `weight_hh_l0`, `bias_ih_l0` and `bias_hh_l0`, in the order
/// input, forget, cell, output (LSTM) and reset, update, new (GRU). A `BiLstm`/`BiGru`'s
/// `reverse` direction is PyTorch's `*_reverse`. burn-store has no rule for these layers, so the
/// mapping is here: loading cuts PyTorch's tensor into the gates, recording (values, gradients,
/// optimizer moments) stacks the gates back.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) struct Part {
    /// The slice's position, from 0.
    pub(crate) index: usize,
    /// How many slices make the PyTorch tensor.
    pub(crate) of: usize,
}

/// PyTorch's name (before a port's renames) for a tensor of a burn layer PyTorch names otherwise
/// than by its field path, and the slice of it where PyTorch packs several of burn's tensors into
/// one: the gates of burn's recurrent layers ([`Part`]), the projections of `MultiHeadAttention`
/// (PyTorch's `nn.MultiheadAttention` stacks query, key and value into `in_proj_weight`
/// `[3 * d_model, d_model]` and `in_proj_bias`, and calls the output `out_proj`).
pub(crate) fn packed_name(stack: &[(String, String)]) -> Option<(String, Option<Part>)> {
    if let Some(found) = attention_projection(stack) {
        return Some(found);
    }
    rnn_gate(stack).map(|(name, part)| (name, Some(part)))
}

fn attention_projection(stack: &[(String, String)]) -> Option<(String, Option<Part>)> {
    const PROJECTIONS: [&str; 3] = ["query", "key", "value"];
    let at = stack
        .iter()
        .position(|(_, c)| c == "Struct:MultiHeadAttention")?;
    let [(projection, _), (leaf, linear)] = &stack[at..] else {
        return None;
    };
    if linear != "Struct:Linear" {
        return None;
    }
    let mut path: Vec<&str> = stack[..at].iter().map(|(n, _)| n.as_str()).collect();
    let (name, part) = match PROJECTIONS.iter().position(|p| p == projection) {
        Some(index) => (format!("in_proj_{leaf}"), Some(Part { index, of: 3 })),
        None if projection == "output" => (format!("out_proj.{leaf}"), None),
        None => return None,
    };
    path.push(&name);
    Some((path.join("."), part))
}

/// PyTorch's name (before a port's renames) and the slice of it for a tensor inside a burn
/// recurrent layer's gate, from the stack of (field, declaring type); `None` elsewhere.
fn rnn_gate(stack: &[(String, String)]) -> Option<(String, Part)> {
    const LSTM: [&str; 4] = ["input_gate", "forget_gate", "cell_gate", "output_gate"];
    const GRU: [&str; 3] = ["reset_gate", "update_gate", "new_gate"];
    let at = stack
        .iter()
        .position(|(_, c)| c == "Struct:Lstm" || c == "Struct:Gru")?;
    let [(gate, layer), (transform, _), (leaf, _)] = &stack[at..] else {
        return None;
    };
    let gates: &[&str] = if layer == "Struct:Lstm" { &LSTM } else { &GRU };
    let index = gates.iter().position(|g| g == gate)?;
    let which = match transform.as_str() {
        "input_transform" => "ih",
        "hidden_transform" => "hh",
        _ => return None,
    };
    let (outer, suffix) = match at.checked_sub(1).map(|i| &stack[i]) {
        Some((direction, c)) if c == "Struct:BiLstm" || c == "Struct:BiGru" => (
            at - 1,
            if direction == "reverse" {
                "_reverse"
            } else {
                ""
            },
        ),
        _ => (at, ""),
    };
    let mut path: Vec<&str> = stack[..outer].iter().map(|(n, _)| n.as_str()).collect();
    let name = format!("{leaf}_{which}_l0{suffix}");
    path.push(&name);
    Some((
        path.join("."),
        Part {
            index,
            of: gates.len(),
        },
    ))
}

/// `values` with each packed PyTorch tensor's slices (see [`Part`]) stacked into it, at the place
/// of its first slice; every other tensor passes through as is. A packed tensor with a slice
/// absent (a gate with no gradient) is left out whole, which the comparison reports as missing.
/// Where every slice holds one 0-d value (an optimizer's step count), the value is kept once.
pub(crate) fn pack_parts(
    values: Vec<(ParamEntry, HostTensor)>,
) -> Result<Vec<(ParamEntry, HostTensor)>, TraceError> {
    enum Slot {
        Whole(ParamEntry, HostTensor),
        Packed(ParamEntry, Vec<Option<HostTensor>>),
    }
    let mut slots: Vec<Slot> = Vec::new();
    let mut packed_at: BTreeMap<String, usize> = BTreeMap::new();
    for (entry, value) in values {
        let Some(part) = entry.part else {
            slots.push(Slot::Whole(entry, value));
            continue;
        };
        let at = *packed_at.entry(entry.torch.clone()).or_insert_with(|| {
            slots.push(Slot::Packed(entry.clone(), vec![None; part.of]));
            slots.len() - 1
        });
        if let Slot::Packed(_, parts) = &mut slots[at]
            && let Some(slot) = parts.get_mut(part.index)
        {
            *slot = Some(value);
        }
    }
    let mut out = Vec::with_capacity(slots.len());
    for slot in slots {
        match slot {
            Slot::Whole(entry, value) => out.push((entry, value)),
            Slot::Packed(entry, parts) => {
                let Some(parts) = parts.into_iter().collect::<Option<Vec<_>>>() else {
                    continue;
                };
                let joined = if parts.iter().all(|p| p.shape.is_empty()) {
                    parts
                        .iter()
                        .all(|p| p == &parts[0])
                        .then(|| parts[0].clone())
                } else {
                    HostTensor::concat0(&parts)
                };
                let value = joined.ok_or_else(|| TraceError::Mismatch {
                    name: entry.torch.clone(),
                    message: format!(
                        "its slices in burn (shapes {:?}) do not stack into PyTorch's packed tensor",
                        parts.iter().map(|p| p.shape.clone()).collect::<Vec<_>>()
                    ),
                })?;
                out.push((entry, value));
            }
        }
    }
    Ok(out)
}

/// What each of `group`'s burn tensors (the entries PyTorch calls by one name, in module order)
/// gets from the file's tensor `value` of that name: all of it where PyTorch does not pack, its
/// slice (see [`Part`]) for each part of a packed tensor; `None` if `value` does not cut into
/// the parts along dimension 0.
pub(crate) fn cut_parts<'a>(
    value: &HostTensor,
    group: &[&'a ParamEntry],
) -> Option<Vec<(&'a ParamEntry, HostTensor)>> {
    let first = *group.first()?;
    let Some(part) = first.part else {
        return Some(vec![(first, value.clone())]);
    };
    let slices = value.split0(part.of)?;
    group
        .iter()
        .map(|entry| {
            let index = entry.part.map_or(0, |p| p.index);
            Some((*entry, slices.get(index)?.clone()))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{TorchNames, param_paths, param_values};
    use burn::module::Module;
    use burn::tensor::{Device, Tensor};

    /// (PyTorch name, shape) of each recorded value, in order.
    fn torch_shapes(values: &[(ParamEntry, HostTensor)]) -> Vec<(&str, Vec<usize>)> {
        values
            .iter()
            .map(|(e, v)| (e.torch.as_str(), v.shape.clone()))
            .collect()
    }

    #[derive(Module, Debug)]
    struct Recurrent {
        gru: burn::nn::Gru,
        lstm: burn::nn::BiLstm,
    }

    fn recurrent(device: &Device) -> Recurrent {
        Recurrent {
            gru: burn::nn::GruConfig::new(3, 4, true).init(device),
            lstm: burn::nn::BiLstmConfig::new(4, 2, true).init(device),
        }
    }

    #[test]
    fn recurrent_gates_stack_into_pytorchs_packed_tensors_in_pytorchs_gate_order() {
        let device = Device::default();
        let rnn = recurrent(&device);
        let values = param_values(&rnn, &TorchNames::new()).unwrap();
        let shapes = torch_shapes(&values);
        let mut expect = vec![
            ("gru.weight_ih_l0", vec![12, 3]),
            ("gru.bias_ih_l0", vec![12]),
            ("gru.weight_hh_l0", vec![12, 4]),
            ("gru.bias_hh_l0", vec![12]),
        ];
        for suffix in ["", "_reverse"] {
            let name = |n: &str| -> &'static str { format!("lstm.{n}_l0{suffix}").leak() };
            expect.extend([
                (name("weight_ih"), vec![8, 4]),
                (name("bias_ih"), vec![8]),
                (name("weight_hh"), vec![8, 2]),
                (name("bias_hh"), vec![8]),
            ]);
        }
        assert_eq!(shapes, expect);
        let value = |name: &str| {
            values
                .iter()
                .find(|(e, _)| e.torch == name)
                .unwrap()
                .1
                .clone()
        };
        let burn = |t: Tensor<2>| HostTensor::from_data(t.into_data()).unwrap().transposed();
        let rows = |t: HostTensor, of: usize| t.split0(of).unwrap();
        // GRU: reset, update, new; burn's Linear weights are [in, out], PyTorch's rows are [out, in].
        let gru = rows(value("gru.weight_ih_l0"), 3);
        assert_eq!(
            gru[0],
            burn(rnn.gru.reset_gate.input_transform.weight.val())
        );
        assert_eq!(
            gru[1],
            burn(rnn.gru.update_gate.input_transform.weight.val())
        );
        assert_eq!(gru[2], burn(rnn.gru.new_gate.input_transform.weight.val()));
        // LSTM: input, forget, cell, output; the reverse direction is PyTorch's `_reverse`.
        let lstm = rows(value("lstm.weight_hh_l0_reverse"), 4);
        let reverse = &rnn.lstm.reverse;
        assert_eq!(
            lstm[0],
            burn(reverse.input_gate.hidden_transform.weight.val())
        );
        let forget = reverse.forget_gate.as_ref().unwrap();
        assert_eq!(lstm[1], burn(forget.hidden_transform.weight.val()));
        assert_eq!(
            lstm[2],
            burn(reverse.cell_gate.hidden_transform.weight.val())
        );
        assert_eq!(
            lstm[3],
            burn(reverse.output_gate.hidden_transform.weight.val())
        );
        let entry = param_paths(&rnn)
            .into_iter()
            .find(|e| e.path == "lstm.forward.cell_gate.input_transform.bias")
            .unwrap();
        assert_eq!(entry.torch, "lstm.bias_ih_l0");
        assert_eq!(entry.part, Some(Part { index: 2, of: 4 }));
    }

    #[derive(Module, Debug)]
    struct Encoder {
        attn: burn::nn::attention::MultiHeadAttention,
    }

    #[test]
    fn attention_projections_stack_into_pytorchs_in_proj_and_the_output_is_out_proj() {
        let device = Device::default();
        let encoder = Encoder {
            attn: burn::nn::attention::MultiHeadAttentionConfig::new(4, 2).init(&device),
        };
        let values = param_values(&encoder, &TorchNames::new()).unwrap();
        let shapes = torch_shapes(&values);
        assert_eq!(
            shapes,
            vec![
                ("attn.in_proj_weight", vec![12, 4]),
                ("attn.in_proj_bias", vec![12]),
                ("attn.out_proj.weight", vec![4, 4]),
                ("attn.out_proj.bias", vec![4]),
            ]
        );
        let burn = |t: Tensor<2>| HostTensor::from_data(t.into_data()).unwrap().transposed();
        let rows = values[0].1.split0(3).unwrap();
        assert_eq!(rows[0], burn(encoder.attn.query.weight.val()));
        assert_eq!(rows[1], burn(encoder.attn.key.weight.val()));
        assert_eq!(rows[2], burn(encoder.attn.value.weight.val()));
        assert_eq!(values[2].1, burn(encoder.attn.output.weight.val()));
    }

    #[derive(Module, Debug)]
    struct Stacked {
        rnn: Vec<burn::nn::Lstm>,
    }

    #[test]
    fn a_stack_of_burn_lstms_renames_to_pytorchs_num_layers_names() {
        let device = Device::default();
        let stacked = Stacked {
            rnn: vec![
                burn::nn::LstmConfig::new(3, 2, true).init(&device),
                burn::nn::LstmConfig::new(2, 2, true).init(&device),
            ],
        };
        // the rename rust/README.md gives for PyTorch's `nn.LSTM(3, 2, num_layers=2)`
        let names = TorchNames::new()
            .rename(r"^rnn\.(\d+)\.(\w+)_l0$", "rnn.${2}_l$1")
            .unwrap();
        let values = param_values(&stacked, &names).unwrap();
        let shapes = torch_shapes(&values);
        assert_eq!(
            shapes,
            vec![
                ("rnn.weight_ih_l0", vec![8, 3]),
                ("rnn.bias_ih_l0", vec![8]),
                ("rnn.weight_hh_l0", vec![8, 2]),
                ("rnn.bias_hh_l0", vec![8]),
                ("rnn.weight_ih_l1", vec![8, 2]),
                ("rnn.bias_ih_l1", vec![8]),
                ("rnn.weight_hh_l1", vec![8, 2]),
                ("rnn.bias_hh_l1", vec![8]),
            ]
        );
    }

    #[test]
    fn a_packed_tensor_with_a_slice_absent_is_left_out_whole() {
        let rnn = recurrent(&Device::default());
        let mut values = param_values(&rnn, &TorchNames::new()).unwrap();
        // Back to slices, then drop one gate's: as when a gate has no gradient.
        let entries = param_paths(&rnn);
        let mut slices: Vec<(ParamEntry, HostTensor)> = Vec::new();
        for entry in entries.iter().filter(|e| e.torch.starts_with("gru.")) {
            let (_, packed) = values.iter().find(|(e, _)| e.torch == entry.torch).unwrap();
            let part = entry.part.unwrap();
            slices.push((
                entry.clone(),
                packed.split0(part.of).unwrap()[part.index].clone(),
            ));
        }
        let repacked = pack_parts(slices.clone()).unwrap();
        values.truncate(4);
        assert_eq!(repacked, values, "slices stack back into the same tensors");
        slices.remove(0);
        let names: Vec<String> = pack_parts(slices)
            .unwrap()
            .into_iter()
            .map(|(e, _)| e.torch)
            .collect();
        assert_eq!(
            names,
            vec!["gru.bias_ih_l0", "gru.weight_hh_l0", "gru.bias_hh_l0"]
        );
    }
}
