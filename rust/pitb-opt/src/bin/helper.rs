//! S11: the PyTorch-style helper that takes `&mut Mlp` and passes `*model` to the optimizer.
//! This must NOT compile: rustc rejects it with E0507 and suggests `.clone()`.
//! It is built only with `--features helper`.

use a1::{Mlp, a1_data, a1_model, ce};
use burn::optim::{GradientsParams, ModuleOptimizer, SgdConfig};
use burn::tensor::Device;

fn train_step(model: &mut Mlp, optim: &mut ModuleOptimizer, device: &Device) -> f32 {
    let (x, y) = a1_data(device);
    let loss = ce(device).forward(model.forward(x), y);
    let v: f32 = loss.clone().into_scalar();
    let grads = GradientsParams::from_grads(loss.backward(), &*model);
    optim.step(0.1, *model, grads);
    v
}

fn main() {
    let device = Device::default().autodiff();
    let mut model = a1_model(&device);
    let mut optim = SgdConfig::new().init();
    let losses: Vec<f32> = (0..3)
        .map(|_| train_step(&mut model, &mut optim, &device))
        .collect();
    println!("losses {losses:?}");
}
