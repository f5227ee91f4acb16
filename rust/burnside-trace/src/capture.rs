//! Tap-free recording of a forward pass: the port's unchanged forward runs under burn's graph
//! capture (burn-capture: a device that records each operation instead of computing it), and the
//! captured graph is replayed op by op on the Flex CPU backend by burn-router's interpreter, the
//! output of every operation read as it is made. The replay computes what the eager forward does,
//! bit for bit (the same Flex kernels on the same inputs, in the same order).
//!
//! What is recorded for each batch: every float output of an operation that depends on the
//! batch's data (not on parameters alone: a weight's reshape is not recorded) as
//! `step{k}.captured.{n}`, `n` the operation's place in the graph, and in the metadata `captured`
//! the graph itself: each operation's kind, the tensors it reads and makes, and which of them are
//! the model's parameters (by their PyTorch names) and the batch's inputs. Which PyTorch module
//! each output stands for is decided by the comparison, which has PyTorch's trace
//! (`burnside.compare.captured`).
//!
//! A forward pass that cannot be captured (it reads a tensor's values, mixes in a tensor from
//! another device, uses a shape that depends on the data) falls back to the eager forward, whose
//! layers only taps record, with one line on stderr saying why.

use std::cell::{Cell, RefCell};
use std::collections::{BTreeMap, BTreeSet};
use std::panic::{AssertUnwindSafe, catch_unwind};

use burn::module::{Module, ModuleMapper, ModuleVisitor, Param};
use burn::tensor::{DType, Device, Int, Tensor, TensorData};
use burn_capture::CaptureBackend;
use burn_flex::{Flex, FlexTensor};
use burn_ir::{BaseOperationIr, HandleKind, OperationIr, TensorId, TensorIr, TensorStatus};
use burn_router::TensorInterpreter;

use serde_json::{Value, json};

use crate::{HostTensor, ParamEntry, TraceError};

thread_local! {
    /// Set while a capture runs on this thread: `run_port`'s panic hook keeps a panic's message
    /// here instead of printing it (a panic under capture is a fallback, or a crash reported
    /// with what was captured before it).
    static CAPTURING: Cell<bool> = const { Cell::new(false) };
    static PANIC: RefCell<Option<String>> = const { RefCell::new(None) };
}

/// Whether a capture runs on this thread; the panic hook then calls [`keep_panic`].
pub(crate) fn capturing() -> bool {
    CAPTURING.with(Cell::get)
}

/// Keep a panic's message (and where it was raised) for the capture that caught it.
pub(crate) fn keep_panic(info: &std::panic::PanicHookInfo<'_>) {
    let payload = info
        .payload()
        .downcast_ref::<&str>()
        .map(|s| s.to_string())
        .or_else(|| info.payload().downcast_ref::<String>().cloned())
        .unwrap_or_else(|| "a panic".to_string());
    let place = info
        .location()
        .map(|l| format!(" at {}:{}", l.file(), l.line()))
        .unwrap_or_default();
    PANIC.with(|p| *p.borrow_mut() = Some(format!("{payload}{place}")));
}

/// How a forward pass on the port's device is captured.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Mode {
    /// On Flex without autodiff: the replay computes what the eager forward does and is the record.
    Replace,
    /// On Flex with autodiff: the port's eager forward is the record; the replay (without autodiff,
    /// where burn's BatchNorm uses its running statistics) is recorded beside it, its layers used
    /// only where its output is the eager one bit for bit.
    Beside,
}

/// How a forward pass on `device` can be recorded tap-free: the replay runs on Flex, so the port's
/// device must be Flex (with autodiff: beside the eager forward).
pub(crate) fn capturable(device: &Device) -> Result<Mode, String> {
    let inner = device.clone().inner();
    if !matches!(inner.as_dispatch(), burn_dispatch::DispatchDevice::Flex(_)) {
        return Err(format!(
            "the port runs on {device:?}; tap-free recording replays on the Flex CPU device only"
        ));
    }
    Ok(if device.is_autodiff() {
        Mode::Beside
    } else {
        Mode::Replace
    })
}

/// The id of a float `tensor` on the capture device, if it is a captured tensor.
pub(crate) fn tensor_id<const D: usize>(tensor: &Tensor<D>) -> Option<TensorId> {
    tensor
        .clone()
        .try_into_primitive::<CaptureBackend>()
        .ok()
        .map(|p| p.id())
}

/// The id of an integer `tensor` on the capture device, if it is a captured tensor.
pub(crate) fn int_tensor_id<const D: usize>(tensor: &Tensor<D, Int>) -> Option<TensorId> {
    tensor
        .clone()
        .try_into_primitive::<CaptureBackend>()
        .ok()
        .map(|p| p.id())
}

/// What a batch's forward pass under capture asked to record, kept until the replay has the
/// values: the inputs it read (recorded from the init file's bytes), the taps, the named outputs.
#[derive(Debug, Default)]
pub(crate) struct Deferred {
    pub(crate) inputs: Vec<(String, TensorData, Option<TensorId>)>,
    pub(crate) taps: Vec<(String, TensorId)>,
    pub(crate) outputs: Vec<(String, TensorId)>,
}

/// Each float tensor of a module (on the capture device) with its burn path and tensor id.
#[derive(Default)]
struct Ids {
    stack: Vec<String>,
    found: Vec<(String, TensorId)>,
}

impl ModuleVisitor for Ids {
    fn enter_module(&mut self, name: &str, _container_type: &str) {
        self.stack.push(name.to_string());
    }

    fn exit_module(&mut self, _name: &str, _container_type: &str) {
        self.stack.pop();
    }

    fn visit_float<const D: usize>(&mut self, param: &Param<Tensor<D>>) {
        if let Some(id) = tensor_id(&param.val()) {
            self.found.push((self.stack.join("."), id));
        }
    }
}

/// One batch's captured forward pass, replayed: what to record.
pub(crate) struct Replayed {
    /// `(name under step{k}., tensor)` in graph order: `captured.{n}`, then taps and outputs.
    pub(crate) tensors: Vec<(String, HostTensor)>,
    /// The graph, as the metadata `captured` holds it for this batch (JSON).
    pub(crate) graph: String,
    /// The model's returned output, if it returned one.
    pub(crate) output: Option<HostTensor>,
    /// The named outputs (`Batch::output`), by name.
    pub(crate) named: Vec<(String, HostTensor)>,
    /// The inputs the forward pass read, to record as the batch's inputs.
    pub(crate) inputs: Vec<(String, TensorData)>,
    /// The taps, by PyTorch module path.
    pub(crate) taps: Vec<(String, HostTensor)>,
    /// A panic or an error of the forward pass itself, after which nothing was captured: the
    /// replay holds what ran before it.
    pub(crate) crashed: Option<String>,
}

/// Capture `forward` of `model` (a clone moved to a capture device) and replay it on Flex.
///
/// `entries` are the model's float tensors as the recorder names them (module order); the
/// closure runs with the clone and the `Deferred` its batch fills. `Err(why)`: the forward pass
/// cannot be captured (the caller runs it eagerly instead).
pub(crate) fn capture_batch<M: Module, O>(
    model: &M,
    entries: &[ParamEntry],
    forward: impl FnOnce(&M, &Device, &mut Deferred) -> Result<O, Box<dyn std::error::Error>>,
    output_id: impl FnOnce(&O) -> Option<TensorId>,
) -> Result<Replayed, String> {
    capture_pass(model, forward, output_id)?.replay(entries, None)
}

/// A batch's forward pass captured and not yet replayed: its graph (the operations to run), the
/// model's tensor ids, what the batch asked to record.
pub(crate) struct Pending {
    captured: burn_capture::CapturedGraph,
    found: Vec<(String, TensorId)>,
    stand_ins: StandIns,
    deferred: Deferred,
    out: Option<TensorId>,
    crashed: Option<String>,
}

/// Where a replay writes each operation's output as it makes it (`captured.{n}`, its value).
pub(crate) type Sink<'a> = &'a mut dyn FnMut(String, HostTensor) -> Result<(), TraceError>;

impl Pending {
    /// The operations the replay runs (an upper bound on the tensors it records).
    pub(crate) fn operations(&self) -> usize {
        self.captured
            .graph
            .operations
            .iter()
            .filter(|op| !is_init(op))
            .count()
    }

    /// Replay the graph on Flex. With a `sink`, each operation's output goes to it as the replay
    /// makes it (one at a time in memory, and `Replayed::tensors` holds none); without one,
    /// `Replayed::tensors` holds them all (a capture beside an eager pass, kept or not after it).
    pub(crate) fn replay(
        self,
        entries: &[ParamEntry],
        sink: Option<Sink<'_>>,
    ) -> Result<Replayed, String> {
        replay(self, entries, sink)
    }
}

/// Capture `forward` of `model` (a clone moved to a capture device), not yet replayed: see
/// [`capture_batch`].
pub(crate) fn capture_pass<M: Module, O>(
    model: &M,
    forward: impl FnOnce(&M, &Device, &mut Deferred) -> Result<O, Box<dyn std::error::Error>>,
    output_id: impl FnOnce(&O) -> Option<TensorId>,
) -> Result<Pending, String> {
    let device = Device::capture();
    let mut deferred = Deferred::default();
    let mut ids = Ids::default();
    let mut stand_ins = StandIns {
        device: device.clone(),
        eager: BTreeMap::new(),
    };
    let mut crashed: Option<String> = None;
    let mut out: Option<TensorId> = None;
    CAPTURING.with(|c| c.set(true));
    PANIC.with(|p| p.borrow_mut().take());
    let captured = catch_unwind(AssertUnwindSafe(|| {
        device.capture_scope(|scope| {
            // autodiff is left behind first (a capture device takes no autodiff tensor); on a
            // plain device `valid` changes nothing the forward pass computes. The float
            // parameters become stand-ins (see `StandIns`), the rest moves to the capture device.
            let moved = model.valid().map(&mut stand_ins).to_device(&device);
            moved.visit(&mut ids);
            let ran = catch_unwind(AssertUnwindSafe(|| forward(&moved, &device, &mut deferred)));
            match ran {
                Ok(Ok(output)) => out = output_id(&output),
                Ok(Err(error)) => crashed = Some(error.to_string()),
                Err(payload) => {
                    // the hook's report (run_port's), else the payload's own message
                    crashed = Some(
                        PANIC
                            .with(|p| p.borrow_mut().take())
                            .or_else(|| payload.downcast_ref::<String>().cloned())
                            .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
                            .unwrap_or_else(|| "a panic".to_string()),
                    )
                }
            }
            scope.complete([], out)
        })
    }));
    CAPTURING.with(|c| c.set(false));
    let captured = match captured {
        Ok(Ok(captured)) => captured,
        Ok(Err(e)) => {
            return Err(format!(
                "burn's graph capture refused the forward pass: {e}"
            ));
        }
        Err(_) => {
            let why = PANIC.with(|p| p.borrow_mut().take());
            return Err(format!(
                "the forward pass panicked under graph capture: {}",
                why.unwrap_or_else(|| "a panic".to_string())
            ));
        }
    };
    if let Some(why) = &crashed
        && captured
            .graph
            .operations
            .iter()
            .all(|op| is_init(op) || stand_ins.made_by(op).is_some())
    {
        // nothing ran: an error before the first operation (or one capture cannot run)
        return Err(format!(
            "the forward pass failed under graph capture: {why}"
        ));
    }
    if let Some(why) = &crashed
        && is_capture_limit(why)
    {
        // not the port's crash: what it computed needs values capture does not have (a tensor of an
        // earlier batch's capture, such as a cache kept across batches, or one read back to the host)
        return Err(format!(
            "the forward pass reads what graph capture cannot give: {why}"
        ));
    }
    if crashed.is_none() && out.is_none() && deferred.outputs.is_empty() {
        return Err(
            "the forward pass returned a tensor that is not on the capture device \
                    (made on another device, or read back to the host and rebuilt)"
                .into(),
        );
    }
    Ok(Pending {
        captured,
        found: ids.found,
        stand_ins,
        deferred,
        out,
        crashed,
    })
}

/// Whether a panic under capture is capture's limit rather than the port's fault: a tensor made
/// under an earlier capture (a key/value cache the closure keeps from batch to batch: another
/// capture device, or a scope already complete), one made off the capture device, or values read
/// from a captured tensor (`into_data`), which has none.
pub(crate) fn is_capture_limit(why: &str) -> bool {
    why.contains("capture scope is already complete")
        || why.contains("has no concrete value")
        || why.contains("use `try_into_data` instead")
        || (why.contains("not on the same device") && why.contains("Capture("))
}

/// Moves a module's float parameters to the capture device without their values: each becomes
/// an `Empty` tensor there (an operation the graph records, no data), and the replay registers
/// the eager model's own Flex tensor under its id (`Arc`-shared, copy-on-write), so the
/// parameters are neither copied into the capture nor out of it. `to_device` would copy each one
/// into the capture's values and burn-capture copies those again when the scope completes: at
/// GPT-2 size, a gigabyte of fresh pages a batch. A parameter that is no Flex tensor (or whose
/// stand-in would differ in dtype) is left to `to_device`, which moves it with its values.
struct StandIns {
    device: Device,
    /// Each stand-in's id, with the eager tensor it stands for.
    eager: BTreeMap<TensorId, FlexTensor>,
}

impl StandIns {
    fn stand_in<const D: usize>(&mut self, tensor: Tensor<D>) -> Tensor<D> {
        let Ok(flex) = tensor.clone().inner().try_into_primitive::<Flex>() else {
            return tensor;
        };
        let empty = Tensor::<D>::empty(tensor.shape(), (&self.device, tensor.dtype()));
        match tensor_id(&empty) {
            Some(id) if empty.dtype() == tensor.dtype() => {
                self.eager.insert(id, flex);
                empty
            }
            _ => tensor,
        }
    }

    /// The eager tensor `op` stands in for, if it is a stand-in's `Empty`.
    fn made_by(&self, op: &OperationIr) -> Option<&FlexTensor> {
        match op {
            OperationIr::BaseFloat(BaseOperationIr::Empty(desc)) => self.eager.get(&desc.out.id),
            _ => None,
        }
    }
}

impl ModuleMapper for StandIns {
    fn map_float<const D: usize>(&mut self, param: Param<Tensor<D>>) -> Param<Tensor<D>> {
        param.map(|tensor| self.stand_in(tensor))
    }
}

fn is_init(op: &OperationIr) -> bool {
    matches!(op, OperationIr::Init(_))
}

/// The kind of an operation, as burn-ir's debug form names it (`Conv2d`, `Add`, `Relu`, ...).
fn kind(op: &OperationIr) -> String {
    let text = format!("{op:?}");
    // `Module(Conv2d(Conv2dOpIr {`, `NumericFloat(F32, Add(BinaryOpIr {`, `Activation(Relu(`
    let head: &str = text.split(['{']).next().unwrap_or("");
    let parts: Vec<&str> = head
        .split(['(', ',', ' '])
        .filter(|s| !s.is_empty())
        .collect();
    // the innermost name before the op's struct (`Conv2dOpIr`, `BinaryOpIr`)
    let mut found = parts.first().copied().unwrap_or("Op");
    for part in &parts {
        if part.ends_with("Ir") || part.ends_with("Desc") {
            break;
        }
        if part.chars().next().is_some_and(char::is_uppercase) && !is_dtype(part) {
            found = part;
        }
    }
    found.to_string()
}

fn is_dtype(s: &str) -> bool {
    matches!(
        s,
        "F64"
            | "F32"
            | "F16"
            | "BF16"
            | "I64"
            | "I32"
            | "I16"
            | "I8"
            | "U64"
            | "U32"
            | "U16"
            | "U8"
            | "Bool"
    )
}

/// An operation's settings, for the comparison's layer measures: burn-ir's debug form of the
/// operation with the tensors' descriptions left out (`stride: [2, 2], padding: [1, 1], ...`).
fn settings(op: &OperationIr) -> String {
    let text = format!("{op:?}");
    let mut out = String::new();
    let mut rest = text.as_str();
    // drop every `TensorIr { ... }` (balanced braces) and the field name before it
    while let Some(start) = rest.find("TensorIr {") {
        out.push_str(&rest[..start]);
        let mut depth = 0usize;
        let mut end = rest.len();
        for (i, c) in rest[start..].char_indices() {
            match c {
                '{' => depth += 1,
                '}' => {
                    depth -= 1;
                    if depth == 0 {
                        end = start + i + 1;
                        break;
                    }
                }
                _ => {}
            }
        }
        out.push('_');
        rest = &rest[end..];
    }
    out.push_str(rest);
    out
}

fn replay(
    pending: Pending,
    entries: &[ParamEntry],
    mut sink: Option<Sink<'_>>,
) -> Result<Replayed, String> {
    let Pending {
        captured,
        found,
        stand_ins,
        deferred,
        out,
        crashed,
    } = pending;
    // parameters by tensor id, named as the trace names them (a packed part with its place)
    let by_path: BTreeMap<&str, &ParamEntry> =
        entries.iter().map(|e| (e.path.as_str(), e)).collect();
    let mut params: ParamsById = BTreeMap::new();
    for (path, id) in &found {
        if let Some(entry) = by_path.get(path.as_str()) {
            params.insert(
                *id,
                (
                    entry.torch.clone(),
                    path.clone(),
                    entry.part.as_ref().map(|p| (p.index, p.of)),
                ),
            );
        }
    }
    let inputs: BTreeMap<TensorId, &str> = deferred
        .inputs
        .iter()
        .filter_map(|(name, _, id)| id.map(|id| (id, name.as_str())))
        .collect();
    let wanted: BTreeSet<TensorId> = deferred
        .taps
        .iter()
        .chain(deferred.outputs.iter())
        .map(|(_, id)| *id)
        .chain(out)
        .collect();
    // tensors that depend on the batch: every Init that is no parameter (the inputs, constants
    // the forward pass made), and what any operation makes from one
    let mut data: BTreeSet<TensorId> = BTreeSet::new();
    let mut interpreter = TensorInterpreter::<Flex>::new(Default::default());
    let mut values: BTreeMap<TensorId, HostTensor> = BTreeMap::new();
    let mut tensors = Vec::new();
    let mut ops_json = Vec::new();
    let mut n = 0usize;
    // the values move into the interpreter: a copy of every parameter fewer, in time and memory
    for (id, value) in captured.values {
        if !params.contains_key(&id) {
            data.insert(id);
        }
        if wanted.contains(&id) {
            values.insert(
                id,
                HostTensor::from_data(value.clone()).map_err(|e| e.to_string())?,
            );
        }
        interpreter.register_tensor_data_id(id, value);
    }
    for op in captured.graph.operations {
        if is_init(&op) {
            continue;
        }
        if let Some(eager) = stand_ins.made_by(&op) {
            // a parameter: the eager model's tensor itself, not the `Empty` standing in for it
            for made in op.outputs() {
                interpreter.register_tensor_to_device(made.id, HandleKind::Float(eager.clone()));
            }
            continue;
        }
        let reads: Vec<TensorIr> = op.inputs().cloned().collect();
        let makes: Vec<TensorIr> = op.outputs().cloned().collect();
        let on_data = reads.iter().any(|t| data.contains(&t.id));
        if !on_data {
            // a parameter's reshape or transpose (a Linear's bias broadcast): what it makes
            // stands for the parameter where the batch's data reads it
            if let Some(origin) = reads.iter().find_map(|t| params.get(&t.id).cloned()) {
                for made in &makes {
                    params.insert(made.id, origin.clone());
                }
            }
        }
        let op_kind = kind(&op);
        let op_settings = settings(&op);
        interpreter.register_op(op);
        for made in &makes {
            if on_data {
                data.insert(made.id);
            }
            let record = on_data && made.dtype.is_float();
            if !(record || wanted.contains(&made.id)) {
                continue;
            }
            let value = read(&mut interpreter, made)?;
            if wanted.contains(&made.id) {
                values.insert(made.id, value.clone());
            }
            if record {
                let name = format!("captured.{n}");
                match sink.as_mut() {
                    Some(sink) => sink(name, value).map_err(|e| e.to_string())?,
                    None => tensors.push((name, value)),
                }
                ops_json.push(op_json(
                    n,
                    &op_kind,
                    &op_settings,
                    &reads,
                    made,
                    &params,
                    &inputs,
                ));
                n += 1;
            }
        }
    }
    if crashed.is_none()
        && let Some(id) = out
        && !data.contains(&id)
    {
        // a forward pass fed from a parameter (a harness that trains its input): no operation
        // depends on the batch, none is recorded, and the layers could not be told apart
        return Err(
            "the forward pass's output depends on no input of the batch (it is computed \
                    from the parameters alone)"
                .into(),
        );
    }
    let take = |id: &TensorId| values.get(id).cloned();
    let named = deferred
        .outputs
        .iter()
        .filter_map(|(name, id)| take(id).map(|t| (name.clone(), t)))
        .collect();
    let taps = deferred
        .taps
        .iter()
        .filter_map(|(name, id)| take(id).map(|t| (name.clone(), t)))
        .collect();
    let params_json: serde_json::Map<String, Value> = params
        .iter()
        .map(|(id, (torch, path, part))| {
            (
                id.value().to_string(),
                json!([torch, path, part.map(|(i, of)| [i, of])]),
            )
        })
        .collect();
    let inputs_json: serde_json::Map<String, Value> = inputs
        .iter()
        .map(|(id, name)| (id.value().to_string(), json!(name)))
        .collect();
    let graph = json!({
        "params": params_json,
        "inputs": inputs_json,
        "ops": ops_json,
        "output": out.map(|id| id.value()),
        "taps": deferred.taps.iter().map(|(name, id)| json!([name, id.value()])).collect::<Vec<_>>(),
        "crashed": crashed,
    })
    .to_string();
    Ok(Replayed {
        output: out.and_then(|id| take(&id)),
        tensors,
        graph,
        named,
        inputs: deferred
            .inputs
            .into_iter()
            .map(|(n, d, _)| (n, d))
            .collect(),
        taps,
        crashed,
    })
}

/// A tensor's value as the replay made it, read without freeing it.
///
/// A contiguous float tensor's bytes are copied once, from Flex's buffer in place (as
/// [`HostTensor::of`] reads a model's tensor); `read_tensor_async` (`into_data` of a tensor the
/// interpreter still holds) copies them twice into fresh pages, and `from_data` once more.
fn read(
    interpreter: &mut TensorInterpreter<Flex>,
    tensor: &TensorIr,
) -> Result<HostTensor, String> {
    let mut ir = tensor.clone();
    ir.status = TensorStatus::ReadOnly;
    if let HandleKind::Float(flex) = interpreter.get_tensor(&ir)
        && let Some(host) = in_place(&flex)
    {
        return Ok(host);
    }
    let data = burn_std::reader::read_sync(interpreter.read_tensor_async(ir))
        .map_err(|e| format!("the replay of the captured graph could not read a tensor: {e:?}"))?;
    HostTensor::from_data(data).map_err(|e| e.to_string())
}

/// A contiguous F32 or F64 Flex tensor on the host, one copy of its bytes; `None` for another
/// dtype or a strided view (a transpose), read through `into_data` instead.
fn in_place(flex: &FlexTensor) -> Option<HostTensor> {
    if !matches!(flex.dtype(), DType::F32 | DType::F64) {
        return None;
    }
    crate::host_tensor::with_flex_bytes(flex, HostTensor::copied)
}

/// Each parameter's tensor id with its trace name, its module path and, for a part of a packed
/// PyTorch tensor, its place (index, of how many).
type ParamsById = BTreeMap<TensorId, (String, String, Option<(usize, usize)>)>;

fn op_json(
    n: usize,
    kind: &str,
    settings: &str,
    reads: &[TensorIr],
    made: &TensorIr,
    params: &ParamsById,
    inputs: &BTreeMap<TensorId, &str>,
) -> Value {
    let reads: Vec<Value> = reads
        .iter()
        .map(|t| {
            let mut read = json!({"id": t.id.value(), "shape": t.shape.as_slice()});
            if let Some((torch, _, part)) = params.get(&t.id) {
                read["param"] = json!(torch);
                if let Some((i, of)) = part {
                    read["part"] = json!([i, of]);
                }
            } else if let Some(name) = inputs.get(&t.id) {
                read["input"] = json!(name);
            }
            read
        })
        .collect();
    json!({"n": n, "kind": kind, "settings": settings, "reads": reads, "id": made.id.value(),
           "shape": made.shape.as_slice()})
}

/// `Result<(), TraceError>` for a deferred tap of a tensor that is not on the capture device.
pub(crate) fn not_captured(name: &str) -> TraceError {
    TraceError::Mismatch {
        name: name.to_string(),
        message: "is not a tensor of the captured forward pass (made on another device)".into(),
    }
}
