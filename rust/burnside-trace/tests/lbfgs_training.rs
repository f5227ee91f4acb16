//! `Training` refuses an L-BFGS in one line before training: burn's `LBFGS` steps the whole model
//! with a closure, not through the `ModuleOptimizer` the loop steps.

use std::error::Error;

mod common;
use common::{Tiny, fixture, tiny};

use burn::tensor::{Device, Tensor};
use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Step, Training};

#[test]
fn an_lbfgs_is_refused_before_training_with_the_call_by_call_loop_named() {
    let device = Device::default().autodiff();
    let init = InitFile::read(fixture("tiny_init.safetensors")).unwrap();
    let line = format!(
        "--init {} -o {} --steps 1",
        fixture("tiny_init.safetensors").display(),
        common::scratch("lbfgs-training", "lbfgs.safetensors").display()
    );
    let out = PortArgs::parse(line.split_whitespace().map(String::from)).unwrap();
    let model = init.load_module(tiny(&device)).unwrap();
    let error = Training::new(OptimizerSpec::lbfgs(1.0))
        .run(
            &out,
            &init,
            &device,
            model,
            |_: &Tiny, _: &mut Step<'_>| -> Result<(Tensor<2>, Tensor<1>), Box<dyn Error>> {
                unreachable!("not a step is trained")
            },
        )
        .unwrap_err();
    assert_eq!(
        error.to_string(),
        "Training steps each optimizer through burn's ModuleOptimizer; LBFGS steps the whole model \
         with a closure: write the loop call by call with OptimizerSpec::init_lbfgs (rust/train-step \
         does)"
    );
    assert!(!out.out.exists(), "nothing written");
}
