//! S7: the step written the PyTorch way, without taking the returned model.
//! This must NOT compile: rustc rejects it with E0382 and suggests `.clone()`.
//! It is built only with `--features noassign`.

use a1::{a1_data, a1_model, ce};
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::Device;

fn main() {
    let device = Device::default().autodiff();
    let (x, y) = a1_data(&device);
    let ce = ce(&device);
    let model = a1_model(&device);
    let mut optim = SgdConfig::new().init();
    let loss = ce.forward(model.forward(x.clone()), y.clone());
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    optim.step(0.1, model, grads);
    let loss2 = ce.forward(model.forward(x), y);
    println!("loss after {loss2}");
}
