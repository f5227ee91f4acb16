//! S12 (`discard sgd`) and S13 (`discard adam`): three steps whose result is dropped, then the
//! fix. SGD: the clone version's losses never move, the fixed version's fall. Adam: the
//! dropped steps still advanced the moments, so training after the fix differs from a fresh
//! run (column A) unless the optimizer is replaced too (column C == column B, bit for bit).
//! Last line: `JSON: {...}`.

use a1::{ADAM_EPS, ADAM_LR, SGD_LR, a1_model};
use burn::optim::{AdamConfig, ModuleOptimizer, SgdConfig};
use burn::tensor::Device;
use pitb_opt::{train_step, train_step_discarding};

fn adam() -> ModuleOptimizer {
    AdamConfig::new().with_epsilon(ADAM_EPS).init()
}

fn bits(values: &[f32]) -> Vec<u32> {
    values.iter().map(|v| v.to_bits()).collect()
}

fn sgd(device: &Device) {
    let mut model = a1_model(device);
    let mut optim = SgdConfig::new().init();
    let clone: Vec<f32> = (0..3)
        .map(|_| train_step_discarding(&mut model, &mut optim, SGD_LR, device))
        .collect();
    let mut model = a1_model(device);
    let mut optim = SgdConfig::new().init();
    let fixed: Vec<f32> = (0..3)
        .map(|_| train_step(&mut model, &mut optim, SGD_LR, device))
        .collect();
    println!("clone: losses {clone:?}");
    println!("fixed: losses {fixed:?}");
    println!(
        "JSON: {}",
        serde_json::json!({"mode": "sgd", "clone": clone, "fixed": fixed,
            "clone_bits": bits(&clone), "fixed_bits": bits(&fixed)})
    );
}

fn adam_table(device: &Device) {
    let post_fix = |model: &mut a1::Mlp, optim: &mut ModuleOptimizer| -> Vec<f32> {
        (0..5)
            .map(|_| train_step(model, optim, ADAM_LR, device))
            .collect()
    };
    // A: three dropped steps, then the fix with the same Adam.
    let mut model = a1_model(device);
    let mut optim = adam();
    for _ in 0..3 {
        train_step_discarding(&mut model, &mut optim, ADAM_LR, device);
    }
    let a = post_fix(&mut model, &mut optim);
    // B: the fix from the start.
    let mut model = a1_model(device);
    let b = post_fix(&mut model, &mut adam());
    // C: three dropped steps, then the fix with a new Adam.
    let mut model = a1_model(device);
    let mut optim = adam();
    for _ in 0..3 {
        train_step_discarding(&mut model, &mut optim, ADAM_LR, device);
    }
    let c = post_fix(&mut model, &mut adam());

    println!("step  after 3 discarded  fresh Adam   discarded+new Adam");
    for step in 0..5 {
        println!(
            "{:>4}  {:<19.8}{:<13.8}{:.8}",
            step + 1,
            a[step],
            b[step],
            c[step]
        );
    }
    let same = bits(&b) == bits(&c);
    println!("fresh == discarded+new, bit for bit: {same}");
    println!(
        "JSON: {}",
        serde_json::json!({"mode": "adam", "a": a, "b": b, "c": c,
            "a_bits": bits(&a), "b_bits": bits(&b), "c_bits": bits(&c), "b_equals_c": same})
    );
}

fn main() {
    let device = Device::default().autodiff();
    match std::env::args().nth(1).as_deref() {
        None | Some("sgd") => sgd(&device),
        Some("adam") => adam_table(&device),
        Some(other) => {
            eprintln!("discard: unknown mode `{other}` (expected sgd or adam)");
            std::process::exit(2);
        }
    }
}
