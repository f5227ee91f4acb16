//! The memory a recording takes: `Training` trains a stack of `Linear` layers with Adam and
//! records every step, as a port does. Run it under `/usr/bin/time -v` and read the peak RSS:
//!
//! ```text
//! cargo build --release --example record_memory
//! /usr/bin/time -v target/release/examples/record_memory OUT LAYERS WIDTH STEPS
//! ```
//!
//! `LAYERS` x `Linear(WIDTH, WIDTH)` (8 x 1024 is 8.4 M parameters, 34 MB); the init file is
//! written beside `OUT` first (random weights, one batch of 4). A recorder that keeps the trace
//! in memory holds parameters x stages x steps; a streaming one the loop's own memory.

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::{Device, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Training};

#[derive(Module, Debug)]
struct Stack {
    layers: Vec<Linear>,
}

impl Stack {
    fn forward(&self, mut x: Tensor<2>) -> Tensor<2> {
        for layer in &self.layers {
            x = layer.forward(x);
        }
        x
    }
}

/// A little-endian f32 tensor of `len` values from a fixed pseudo-random sequence.
fn values(len: usize, seed: u64, scale: f32) -> Vec<u8> {
    let mut state = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..len)
        .flat_map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            let unit = (state >> 40) as f32 / (1u64 << 24) as f32 - 0.5;
            (unit * scale).to_le_bytes()
        })
        .collect()
}

fn write_init(path: &std::path::Path, layers: usize, width: usize) {
    use safetensors::tensor::{Dtype, TensorView};
    let scale = 2.0 / (width as f32).sqrt();
    let mut owned: Vec<(String, Vec<usize>, Vec<u8>)> = Vec::new();
    for i in 0..layers {
        let weight = values(width * width, 2 * i as u64 + 1, scale);
        owned.push((
            format!("params.layers.{i}.weight"),
            vec![width, width],
            weight,
        ));
        let bias = values(width, 2 * i as u64 + 2, scale);
        owned.push((format!("params.layers.{i}.bias"), vec![width], bias));
    }
    owned.push((
        "inputs.x".into(),
        vec![4, width],
        values(4 * width, 99, 1.0),
    ));
    let views: Vec<(String, TensorView<'_>)> = owned
        .iter()
        .map(|(name, shape, bytes)| {
            (
                name.clone(),
                TensorView::new(Dtype::F32, shape.clone(), bytes).unwrap(),
            )
        })
        .collect();
    let metadata = [("burnside.format", "init"), ("burnside.version", "1")]
        .into_iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect();
    safetensors::serialize_to_file(views, Some(metadata), path).unwrap();
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [out, layers, width, steps] = args.as_slice() else {
        eprintln!("usage: record_memory OUT LAYERS WIDTH STEPS");
        std::process::exit(2);
    };
    let (layers, width): (usize, usize) = (layers.parse()?, width.parse()?);
    let init_path = format!("{out}.init.safetensors");
    write_init(std::path::Path::new(&init_path), layers, width);
    let args = PortArgs::parse(
        ["--init", &init_path, "-o", out, "--steps", steps]
            .into_iter()
            .map(String::from),
    )?;
    let device = Device::default().autodiff();
    let init = InitFile::read(&args.init)?;
    let model = Stack {
        layers: (0..layers)
            .map(|_| LinearConfig::new(width, width).init(&device))
            .collect(),
    };
    let model = init.load_module(model)?;
    let start = std::time::Instant::now();
    Training::new(OptimizerSpec::adam(1e-3)).run(&args, &init, &device, model, |model, step| {
        let x = step.float_input::<2>("x")?;
        let out = model.forward(x);
        let loss = out.clone().powf_scalar(2.0).mean();
        Ok((out, loss))
    })?;
    let size = std::fs::metadata(out)?.len();
    eprintln!(
        "recorded {} steps of {layers} x Linear({width}, {width}) in {:.2} s, trace {:.1} MB",
        args.steps,
        start.elapsed().as_secs_f64(),
        size as f64 / 1e6
    );
    Ok(())
}
