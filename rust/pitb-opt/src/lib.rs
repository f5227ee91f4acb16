//! The two ways of writing a training step behind `&mut Mlp` that page 001 compares:
//! the one rustc's `.clone()` suggestion leads to (the update is dropped) and the fix.

use a1::{Mlp, a1_data, ce};
use burn::optim::{GradientsParams, ModuleOptimizer};
use burn::tensor::Device;

/// One step that hands a clone to the optimizer and drops what it returns: the model never
/// changes, but a stateful optimizer (Adam) still records the step. Returns the loss before it.
pub fn train_step_discarding(
    model: &mut Mlp,
    optim: &mut ModuleOptimizer,
    lr: f64,
    device: &Device,
) -> f32 {
    let (x, y) = a1_data(device);
    let loss = ce(device).forward(model.forward(x), y);
    let v: f32 = loss.clone().into_scalar();
    let grads = GradientsParams::from_grads(loss.backward(), &*model);
    debug_assert_eq!(grads.len(), 4, "every A1 parameter has a gradient");
    optim.step(lr, model.clone(), grads);
    v
}

/// One step written correctly: the returned model is assigned back through the reference.
/// Returns the loss before the step.
pub fn train_step(model: &mut Mlp, optim: &mut ModuleOptimizer, lr: f64, device: &Device) -> f32 {
    let (x, y) = a1_data(device);
    let loss = ce(device).forward(model.forward(x), y);
    let v: f32 = loss.clone().into_scalar();
    let grads = GradientsParams::from_grads(loss.backward(), &*model);
    debug_assert_eq!(grads.len(), 4, "every A1 parameter has a gradient");
    *model = optim.step(lr, model.clone(), grads);
    v
}
