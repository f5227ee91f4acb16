"""The burn optimizer configs D009 prints as the by-hand fix (`burnside.optimizers.burn.burn_config`: the config's
`new()` and a builder call for each declared setting burn's default is not) compile against burn, for every
optimizer with a config and every builder call it can print. They go into one binary of the README's port project
(the same burn build as the documents' Rust blocks), one function each; compiling is the test."""

from __future__ import annotations

import re

import pytest

from burnside.burn.cargo import build
from burnside.optimizers.burn import burn_config
from burnside.errors import BuildError

#: Declared optimizers (as a trace's metadata holds them) that between them need every builder call.
DECLARED = [
    {"name": "sgd", "lr": 0.1, "momentum": 0.9, "dampening": 0.0, "nesterov": True, "weight_decay": 5e-4},
    {"name": "sgd", "lr": 0.1, "momentum": 0.0, "weight_decay": 0.0},
    {"name": "adam", "lr": 1e-3, "betas": [0.8, 0.95], "eps": 1e-8, "weight_decay": 0.01, "amsgrad": True},
    {"name": "adamw", "lr": 1e-3, "betas": [0.85, 0.95], "eps": 1e-8, "weight_decay": 0.0, "amsgrad": True},
    {"name": "rmsprop", "lr": 1e-2, "alpha": 0.9, "eps": 1e-8, "momentum": 0.0, "centered": True,
     "weight_decay": 1e-4},
    {"name": "adagrad", "lr": 1e-2, "lr_decay": 0.1, "eps": 1e-10, "weight_decay": 1e-4},
]


def test_every_builder_call_is_printed_by_some_declaration():
    printed = " ".join(burn_config(config) or "" for config in DECLARED)
    for call in ("with_beta_1", "with_beta_2", "with_epsilon", "with_amsgrad", "with_weight_decay", "with_alpha",
                 "with_momentum", "with_centered", "with_lr_decay", "with_dampening", "with_nesterov"):
        assert f".{call}(" in printed, call
    assert burn_config({"name": "lbfgs"}) is None


def test_the_printed_configs_compile(port_project):
    project, ran = port_project
    assert ran.returncode == 0, ran.stderr[-3000:]
    lines = ["//! The by-hand optimizer configs D009 prints (tests/docs/test_printed_configs.py).",
             "use burn::optim::decay::WeightDecayConfig;", "use burn::optim::momentum::MomentumConfig;",
             "use burn::optim::{AdaGradConfig, AdamConfig, AdamWConfig, ModuleOptimizer, RmsPropConfig, SgdConfig};"]
    for i, config in enumerate(DECLARED):
        lines.append(f"fn config_{i}() -> ModuleOptimizer {{\n    {burn_config(config)}.init()\n}}")
    lines.append("fn main() {\n" + "".join(f"    let _ = config_{i}();\n" for i in range(len(DECLARED))) + "}")
    (project / "src" / "bin").mkdir(exist_ok=True)
    (project / "src" / "bin" / "printed_configs.rs").write_text("\n".join(lines) + "\n")
    try:
        build(project, bins=["printed_configs"], what="the printed optimizer configs")
    except BuildError as exc:
        where = re.search(r"printed_configs\.rs:(\d+)", str(exc))
        pytest.fail(f"a printed config does not compile (line {where.group(1) if where else '?'}): {exc}")
