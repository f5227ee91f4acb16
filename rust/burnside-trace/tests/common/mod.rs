//! What the integration tests share: the one-Linear model of the Python fixtures, and where the
//! fixtures (`fixtures/make_fixtures.py`) and each test binary's scratch files are.

// Each test binary uses its part of this module.
#![allow(dead_code)]

use std::path::PathBuf;

use burn::module::Module;
use burn::nn::{Linear, LinearConfig};
use burn::tensor::Device;

/// The model of `tiny_init.safetensors`: one `Linear(3, 2)` named `fc`.
#[derive(Module, Debug)]
pub struct Tiny {
    pub fc: Linear,
}

/// A freshly initialised `Tiny` (loading the init file replaces its values).
pub fn tiny(device: &Device) -> Tiny {
    Tiny {
        fc: LinearConfig::new(3, 2).init(device),
    }
}

/// A fixture file written by `fixtures/make_fixtures.py`.
pub fn fixture(name: &str) -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/fixtures")
        .join(name)
}

/// `name` in a scratch folder of this test binary (`label` keeps the binaries' folders apart).
pub fn scratch(label: &str, name: &str) -> PathBuf {
    let dir = std::env::temp_dir().join(format!("burnside-trace-{label}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    dir.join(name)
}
