"""The documents' Rust blocks, compiled against burnside-trace: each block in a module of its own, in one binary
added to the port README.md's block made (`burnside new`: burnside's burn features, Cargo.lock and profile), so the
build reuses that project's burnside-trace and burn and compiles one file. A fragment gets what it names from
around it (`RUST`: the model it calls, `args`, `init`, `device` in scope), as a doc test's hidden lines would;
a whole program (`fn main`) gets only the `Model` it ports.

Compiling is the test: the blocks read batches and checkpoints that do not exist here, so none is run.
"""

from __future__ import annotations

import re

import pytest

from burnside.burn.cargo import build
from burnside.errors import BuildError
from tests.docs.blocks import CLAIMS, block

#: Where a block goes: its module's text, with the block at `BLOCK`.
_PORT = "pub fn port(args: PortArgs) -> Result<(), Box<dyn std::error::Error>> {\n%s\nBLOCK\nOk(())\n}"

#: The models the blocks port, by the inputs they take: `Mlp` [batch, 4] with a LayerNorm `ln`, `Cnn`
#: [batch, 1, 8, 8] images, `Seq` [batch, seq, 4] sequences through `encoder.gru`.
MODELS = """
pub mod models {
    use burn::module::Module;
    use burn::nn::conv::{Conv2d, Conv2dConfig};
    use burn::nn::pool::{AdaptiveAvgPool2d, AdaptiveAvgPool2dConfig};
    use burn::nn::{Gru, GruConfig, LayerNorm, LayerNormConfig, Linear, LinearConfig};
    use burn::tensor::{Device, Tensor};
    use burnside_trace::{Tap, TraceError};

    #[derive(Module, Debug)]
    pub struct Mlp {
        fc: Linear,
        pub ln: LayerNorm,
        head: Linear,
    }

    impl Mlp {
        pub fn new(device: &Device) -> Self {
            Self {
                fc: LinearConfig::new(4, 8).init(device),
                ln: LayerNormConfig::new(8).init(device),
                head: LinearConfig::new(8, 3).init(device),
            }
        }

        pub fn forward(&self, x: Tensor<2>, mut tap: Tap) -> Result<Tensor<2>, TraceError> {
            let x = self.ln.forward(self.fc.forward(x));
            tap.activation("ln", &x)?;
            Ok(self.head.forward(x))
        }
    }

    #[derive(Module, Debug)]
    pub struct Cnn {
        conv: Conv2d,
        pool: AdaptiveAvgPool2d,
        fc: Linear,
    }

    impl Cnn {
        pub fn new(device: &Device) -> Self {
            Self {
                conv: Conv2dConfig::new([1, 4], [3, 3]).init(device),
                pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
                fc: LinearConfig::new(4, 3).init(device),
            }
        }

        pub fn forward(&self, x: Tensor<4>, mut tap: Tap) -> Result<Tensor<2>, TraceError> {
            let x = self.conv.forward(x);
            tap.activation("conv", &x)?;
            Ok(self.fc.forward(self.pool.forward(x).flatten::<2>(1, 3)))
        }
    }

    /// A model of someone else's crate: its forward needs nothing from burnside (an inference port's layers are
    /// captured).
    #[derive(Module, Debug)]
    pub struct PlainCnn {
        conv: Conv2d,
        pool: AdaptiveAvgPool2d,
        fc: Linear,
    }

    impl PlainCnn {
        pub fn new(device: &Device) -> Self {
            Self {
                conv: Conv2dConfig::new([1, 4], [3, 3]).init(device),
                pool: AdaptiveAvgPool2dConfig::new([1, 1]).init(),
                fc: LinearConfig::new(4, 3).init(device),
            }
        }

        pub fn forward(&self, x: Tensor<4>) -> Tensor<2> {
            self.fc.forward(self.pool.forward(self.conv.forward(x)).flatten::<2>(1, 3))
        }
    }

    #[derive(Module, Debug)]
    pub struct Encoder {
        pub gru: Gru,
    }

    #[derive(Module, Debug)]
    pub struct Seq {
        pub encoder: Encoder,
        head: Linear,
    }

    impl Seq {
        pub fn new(device: &Device) -> Self {
            Self {
                encoder: Encoder { gru: GruConfig::new(4, 5, true).init(device) },
                head: LinearConfig::new(5, 3).init(device),
            }
        }

        pub fn forward(&self, x: Tensor<3>, mut tap: Tap) -> Result<Tensor<3>, TraceError> {
            let x = self.encoder.gru.forward(x, None);
            tap.activation("encoder.gru", &x)?;
            Ok(self.head.forward(x))
        }
    }
}
"""

#: (document, first line of the block) -> the module it is compiled in.
RUST = {
    ("README.md", "Training::new(OptimizerSpec::adamw(3e-4)"): """
        use burn::nn::loss::CrossEntropyLossConfig;
        use burn::tensor::Device;
        use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Training};
        use crate::models::Mlp as Model;
        """ + _PORT % """
        let device = Device::default().autodiff();
        let init = InitFile::read(&args.init)?;
        let model = init.load_module(Model::new(&device))?;
        let ce = CrossEntropyLossConfig::new().init(&device);""",
    ("README.md", "let device = Device::default();"): """
        use burn::store::{ModuleSnapshot, PytorchStore};
        use burn::tensor::Device;
        use burnside_trace::{Inference, InitFile, PortArgs};
        use crate::models::PlainCnn as Model;
        """ + _PORT % 'let checkpoint = String::from("model.pt");',
    ("rust/README.md", "use burn::nn::loss::CrossEntropyLossConfig;"): "use crate::models::Cnn as Model;\nBLOCK",
    ("rust/README.md", "fn forward(&self, x: Tensor<4>, mut tap: Tap)"): """
        use burn::module::Module;
        use burn::nn::Linear;
        use burn::nn::conv::Conv2d;
        use burn::nn::pool::AdaptiveAvgPool2d;
        use burn::tensor::Tensor;
        use burnside_trace::{Tap, TraceError};

        #[derive(Module, Debug)]
        pub struct Model {
            conv: Conv2d,
            pool: AdaptiveAvgPool2d,
            fc: Linear,
        }

        impl Model {
        BLOCK
        }""",
    ("rust/README.md", "let names = TorchNames::new()"): """
        use burn::tensor::Device;
        use burnside_trace::{Inference, InitFile, OptimizerSpec, PortArgs, TorchNames, TraceRecorder, Training};
        use crate::models::Mlp as Model;
        """ + _PORT % """
        let device = Device::default().autodiff();
        let spec = OptimizerSpec::adam(1e-3);
        let model = Model::new(&device);""",
    ("rust/README.md", "let mask = init.buffer("): """
        use burn::tensor::{Device, Tensor};
        use burnside_trace::{InitFile, PortArgs};
        """ + _PORT % """
        let device = Device::default();
        let init = InitFile::read(&args.init)?;""",
    ("rust/README.md", "let spec = OptimizerSpec::adamw(1e-3);"): """
        use burn::nn::loss::CrossEntropyLossConfig;
        use burn::optim::GradientsParams;
        use burn::tensor::{Device, Tensor};
        use burnside_trace::{ClipGradNorm, InitFile, OptimizerSpec, PortArgs, Step, TraceError, TraceRecorder};
        use crate::models::Mlp as Model;

        fn schedule(k: usize) -> f64 {
            1e-3 * ((k + 1) as f64 / 10.0).min(1.0)
        }

        fn forward_loss(model: &Model, step: &mut Step) -> Result<(Tensor<2>, Tensor<1>), TraceError> {
            let x = step.float_input::<2>("x")?;
            let y = step.int_input::<1>("y")?;
            let logits = model.forward(x, step.tap())?;
            let loss = CrossEntropyLossConfig::new().init(&logits.device()).forward(logits.clone(), y);
            Ok((logits, loss))
        }
        """ + _PORT % """
        let device = Device::default().autodiff();
        let init = InitFile::read(&args.init)?;
        let mut model = init.load_module(Model::new(&device))?;""",
    ("rust/README.md", "use burn::store::{ModuleSnapshot, PytorchStore};"): "use crate::models::Seq as Model;\nBLOCK",
    ("rust/README.md", "let model = burnside_trace::load_pytorch_checkpoint("): """
        use burn::tensor::Device;
        use burnside_trace::PortArgs;
        use crate::models::Seq as Model;
        """ + _PORT % "let device = Device::default();",
    ("rust/README.md", "Inference::new().run(&args, &init, &device, &model, |model, batch| {"): """
        use burn::tensor::Device;
        use burnside_trace::{Inference, InitFile, PortArgs, Tap};
        use crate::models::Seq as Model;
        """ + _PORT % """
        let device = Device::default();
        let init = InitFile::read(&args.init)?;
        let model = Model::new(&device);""",
    ("rust/burnside-trace/README.md", "use burnside_trace::{InitFile, OptimizerSpec, PortArgs, Training};"):
        "use crate::models::Mlp as Model;\nBLOCK",
}


def test_every_rust_block_a_test_claims_has_its_module():
    claimed = {(c.path, c.first) for c in CLAIMS if c.lang == "rust" and "test_rust_blocks" in c.how}
    assert claimed == set(RUST)


def source() -> tuple[str, list[tuple[int, int, str]]]:
    """The binary's source, and each block's lines in it: (first, last, block)."""
    parts = ["//! The Rust blocks of burnside's documents, each in a module (tests/docs/test_rust_blocks.py).",
             "#![allow(unused, dead_code)]", MODELS]
    spans = []
    for i, ((path, first), module) in enumerate(RUST.items()):
        found = block(path, "rust", first)
        head, _, tail = module.partition("BLOCK")
        start = sum(part.count("\n") + 1 for part in parts)
        text = f"mod b{i:02d} {{\n{head}\n{found.text}\n{tail}\n}}"
        lines = text.count("\n") + 1
        spans.append((start + 1, start + lines, str(found)))
        parts.append(text)
    parts.append("fn main() {}")
    return "\n".join(parts) + "\n", spans


def test_the_rust_blocks_compile(port_project):
    project, ran = port_project
    assert ran.returncode == 0, ran.stderr[-3000:]
    text, spans = source()
    (project / "src" / "bin").mkdir(exist_ok=True)
    (project / "src" / "bin" / "doc_blocks.rs").write_text(text)
    try:
        build(project, bins=["doc_blocks"], what="the documents' Rust blocks")
    except BuildError as exc:
        where = re.search(r"src/bin/doc_blocks\.rs:(\d+)", str(exc))
        line = int(where.group(1)) if where else 0
        culprit = next((name for first, last, name in spans if first <= line <= last), "the models around them")
        pytest.fail(f"{culprit} does not compile: {exc}")
