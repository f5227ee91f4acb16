//! An init file's batches: the inputs of each step, and the layers' inputs of each forward pass.

use burn::tensor::{Device, Int, IntDType, Tensor};

use super::InitFile;
use crate::{HostDType, HostTensor, TraceError};

impl InitFile {
    /// The names of the inputs (`x`, `y`, ...).
    pub fn input_names(&self) -> Vec<&str> {
        self.file
            .tensors
            .keys()
            .filter_map(|k| k.strip_prefix("inputs."))
            .collect()
    }

    /// How many batches the file holds: 1 when one batch (`inputs.*`) feeds every step, N when
    /// the PyTorch side fed a different batch at each of its N steps (`inputs.*` for step 0,
    /// `step{k}.inputs.*` for step k >= 1) or recorded its layers' inputs for N forward passes
    /// (`step{k}.layer_inputs.*`, an init file made from a forward trace).
    pub fn batches(&self) -> usize {
        self.file
            .tensors
            .keys()
            .filter_map(|k| step_of(k, "inputs.").or_else(|| step_of(k, "layer_inputs.")))
            .max()
            .map_or(1, |last| last + 1)
    }

    /// How many batches of inputs the file holds (1: `inputs.*` feeds every step).
    fn input_batches(&self) -> usize {
        self.file
            .tensors
            .keys()
            .filter_map(|k| step_of(k, "inputs."))
            .max()
            .map_or(1, |last| last + 1)
    }

    /// Refuse `count` forward passes or steps where the file holds fewer batches than that, one
    /// per pass (a file with one batch feeds it to every pass, as it feeds every training step).
    pub(crate) fn check_batches(&self, count: usize, flag: &str) -> Result<(), TraceError> {
        let batches = self.batches();
        if count > batches && batches > 1 {
            return Err(TraceError::Format {
                path: self.file.path.clone(),
                message: format!(
                    "{flag} {count} asks for more batches than the file's {batches} (batch 0 to \
                     batch {}); run the port for as many batches as the PyTorch trace has",
                    batches - 1
                ),
            });
        }
        Ok(())
    }

    /// Input `name` of the batch step `step` trains on, as the file holds it: step 0's
    /// `inputs.{name}` for every step when the file has one batch, otherwise
    /// `step{step}.inputs.{name}`.
    pub fn input_at(&self, step: usize, name: &str) -> Result<&HostTensor, TraceError> {
        let batches = self.batches();
        let inputs = self.input_batches();
        if step >= batches && batches > 1 {
            return Err(TraceError::Format {
                path: self.file.path.clone(),
                message: format!(
                    "no batch for step {step}: the file holds one batch per step for {batches} steps \
                     (step 0 to step {}); run the port for as many steps as the PyTorch trace has",
                    batches - 1
                ),
            });
        }
        let key = input_key(if inputs == 1 { 0 } else { step }, name);
        self.file
            .tensors
            .get(&key)
            .ok_or_else(|| TraceError::Format {
                path: self.file.path.clone(),
                message: format!("no tensor `{key}` (inputs here: {:?})", self.input_names()),
            })
    }

    /// Float input `name` of step `step`'s batch (see [`input_at`](Self::input_at)) as a burn
    /// tensor of rank `D` on `device`, bit for bit.
    pub fn float_input_at<const D: usize>(
        &self,
        step: usize,
        name: &str,
        device: &Device,
    ) -> Result<Tensor<D>, TraceError> {
        let input = self.input_at(step, name)?;
        float_tensor(&format!("inputs.{name}"), input, "int_input", device)
    }

    /// Integer input `name` of step `step`'s batch (see [`input_at`](Self::input_at)) as a burn
    /// tensor of rank `D` on `device`.
    pub fn int_input_at<const D: usize>(
        &self,
        step: usize,
        name: &str,
        device: &Device,
    ) -> Result<Tensor<D, Int>, TraceError> {
        let input = self.input_at(step, name)?;
        int_tensor(&format!("inputs.{name}"), input, "float_input", device)
    }

    /// Refuse batch `step`'s integer inputs that `device`'s integers cannot hold, as
    /// [`int_input_at`](Self::int_input_at) on that device would: checked before a forward pass
    /// runs under graph capture, whose device holds them all and whose replay would panic.
    pub(crate) fn check_int_inputs(&self, step: usize, device: &Device) -> Result<(), TraceError> {
        for name in self.input_names() {
            let input = self.input_at(step, name)?;
            if input.dtype == HostDType::I64 {
                check_int_range(
                    &format!("inputs.{name}"),
                    input,
                    device.settings().int_dtype,
                )?;
            }
        }
        Ok(())
    }

    /// The modules whose input the file holds for forward pass `step` (`step{step}.layer_inputs.*`,
    /// what PyTorch fed each module: an init file made from a forward trace), in name order.
    pub fn layer_inputs(&self, step: usize) -> Vec<&str> {
        let prefix = format!("step{}.layer_inputs.", self.layer_step(step));
        self.file
            .tensors
            .keys()
            .filter_map(|k| k.strip_prefix(prefix.as_str()))
            .collect()
    }

    /// The step whose layer inputs forward pass `step` reads: its own, or step 0's when the file
    /// holds one batch (which feeds every pass).
    fn layer_step(&self, step: usize) -> usize {
        if self.batches() == 1 { 0 } else { step }
    }

    /// What PyTorch fed module `module` (its module path, `encoder.gru`) in forward pass `step`:
    /// the file's `step{step}.layer_inputs.{module}` (step 0's for every pass when the file holds
    /// one batch). For layer isolation: feed one layer PyTorch's input to judge it without the
    /// drift of the layers before it. A module the file does not hold is an error naming it and
    /// listing those it holds, the most alike first.
    pub fn layer_input_at(&self, step: usize, module: &str) -> Result<&HostTensor, TraceError> {
        let batches = self.batches();
        if step >= batches && batches > 1 {
            return Err(TraceError::Format {
                path: self.file.path.clone(),
                message: format!(
                    "no layer input for batch {step}: the file holds {batches} batches (batch 0 to batch {})",
                    batches - 1
                ),
            });
        }
        let key = format!("step{}.layer_inputs.{module}", self.layer_step(step));
        if let Some(tensor) = self.file.tensors.get(&key) {
            return Ok(tensor);
        }
        let mut recorded = self.layer_inputs(step);
        let message = if recorded.is_empty() {
            format!(
                "no input of module `{module}` for batch {step}: the file records no layer inputs \
                 (make it from a trace recorded with `burnside.torch.record_forward(..., layer_inputs=True)`)"
            )
        } else {
            // the most alike first, by the whole path or by its last segment (a module moved
            // under another parent keeps its own name)
            let leaf = |s: &str| s.rsplit('.').next().unwrap_or(s).to_string();
            let alike = |c: &str| {
                let whole = textdistance::nstr::jaro_winkler(module, c);
                whole.max(textdistance::nstr::jaro_winkler(&leaf(module), &leaf(c)))
            };
            recorded.sort_by(|a, b| alike(b).total_cmp(&alike(a)));
            format!(
                "no input of module `{module}` for batch {step}; the file records the inputs of: {}",
                recorded
                    .iter()
                    .map(|m| format!("`{m}`"))
                    .collect::<Vec<_>>()
                    .join(", ")
            )
        };
        Err(TraceError::Format {
            path: self.file.path.clone(),
            message,
        })
    }

    /// What PyTorch fed module `module` in forward pass `step` (see
    /// [`layer_input_at`](Self::layer_input_at)) as a float burn tensor of rank `D` on
    /// `device`, bit for bit.
    pub fn float_layer_input_at<const D: usize>(
        &self,
        step: usize,
        module: &str,
        device: &Device,
    ) -> Result<Tensor<D>, TraceError> {
        let input = self.layer_input_at(step, module)?;
        float_tensor(
            &format!("layer_inputs.{module}"),
            input,
            "int_layer_input",
            device,
        )
    }

    /// What PyTorch fed module `module` in forward pass `step` as an integer burn tensor of rank
    /// `D` (an embedding's token ids).
    pub fn int_layer_input_at<const D: usize>(
        &self,
        step: usize,
        module: &str,
        device: &Device,
    ) -> Result<Tensor<D, Int>, TraceError> {
        let input = self.layer_input_at(step, module)?;
        int_tensor(
            &format!("layer_inputs.{module}"),
            input,
            "layer_input",
            device,
        )
    }
}

/// The tensor name of input `name` in step `step`'s batch: step 0's is `inputs.{name}`, as
/// in an init file with one batch, so a port that reads only step 0 reads either kind of file.
fn input_key(step: usize, name: &str) -> String {
    if step == 0 {
        format!("inputs.{name}")
    } else {
        format!("step{step}.inputs.{name}")
    }
}

/// `k` of a `step{k}.{stage}{name}` tensor name (`stage` as `inputs.`).
fn step_of(key: &str, stage: &str) -> Option<usize> {
    let (step, rest) = key.strip_prefix("step")?.split_once('.')?;
    rest.starts_with(stage).then(|| step.parse().ok()).flatten()
}

/// `tensor` (the file's `name`) as a float burn tensor of rank `D` on `device`; an integer
/// tensor is refused, pointing at `int_reader`.
fn float_tensor<const D: usize>(
    name: &str,
    tensor: &HostTensor,
    int_reader: &str,
    device: &Device,
) -> Result<Tensor<D>, TraceError> {
    check_rank(name, tensor, D)?;
    if tensor.dtype == HostDType::I64 {
        return Err(TraceError::Mismatch {
            name: name.to_string(),
            message: format!("is an integer tensor; read it with {int_reader}"),
        });
    }
    Ok(Tensor::from_data(tensor.to_data(), device))
}

/// `tensor` (the file's `name`) as an integer burn tensor of rank `D` on `device`; a float
/// tensor is refused, pointing at `float_reader`.
fn int_tensor<const D: usize>(
    name: &str,
    tensor: &HostTensor,
    float_reader: &str,
    device: &Device,
) -> Result<Tensor<D, Int>, TraceError> {
    check_rank(name, tensor, D)?;
    if tensor.dtype != HostDType::I64 {
        return Err(TraceError::Mismatch {
            name: name.to_string(),
            message: format!("is a float tensor; read it with {float_reader}"),
        });
    }
    check_int_range(name, tensor, device.settings().int_dtype)?;
    Ok(Tensor::from_data(tensor.to_data(), device))
}

/// An error naming the first element of the i64 tensor `tensor` that burn's `int_dtype`
/// cannot hold (burn panics converting it), if there is one.
fn check_int_range(name: &str, tensor: &HostTensor, int_dtype: IntDType) -> Result<(), TraceError> {
    let (low, high): (i64, i64) = match int_dtype {
        IntDType::I64 => (i64::MIN, i64::MAX),
        IntDType::I32 => (i32::MIN.into(), i32::MAX.into()),
        IntDType::I16 => (i16::MIN.into(), i16::MAX.into()),
        IntDType::I8 => (i8::MIN.into(), i8::MAX.into()),
        IntDType::U64 => (0, i64::MAX),
        IntDType::U32 => (0, u32::MAX.into()),
        IntDType::U16 => (0, u16::MAX.into()),
        IntDType::U8 => (0, u8::MAX.into()),
    };
    let values = tensor.to_i64().unwrap_or_default();
    match values
        .iter()
        .enumerate()
        .find(|(_, v)| !(low..=high).contains(*v))
    {
        Some((index, value)) => Err(TraceError::Mismatch {
            name: name.to_string(),
            message: format!(
                "element {index} is {value}, which burn's {int_dtype:?} integers on this device cannot hold \
                 ({low} to {high}); a class label or an index is never this large"
            ),
        }),
        None => Ok(()),
    }
}

fn check_rank(name: &str, tensor: &HostTensor, rank: usize) -> Result<(), TraceError> {
    if tensor.shape.len() != rank {
        return Err(TraceError::Mismatch {
            name: name.to_string(),
            message: format!("has shape {:?}, asked for rank {rank}", tensor.shape),
        });
    }
    Ok(())
}
