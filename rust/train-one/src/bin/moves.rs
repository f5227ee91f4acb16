//! S4 and S6: what `GradientsParams` holds after one backward pass, what one SGD step does to
//! `fc2.bias` (and to a clone taken before it), and what pairing the gradients with another
//! model does (nothing, silently). Last line: `JSON: {...}`.

use a1::{a1_data, a1_model, ce};
use burn::optim::{GradientsParams, SgdConfig};
use burn::tensor::{Device, Tensor};

fn vec1(t: Tensor<1>) -> Vec<f32> {
    t.into_data().try_to_vec::<f32>().expect("f32 tensor")
}

fn fc2_bias(m: &a1::Mlp) -> Vec<f32> {
    vec1(m.fc2.bias.as_ref().map(|b| b.val()).expect("bias"))
}

fn main() {
    let device = Device::default().autodiff();
    let mut model = a1_model(&device);
    let (x, y) = a1_data(&device);
    let ce = ce(&device);
    let mut optim = SgdConfig::new().init();

    let loss = ce.forward(model.forward(x.clone()), y.clone());
    let grads = GradientsParams::from_grads(loss.backward(), &model);
    let grads_len = grads.len();
    println!("GradientsParams.len()    {grads_len}");
    let mut ids = serde_json::Map::new();
    let mut found = Vec::new();
    for (name, id) in [
        ("fc1.weight", model.fc1.weight.id),
        ("fc2.weight", model.fc2.weight.id),
    ] {
        let is_some = grads.get::<2>(id).is_some();
        println!("  {name} id {id}  get::<2> is_some = {is_some}");
        ids.insert(name.to_string(), id.to_string().into());
        found.push(is_some);
    }
    let id_fc2_bias = model.fc2.bias.as_ref().map(|b| b.id).expect("bias");
    let bias_grad = grads.get::<1>(id_fc2_bias).map(vec1);
    println!("  fc2.bias   id {id_fc2_bias}  get::<1> = {bias_grad:?}");
    ids.insert("fc2.bias".to_string(), id_fc2_bias.to_string().into());

    let before = model.clone();
    let bias_before = fc2_bias(&model);
    println!("fc2.bias before          {bias_before:?}");
    model = optim.step(0.1, model, grads);
    let bias_after = fc2_bias(&model);
    println!("fc2.bias after step      {bias_after:?}");
    let clone_after = fc2_bias(&before);
    println!("clone taken before step  {clone_after:?}");
    let same_id = model.fc2.bias.as_ref().map(|b| b.id) == Some(id_fc2_bias);
    println!("fc2.bias ParamId unchanged: {same_id}");
    let require_grad = model.fc2.weight.val().is_require_grad();
    println!("param still require_grad: {require_grad}");

    // S6: the gradients paired with a model of the same values but fresh ParamIds.
    let other = a1_model(&device);
    let loss = ce.forward(model.forward(x.clone()), y.clone());
    let grads = GradientsParams::from_grads(loss.backward(), &other);
    let other_len = grads.len();
    println!("from_grads(.., &other).len() = {other_len}");
    let other_bias = fc2_bias(&other);
    let other = optim.step(0.1, other, grads);
    let other_changed = fc2_bias(&other) != other_bias;
    println!("other fc2.bias changed by step: {other_changed}");

    println!(
        "JSON: {}",
        serde_json::json!({
            "grads_len": grads_len,
            "ids": ids,
            "get_is_some": found,
            "fc2_bias_grad": bias_grad,
            "fc2_bias_before": bias_before,
            "fc2_bias_after": bias_after,
            "clone_after": clone_after,
            "param_id_unchanged": same_id,
            "require_grad": require_grad,
            "other_grads_len": other_len,
            "other_fc2_bias_changed": other_changed,
        })
    );
}
