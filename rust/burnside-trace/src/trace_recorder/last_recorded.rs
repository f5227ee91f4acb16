//! The global slot the panic hook reads: what the recording had got to when a port panicked.

/// The name and shape of the tensor recorded last, for a port that panics afterwards (a shape
/// mismatch inside burn): `run_port`'s panic hook says where the recording had got to.
static LAST_RECORDED: std::sync::Mutex<Option<(String, Vec<usize>)>> = std::sync::Mutex::new(None);

/// The layer outputs (and outputs) recorded at the step being recorded, by name and shape, for the
/// panic hook: a port that panics on a shape (a ConvTranspose2d without its output_padding) says
/// which of its layers' shapes it had recorded, and `burnside check` names the first that parts.
static STEP_SHAPES: std::sync::Mutex<Vec<(String, Vec<usize>)>> = std::sync::Mutex::new(Vec::new());
/// At most this many shapes are kept for a step.
const STEP_SHAPES_KEPT: usize = 4096;

pub(super) fn note_recorded(name: &str, shape: &[usize]) {
    if name.contains(".activations.") || name.contains(".outputs.") || name.ends_with(".logits") {
        let mut shapes = STEP_SHAPES.lock().unwrap_or_else(|e| e.into_inner());
        let step = name.split('.').next().unwrap_or("");
        if shapes
            .first()
            .is_some_and(|(first, _)| first.split('.').next() != Some(step))
        {
            shapes.clear(); // a new step: the shapes of the one that panics are what tells
        }
        if shapes.len() < STEP_SHAPES_KEPT {
            shapes.push((name.to_string(), shape.to_vec()));
        }
    }
    let mut last = LAST_RECORDED.lock().unwrap_or_else(|e| e.into_inner());
    match last.as_mut() {
        Some((n, s)) => {
            n.clear();
            n.push_str(name);
            s.clear();
            s.extend_from_slice(shape);
        }
        None => *last = Some((name.to_string(), shape.to_vec())),
    }
}

/// `burnside-trace: recorded NAME [SHAPE]` for each layer output of the step being recorded, the
/// lines the panic hook prints before the last one.
pub(crate) fn recorded_shape_lines() -> Vec<String> {
    let shapes = STEP_SHAPES.lock().unwrap_or_else(|e| e.into_inner());
    shapes
        .iter()
        .map(|(name, shape)| format!("burnside-trace: recorded {name} {shape:?}"))
        .collect()
}

/// `burnside-trace: last recorded NAME [SHAPE]`, the line the panic hook prints last (None before
/// any tensor was recorded).
pub(crate) fn last_recorded_line() -> Option<String> {
    let last = LAST_RECORDED.lock().unwrap_or_else(|e| e.into_inner());
    last.as_ref()
        .map(|(name, shape)| format!("burnside-trace: last recorded {name} {shape:?}"))
}
