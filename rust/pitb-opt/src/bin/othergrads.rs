//! S14: gradients from `model` paired with `other` (same values, fresh ParamIds): the
//! container is empty and the step silently changes nothing. Last line: `JSON: {...}`.
//!
//! `othergrads --checked` (S16) makes the same pairing behind the page's check,
//! `debug_assert_eq!(grads.len(), 4)`, which stops it with a panic (debug assertions are on
//! for this crate's release builds, see the workspace's Cargo.toml).

use a1::{a1_data, a1_model, ce};
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::Device;

fn fc2_bias(m: &a1::Mlp) -> Vec<f32> {
    m.fc2
        .bias
        .as_ref()
        .expect("bias")
        .val()
        .into_data()
        .try_to_vec::<f32>()
        .expect("f32")
}

fn main() {
    let device = Device::default().autodiff();
    let (x, y) = a1_data(&device);
    let mut optim = SgdConfig::new().init();
    let model = a1_model(&device);
    let other = a1_model(&device); // same values, new ParamIds
    let loss = ce(&device).forward(model.forward(x), y);
    let grads = GradientsParams::from_grads(loss.backward(), &other);
    if std::env::args().nth(1).as_deref() == Some("--checked") {
        debug_assert_eq!(
            grads.len(),
            4,
            "GradientsParams must hold every A1 parameter"
        );
    }
    let len = grads.len();
    println!("GradientsParams::len() = {len}");
    let before = fc2_bias(&other);
    let other = optim.step(0.1, other, grads);
    let changed = fc2_bias(&other) != before;
    println!("fc2.bias changed: {changed}");
    println!(
        "JSON: {}",
        serde_json::json!({"grads_len": len, "fc2_bias_changed": changed})
    );
}
