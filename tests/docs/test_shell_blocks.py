"""The documents' shell, console, TOML and YAML blocks, run (`blocks.CLAIMS` says which and how).

`burnside` and `python` in a block are this interpreter's (shims first on PATH). One `burnside new` project of
each kind serves every block that needs one (conftest.py): README.md's port block makes, records and checks
`myport`, and the template's README, rust/README's profile, docs/compare.md's tolerance file and the Rust blocks
(test_rust_blocks.py) use it; the inference block likewise `myinfer`. Cost with burn built, on the 2-core
machine: each README block 10-16 s (`burnside new`, `record.py`, `burnside check`: a build of burnside-trace and
the port, a run, a comparison); the conformance block about 9 s (its build a no-op, 9 cases), more when another
checkout's build in the shared target directory makes the workspace rebuild; the lint blocks and the rest
under 2 s together.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import tomllib
from pathlib import Path

import pytest

from tests.docs.blocks import README_INFERENCE, README_PORT, ROOT, block, commands


def verdict(proc: subprocess.CompletedProcess) -> str:
    lines = [line for line in proc.stdout.splitlines() if line.startswith("worst=")]
    assert len(lines) == 1, proc.stdout + proc.stderr
    return lines[0]


def test_the_readme_port_block_makes_records_and_checks_a_port_ok(port_project):
    project, proc = port_project
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert verdict(proc).endswith(" OK")
    assert (project / "traces" / "torch.safetensors").is_file()


def test_the_readme_inference_block_makes_records_and_checks_a_port_ok(inference_project):
    project, proc = inference_project
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert verdict(proc).endswith(" OK")
    assert (project / "checkpoint" / "model.pt").is_file()


@pytest.mark.parametrize(("kind", "fixture", "readme"), [
    ("port", "port_project", README_PORT),
    ("inference", "inference_project", README_INFERENCE),
])
def test_a_new_projects_readme_holds_commands_the_readme_block_ran_in_it(kind, fixture, readme, request):
    project, proc = request.getfixturevalue(fixture)
    assert proc.returncode == 0, proc.stderr[-3000:]
    template = block(f"src/burnside/templates/{kind}/README.md", "bash", "python record.py")
    written = [b for b in _bash_blocks(project / "README.md")]
    assert len(written) == 1
    assert commands(written[0]) == commands(template.text.replace("{crate}", project.name))
    ran = commands(block(*readme).text)
    assert ran[0].split()[:3] == ["burnside", "new", project.name] and ran[0].endswith(f"cd {project.name}")
    assert commands(written[0]) == ran[1:], "README.md's block ran the project's own README's commands"


def _bash_blocks(path: Path) -> list[str]:
    return re.findall(r"```bash\n(.*?)```", path.read_text(), re.S)


def test_the_profile_rust_readme_gives_is_the_new_projects_and_the_workspaces(port_project):
    project, proc = port_project
    assert proc.returncode == 0, proc.stderr[-3000:]
    profile = tomllib.loads(block("rust/README.md", "toml", "[profile.release]").text)["profile"]["release"]
    written = tomllib.loads((project / "Cargo.toml").read_text())["profile"]["release"]
    workspace = tomllib.loads((ROOT / "rust" / "Cargo.toml").read_text())["profile"]["release"]
    assert profile == written
    assert profile == {key: workspace[key] for key in profile}


def test_the_trace_crate_command_prints_burnside_traces_folder(shell, tmp_path):
    proc = shell(block("rust/README.md", "bash", 'python -c "from burnside.burn.locate import trace_crate').text,
                 tmp_path)
    assert proc.returncode == 0, proc.stderr
    folder = Path(proc.stdout.strip())
    assert tomllib.loads((folder / "Cargo.toml").read_text())["package"]["name"] == "burnside-trace"


def test_the_tolerance_file_of_compare_md_is_read_as_it_says(port_project, shell):
    project, proc = port_project
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = block("docs/compare.md", "toml", "# tol.toml: burnside compare A B --tolerances tol.toml").text
    (project / "tol.toml").write_text(text)
    command = text.splitlines()[0].removeprefix("# tol.toml: ")
    assert command == "burnside compare A B --tolerances tol.toml"
    burn = "burnside-out/check/myport.burn.safetensors"
    compared = shell(command.replace(" A B ", f" traces/torch.safetensors {burn} "), project)
    assert compared.returncode in (0, 1), compared.stderr  # judged, not refused
    assert "*.optim.exp_avg_sq.*: tol=1e-09 ulps=4" in verdict(compared), "the override applied"


def test_the_conformance_block_runs(shell, tmp_path):
    proc = shell(block("docs/conformance.md", "bash", "burnside conformance --list").text, tmp_path, timeout=900)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
    assert "layer_norm/default" in proc.stdout and "gelu/" in proc.stdout
    assert re.search(r"^\d+ cases: ", proc.stdout, re.M), proc.stdout[-2000:]


def test_the_lint_console_block_prints_what_it_shows(shell):
    text = block("docs/lint.md", "console", "$ burnside lint rust/train-one/src/bin/noassign.rs").text
    runs = re.split(r"^\$ ", text, flags=re.M)[1:]
    assert runs
    for run in runs:
        command, _, shown = run.partition("\n")
        proc = shell(command, ROOT)
        assert proc.returncode in (0, 1), proc.stderr
        assert proc.stdout.rstrip() == shown.rstrip(), proc.stdout


def test_the_suppression_block_of_lint_md_is_all_allowed(shell, tmp_path):
    text = block("docs/lint.md", "rust", "optim.step(0.1, model.clone(), grads); // burnside: allow(BS001)").text
    (tmp_path / "allowed.rs").write_text(text)
    allowed = shell("burnside lint allowed.rs --format json", tmp_path)
    assert allowed.returncode == 0, allowed.stdout + allowed.stderr
    assert json.loads(allowed.stdout) == []
    # the comments are what allows them: without them the two steps are the findings they allow
    (tmp_path / "plain.rs").write_text(re.sub(r"//\s*burnside: allow\([^)]*\)", "", text))
    plain = shell("burnside lint plain.rs --format json", tmp_path)
    assert plain.returncode == 1
    assert sorted(f["rule"] for f in json.loads(plain.stdout)) == ["BS001", "BS001", "BS003"]


def test_the_lint_workflow_steps_run_as_the_workflow_says(shell, tmp_path):
    text = block("docs/lint.md", "yaml", "name: burnside lint").text
    steps = [re.sub(r"\s+#.*$", "", m) for m in re.findall(r"^\s*-?\s*run:\s*(.+)$", text, re.M)]
    assert steps[0] == "pip install ."  # the install: this interpreter's burnside stands for it
    shutil.copytree(ROOT / "rust", tmp_path / "rust", ignore=shutil.ignore_patterns("target"))
    sarif, gate = steps[1], steps[-1]
    assert "--format sarif --output burnside.sarif" in sarif
    proc = shell(sarif, tmp_path)
    assert proc.returncode in (0, 1), proc.stderr  # `continue-on-error: true`
    report = json.loads((tmp_path / "burnside.sarif").read_text())
    assert report["version"] == "2.1.0" and report["runs"][0]["tool"]["driver"]["name"] == "burnside"
    assert report["runs"][0]["results"]
    gated = shell(gate, tmp_path)
    # the checkout's rust/ holds the seed's deliberately discarded steps: error-level findings fail the job
    assert gated.returncode == 1, gated.stdout[-2000:] + gated.stderr
    assert re.search(r"^[1-9]\d* errors, ", gated.stdout, re.M)
