//! S15: the dropped step of `discard`, with rustc's allow-by-default `unused_results` lint
//! turned on. It compiles, and rustc warns "unused result of type `Mlp`" on the step.
#![warn(unused_results)]

use a1::{a1_data, a1_model, ce};
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::Device;

fn main() {
    let device = Device::default().autodiff();
    let (x, y) = a1_data(&device);
    let model = a1_model(&device);
    let mut optim = SgdConfig::new().init();
    let loss = ce(&device).forward(model.forward(x), y);
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    optim.step(0.1, model.clone(), grads);
    println!("the step's result was dropped; rustc warned about it at build time");
}
