"""`burnside new`: a port project outside the checkout, OK under `burnside check` as written; a port
that skips a stage is one line and exit 2; a bad name or a taken folder is refused with nothing written."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from burnside.burn.locate import find_cargo, target_dir, trace_crate
from tests.cli.test_no_torch import BURNSIDE_WATCHING_TORCH, torch_imported

BURNSIDE = [sys.executable, "-c", "from burnside.cli import main; main()"]


def burnside(*args: str, cwd: Path) -> subprocess.CompletedProcess:
    return subprocess.run([*BURNSIDE, *args], cwd=cwd, capture_output=True, text=True, timeout=900)


def check(port: Path) -> subprocess.CompletedProcess:
    return burnside("check", "--burn-crate", ".", "--bin", port.name, "--torch-trace", "traces/torch.safetensors",
                    "--reference", "traces/reference.safetensors", cwd=port)


@pytest.fixture(scope="module")
def recorded_port(programs, tmp_path_factory) -> Path:
    """A new port with its PyTorch side recorded (`programs`: burn built once, as `burnside run a1` leaves it)."""
    parent = tmp_path_factory.mktemp("ports")
    made = burnside("new", "myport", cwd=parent)
    assert made.returncode == 0, made.stdout + made.stderr
    port = parent / "myport"
    recorded = subprocess.run([sys.executable, "record.py"], cwd=port, capture_output=True, text=True, timeout=600)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    return port


def test_a_new_port_is_ok_as_written_with_no_diagnosis(recorded_port):
    manifest = (recorded_port / "Cargo.toml").read_text()
    assert f'burnside-trace = {{ path = "{trace_crate().resolve()}" }}' in manifest
    assert (recorded_port / "Cargo.lock").read_text().count('name = "burn-flex"') == 1
    proc = check(recorded_port)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdict = [line for line in proc.stdout.splitlines() if line.startswith("worst=")]
    assert len(verdict) == 1 and verdict[0].endswith(" OK"), proc.stdout
    assert "step2.params_after.fc2.bias" in proc.stdout, "--steps came from the PyTorch trace: 3 steps"
    assert not [line for line in proc.stdout.splitlines() if line.startswith("D0")], proc.stdout


def test_a_check_imports_no_torch(recorded_port):
    # It compares two traces and runs a built program; torch's import alone would take seconds.
    proc = subprocess.run([*BURNSIDE_WATCHING_TORCH, "check", "--burn-crate", ".", "--bin", "myport", "--torch-trace",
                           "traces/torch.safetensors", "--reference", "traces/reference.safetensors"],
                          cwd=recorded_port, capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    assert not torch_imported(proc.stderr), proc.stderr


def _cargo_target(port: Path) -> Path:
    return Path(tomllib.loads((port / ".cargo" / "config.toml").read_text())["build"]["target-dir"])


@pytest.mark.parametrize("configured", [True, False], ids=["CARGO_TARGET_DIR", "default"])
def test_a_new_port_points_cargo_where_check_builds(tmp_path, configured):
    env = {k: v for k, v in os.environ.items() if k != "CARGO_TARGET_DIR"}
    if configured:
        env["CARGO_TARGET_DIR"] = str(tmp_path / "elsewhere")
    made = subprocess.run([*BURNSIDE, "new", "myport"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert made.returncode == 0, made.stdout + made.stderr
    port = tmp_path / "myport"
    # the directory `burnside check` builds in, under the same environment
    check_builds_in = subprocess.run([sys.executable, "-c", "from burnside.burn.locate import target_dir; "
                                      "print(target_dir().absolute())"], env=env, capture_output=True, text=True)
    assert _cargo_target(port) == Path(check_builds_in.stdout.strip())
    if not configured:
        assert _cargo_target(port) == Path.home() / ".cache" / "burnside" / "cargo-target"
    assert str(_cargo_target(port)) in (port / "README.md").read_text()


def test_a_plain_cargo_build_of_a_new_port_reuses_burns_build(programs, tmp_path):
    """`cargo build --release` in the project, without CARGO_TARGET_DIR: its .cargo/config.toml sends it to the
    target directory burnside built burn in, so only the port (and burnside-trace, if another checkout built it
    last) compiles, and nothing is written into the project's ./target."""
    made = burnside("new", "plainport", cwd=tmp_path)
    assert made.returncode == 0, made.stdout + made.stderr
    port = tmp_path / "plainport"
    assert _cargo_target(port) == target_dir().absolute()
    env = {k: v for k, v in os.environ.items() if k != "CARGO_TARGET_DIR"}
    proc = subprocess.run([find_cargo(), "build", "--release", "--message-format=json"], cwd=port, env=env,
                          capture_output=True, text=True, timeout=900)
    assert proc.returncode == 0, proc.stderr[-3000:]
    artifacts = [json.loads(line) for line in proc.stdout.splitlines() if line.startswith("{")]
    compiled = {a["target"]["name"] for a in artifacts if a.get("reason") == "compiler-artifact" and not a["fresh"]}
    assert compiled <= {"plainport", "burnside_trace"}, f"burn built again: {sorted(compiled)}"
    executable = next(a["executable"] for a in artifacts if a.get("reason") == "compiler-artifact"
                      and a["target"]["name"] == "plainport")
    assert Path(executable) == target_dir().absolute() / "release" / "plainport"
    assert not (port / "target").exists()


def test_a_port_that_reads_an_input_around_the_step_is_one_line_exit_2(recorded_port, tmp_path):
    broken = tmp_path / "broken"
    subprocess.run(["cp", "-r", str(recorded_port), str(broken)], check=True)
    main = broken / "src" / "main.rs"
    source = main.read_text()
    read = 'let y = step.int_input::<1>("y")?;'
    assert read in source
    # the batch's labels read straight from the init file: nothing records them
    main.write_text(source.replace(read, 'let y = init.int_input_at::<1>(step.index(), "y", &device)?;'))
    (broken / "Cargo.toml").write_text((broken / "Cargo.toml").read_text().replace('"myport"', '"broken"'))
    proc = check(broken)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.count("\n") == 1, proc.stderr
    assert "step 0 did not record input `y` of the batch: read it with `step.float_input(\"y\")` or " \
           "`step.int_input(\"y\")`" in proc.stderr
    assert not (broken / "burnside-out" / "check" / "broken.burn.safetensors").exists()


@pytest.mark.parametrize(("name", "error"), [
    ("my port", "'my port' is not a crate name"),
    ("9lives", "'9lives' is not a crate name"),
    ("taken", "taken: already exists; give a new name, or remove it first"),
])
def test_a_bad_name_or_a_taken_folder_is_one_line_exit_2(tmp_path, name, error):
    (tmp_path / "taken").mkdir()
    (tmp_path / "taken" / "mine.txt").write_text("keep")
    proc = burnside("new", name, cwd=tmp_path)
    assert proc.returncode == 2, proc.stdout + proc.stderr
    assert proc.stderr.startswith("error: ") and error in proc.stderr and proc.stderr.count("\n") == 1
    assert sorted(p.name for p in tmp_path.iterdir()) == ["taken"], "nothing written, no staging folder left"
    assert (tmp_path / "taken" / "mine.txt").read_text() == "keep"


def test_check_builds_the_port_with_the_cargo_features_it_is_given(recorded_port, tmp_path):
    # A port whose feature changes what it computes: check builds it with --features, the verdict follows.
    featured = tmp_path / "featured"
    subprocess.run(["cp", "-r", str(recorded_port), str(featured)], check=True)
    manifest = (featured / "Cargo.toml").read_text().replace('"myport"', '"featured"')
    (featured / "Cargo.toml").write_text(manifest.replace("[dependencies]",
                                                          "[features]\nhalf-lr = []\n\n[dependencies]"))
    main = featured / "src" / "main.rs"
    spec = "OptimizerSpec::adam(1e-2)"
    assert spec in main.read_text()
    main.write_text(main.read_text().replace(
        spec, 'OptimizerSpec::adam(if cfg!(feature = "half-lr") { 5e-3 } else { 1e-2 })'))
    base = ["check", "--burn-crate", ".", "--bin", "featured", "--torch-trace", "traces/torch.safetensors"]
    with_feature = burnside(*base, "--features", "half-lr", cwd=featured)
    assert with_feature.returncode == 1, with_feature.stdout + with_feature.stderr
    assert "D005" in with_feature.stdout, with_feature.stdout  # the learning rate the port declares differs
    without = burnside(*base, "--no-default-features", cwd=featured)
    assert without.returncode == 0, without.stdout + without.stderr


@pytest.fixture(scope="module")
def inference_port(programs, tmp_path_factory) -> Path:
    """A new inference port with its checkpoint saved and its PyTorch side recorded."""
    parent = tmp_path_factory.mktemp("inference")
    made = burnside("new", "myinfer", "--inference", cwd=parent)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "-- --checkpoint checkpoint/model.pt" in made.stdout
    port = parent / "myinfer"
    recorded = subprocess.run([sys.executable, "record.py"], cwd=port, capture_output=True, text=True, timeout=600)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert (port / "checkpoint" / "model.pt").is_file()
    return port


def check_inference(port: Path, *extra: str) -> subprocess.CompletedProcess:
    return burnside("check", "--burn-crate", ".", "--bin", port.name, "--torch-trace", "traces/torch.safetensors",
                    "--reference", "traces/reference.safetensors", "--", "--checkpoint", "checkpoint/model.pt",
                    *extra, cwd=port)


def _variant(port: Path, tmp_path: Path, name: str, old: str, new: str) -> Path:
    copy = tmp_path / name
    subprocess.run(["cp", "-r", str(port), str(copy)], check=True)
    main = copy / "src" / "main.rs"
    assert old in main.read_text()
    main.write_text(main.read_text().replace(old, new))
    (copy / "Cargo.toml").write_text((copy / "Cargo.toml").read_text().replace(f'"{port.name}"', f'"{name}"'))
    return copy


def test_a_new_inference_port_loads_the_checkpoint_and_is_ok_as_written(inference_port):
    proc = check_inference(inference_port)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdict = [line for line in proc.stdout.splitlines() if line.startswith("worst=")]
    assert len(verdict) == 1 and verdict[0].endswith(" OK"), proc.stdout
    assert "step0.buffers.bn.running_var" in proc.stdout and "step1.outputs.output" in proc.stdout
    assert "top-1 agreement 100.0%" in proc.stdout
    assert not [line for line in proc.stdout.splitlines() if line.startswith("D0")], proc.stdout


def test_an_inference_port_on_an_autodiff_device_is_named_batchnorm_in_training_mode(inference_port, tmp_path):
    port = _variant(inference_port, tmp_path, "onautodiff", "let device = Device::default();",
                    "let device = Device::default().autodiff();")
    proc = check_inference(port)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    # the scaffold taps no layer: on an autodiff device the forward pass captured without autodiff is what
    # measures the device's training mode
    causes = [line for line in proc.stdout.splitlines() if line.startswith("D0")]
    assert causes and causes[0].startswith("D015 ") and "B's forward pass without autodiff gives A's output" \
        in causes[0] and "bn (BatchNorm1d)" in causes[0], causes
    assert "run inference on `Device::default()` (not `.autodiff()`)" in proc.stdout
    assert not any(c.startswith("D010 ") for c in causes), causes


def test_an_inference_port_without_its_checkpoint_is_one_line_exit_2(inference_port):
    proc = burnside("check", "--burn-crate", ".", "--bin", "myinfer", "--torch-trace", "traces/torch.safetensors",
                    "--", "--checkpoint", "missing.pt", cwd=inference_port)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stdout + proc.stderr
    assert "myinfer: missing.pt: PyTorch reader error" in proc.stderr, proc.stderr


def test_a_port_of_the_other_kind_than_the_pytorch_trace_is_one_line_exit_2(recorded_port, inference_port):
    # The training port against a forward trace of its own model, and the inference port against a training trace.
    forward = subprocess.run(
        [sys.executable, "-c", "import torch; from model import Model; from burnside.torch import record_forward; "
         "torch.manual_seed(0); record_forward(Model(), {'x': torch.randn(16, 4)}, 'traces/forward.safetensors')"],
        cwd=recorded_port, capture_output=True, text=True, timeout=600)
    assert forward.returncode == 0, forward.stderr
    proc = burnside("check", "--burn-crate", ".", "--bin", "myport", "--torch-trace", "traces/forward.safetensors",
                    cwd=recorded_port)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stdout + proc.stderr
    assert "this init file comes from a forward trace (burnside.torch.record_forward), which a port checks with " \
           "burnside_trace::Inference, not Training" in proc.stderr

    training = subprocess.run(
        [sys.executable, "-c", "import torch; from model import Model; from burnside.torch import record; "
         "torch.manual_seed(0); m = Model(); m.load_state_dict(torch.load('checkpoint/model.pt')); "
         "record(m, torch.optim.SGD(m.parameters(), lr=0.1), {'x': torch.randn(8, 6), 'y': torch.randint(0, 4, (8,))}, "
         "'traces/training.safetensors')"],
        cwd=inference_port, capture_output=True, text=True, timeout=600)
    assert training.returncode == 0, training.stderr
    proc = burnside("check", "--burn-crate", ".", "--bin", "myinfer", "--torch-trace", "traces/training.safetensors",
                    "--", "--checkpoint", "checkpoint/model.pt", cwd=inference_port)
    assert proc.returncode == 2 and proc.stderr.count("\n") == 1, proc.stdout + proc.stderr
    assert "comes from a training trace (burnside.torch.record), which a port checks with " \
           "burnside_trace::Training, not Inference" in proc.stderr


@pytest.fixture(scope="module")
def generate_port(programs, tmp_path_factory) -> Path:
    """A new generation port (`burnside new --generate`) with its checkpoint and config.json saved and its greedy
    generation recorded."""
    pytest.importorskip("transformers")
    parent = tmp_path_factory.mktemp("generate")
    made = burnside("new", "mylm", "--generate", cwd=parent)
    assert made.returncode == 0, made.stdout + made.stderr
    assert "-- --checkpoint checkpoint/model.safetensors" in made.stdout
    port = parent / "mylm"
    recorded = subprocess.run([sys.executable, "record.py"], cwd=port, capture_output=True, text=True, timeout=600)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    assert (port / "checkpoint" / "config.json").is_file()
    return port


def check_generate(port: Path) -> subprocess.CompletedProcess:
    return burnside("check", "--burn-crate", ".", "--bin", port.name, "--torch-trace", "traces/torch.safetensors",
                    "--reference", "traces/reference.safetensors", "--", "--checkpoint",
                    "checkpoint/model.safetensors", cwd=port)


def test_a_new_generation_port_is_ok_as_written_and_a_slip_in_it_is_named(generate_port, tmp_path):
    proc = check_generate(generate_port)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    verdict = [line for line in proc.stdout.splitlines() if line.startswith("worst=")]
    assert len(verdict) == 1 and verdict[0].endswith(" OK"), proc.stdout
    assert "generation, teacher-forced over 7 steps" in proc.stdout and "B chooses A's token at every step" \
        in proc.stdout
    assert not [line for line in proc.stdout.splitlines() if line.startswith("D0")], proc.stdout
    # a user's edit of the template: the cache stored at the prompt only, never appended to after it
    port = _variant(generate_port, tmp_path, "nocache", "        cache[i] = Some((k_all.clone(), v_all.clone()));\n",
                    "        if past == 0 {\n            cache[i] = Some((k_all.clone(), v_all.clone()));\n        }\n")
    main = port / "src" / "main.rs"
    main.write_text(main.read_text().replace("match cache[i].take() {", "match cache[i].clone() {"))
    proc = check_generate(port)
    assert proc.returncode == 1, proc.stdout + proc.stderr
    found = [line for line in proc.stdout.splitlines() if line.startswith("D0")]
    assert found and found[0].startswith("D010 "), proc.stdout
    assert "a cache that holds the prompt's keys and values only" in proc.stdout, found


def test_inference_and_generate_together_are_a_usage_error(tmp_path):
    proc = burnside("new", "both", "--inference", "--generate", cwd=tmp_path)
    assert proc.returncode == 2 and "give one" in proc.stderr, proc.stdout + proc.stderr
