//! S8: `noassign` with the `.clone()` rustc suggests. It compiles without a warning and the
//! step's result is dropped: the loss after equals the loss before. Last line: `JSON: {...}`.

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
    let loss1: f32 = loss.clone().into_scalar();
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    optim.step(0.1, model.clone(), grads);
    let loss2: f32 = ce.forward(model.forward(x), y).into_scalar();
    println!("loss before {loss1}  loss after {loss2}");
    println!(
        "JSON: {}",
        serde_json::json!({"loss_before": loss1, "loss_after": loss2,
            "bits": [loss1.to_bits(), loss2.to_bits()]})
    );
}
