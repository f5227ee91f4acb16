"""`burnside lint` / `burnside explain` through the real click app: formats, exit codes, files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from burnside.cli import app
from tests.lint.fixture_findings import (
    BUGS,
    FIXTURES,
    HELPER,
    NOASSIGN,
    OTHERGRADS,
    RUST,
    TRAIN_STEP,
    at,
)

runner = CliRunner()

EXPECTED_NOASSIGN_TEXT = """\
error[BS001]: result of optimizer step is discarded
  --> train-one/src/bin/noassign.rs:17:5
   |
17 |     optim.step(0.1, model, grads);
   |     ^^^^^^^^^^^^^^^^^^^^^^^^^^^^^
   = help: assign the updated module: `model = optim.step(0.1, model, grads);`

1 errors, 0 warnings, 0 infos in 1 files
"""


def invoke(*args: str, cwd: Path = FIXTURES):
    old = Path.cwd()
    os.chdir(cwd)
    try:
        return runner.invoke(app, list(args))
    finally:
        os.chdir(old)


def test_text_output_snapshot():
    result = invoke("lint", NOASSIGN, cwd=RUST)
    assert result.exit_code == 1
    assert result.stdout == EXPECTED_NOASSIGN_TEXT


def test_text_output_for_a_multiline_warning_and_summary_counts():
    # The optimizer-default rules BS008-BS010 on bugs.rs: test_rules.test_optimizer_default_bugs_in_the_bugs_program.
    result = invoke("lint", BUGS, "--ignore", "BS008,BS009,BS010", cwd=RUST)
    assert result.exit_code == 1
    assert "warning[BS003]: `optim` is stepped again on every loop iteration" in result.stdout
    assert "info[BS004]: `AdamConfig` epsilon left at burn's default 1e-5" in result.stdout
    assert result.stdout.rstrip().endswith("1 errors, 2 warnings, 2 infos in 1 files")


def test_exit_code_zero_when_only_warnings_or_clean():
    assert invoke("lint", TRAIN_STEP, cwd=RUST).exit_code == 0
    assert invoke("lint", OTHERGRADS, cwd=RUST).exit_code == 0  # BS002 is a warning


def test_exit_code_two_for_a_missing_path():
    result = invoke("lint", "no/such/dir")
    assert result.exit_code == 2
    assert result.stderr.strip() == "error: no/such/dir does not exist; pass a .rs file or a directory"
    assert result.exception is None or isinstance(result.exception, SystemExit)


def test_unknown_rule_is_a_usage_error():
    result = invoke("lint", str(RUST / NOASSIGN), "--select", "BS999")
    assert result.exit_code == 2
    assert "unknown rule BS999" in result.stderr


def test_console_script_exit_codes(tmp_path):
    # The real entry point (burnside.cli:main), as the installed console script runs it.
    code = "import sys; from burnside.cli import main; sys.argv = ['burnside', *sys.argv[1:]]; main()"
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}

    def run(*args):
        return subprocess.run(
            [sys.executable, "-c", code, *args], cwd=FIXTURES, env=env, capture_output=True, text=True, check=False
        )

    assert run("lint", str(RUST / NOASSIGN)).returncode == 1
    assert run("lint", str(RUST / TRAIN_STEP)).returncode == 0
    missing = run("lint", str(tmp_path / "gone"))
    assert missing.returncode == 2
    assert "Traceback" not in missing.stderr
    assert missing.stderr.strip() == f"error: {tmp_path / 'gone'} does not exist; pass a .rs file or a directory"


def test_json_output():
    result = invoke("lint", BUGS, "--format", "json", "--ignore", "BS008,BS009,BS010", cwd=RUST)
    assert result.exit_code == 1
    data = json.loads(result.stdout)
    step = "optim.step(lr, model.clone(), grads); // the bug"
    assert [(d["rule"], d["severity"], d["line"], d["column"]) for d in data] == [
        ("BS004", "info", *at(BUGS, "AdamConfig::new().init()")),
        ("BS005", "info", *at(BUGS, "MomentumConfig::new().with_momentum(0.9))) // dampening 0.1")),
        ("BS002", "warning", *at(BUGS, "&other) // the bug")),
        ("BS001", "error", *at(BUGS, step)),
        ("BS003", "warning", *at(BUGS, step)),
    ]
    first = data[3]
    assert set(first) >= {"rule", "severity", "path", "line", "column", "end_line", "end_column", "message", "help"}
    assert first["path"] == BUGS
    line, column = at(BUGS, step)
    call = "optim.step(lr, model.clone(), grads)"
    assert (first["end_line"], first["end_column"]) == (line, column + len(call))  # just past the call


def test_sarif_output_with_root(tmp_path):
    result = invoke("lint", str(FIXTURES), str(RUST / NOASSIGN), "--format", "sarif", "--root",
                    str(FIXTURES.parents[2]), cwd=tmp_path)
    sarif = json.loads(result.stdout)
    assert sarif["version"] == "2.1.0"
    assert sarif["$schema"].endswith("sarif-2.1.0.json")
    assert len(sarif["runs"]) == 1
    driver = sarif["runs"][0]["tool"]["driver"]
    assert driver["name"] == "burnside"
    rules = {r["id"]: r for r in driver["rules"]}
    assert list(rules) == ["BS001", "BS002", "BS003", "BS004", "BS005", "BS006", "BS007", "BS008", "BS009", "BS010"]
    assert rules["BS001"]["defaultConfiguration"]["level"] == "error"
    assert rules["BS004"]["defaultConfiguration"]["level"] == "note"
    assert rules["BS002"]["shortDescription"]["text"]
    assert rules["BS002"]["fullDescription"]["text"].startswith("Flags `GradientsParams::from_grads")
    assert "## Use instead" in rules["BS003"]["help"]["markdown"]
    results = sarif["runs"][0]["results"]
    levels = {r["level"] for r in results}
    assert levels == {"error", "warning", "note"}
    noassign = [r for r in results
                if r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"].endswith("noassign.rs")]
    assert len(noassign) == 1
    location = noassign[0]["locations"][0]["physicalLocation"]
    assert location["artifactLocation"]["uri"] == f"rust/{NOASSIGN}"
    assert location["region"] == {"startLine": 17, "startColumn": 5, "endLine": 17, "endColumn": 34}
    assert noassign[0]["ruleId"] == "BS001"
    assert results[0]["ruleIndex"] == list(rules).index(results[0]["ruleId"])


def test_sarif_uri_relative_to_cwd():
    result = invoke("lint", ".", "--format", "sarif", "--select", "BS002")
    uris = {
        r["locations"][0]["physicalLocation"]["artifactLocation"]["uri"]
        for r in json.loads(result.stdout)["runs"][0]["results"]
    }
    assert "bs002_bad.rs" in uris and "bs002_good.rs" not in uris


def test_output_file_is_written_and_stdout_stays_empty(tmp_path):
    target = tmp_path / "reports" / "lint.json"
    missing = invoke("lint", str(RUST / HELPER), "--format", "json", "--output", str(target))
    assert missing.exit_code == 2 and "directory" in missing.stderr and "does not exist" in missing.stderr
    assert not target.parent.exists()  # like convert and --plot: no directory made on the user's behalf
    target.parent.mkdir()
    result = invoke("lint", str(RUST / HELPER), "--format", "json", "--output", str(target))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert json.loads(target.read_text())[0]["rule"] == "BS001"
    assert [p.name for p in target.parent.iterdir()] == ["lint.json"]  # no temp file left behind
    text_target = tmp_path / "lint.txt"
    invoke("lint", NOASSIGN, "--output", str(text_target), cwd=RUST)
    assert text_target.read_text() == EXPECTED_NOASSIGN_TEXT


def test_skipped_files_are_listed_not_fatal(tmp_path):
    (tmp_path / "latin1.rs").write_bytes(b"// caf\xe9\nfn f() { optim.step(0.1, model.clone(), grads); }\n")
    shutil.copy(RUST / NOASSIGN, tmp_path / "ok.rs")
    result = invoke("lint", ".", cwd=tmp_path)
    assert result.exit_code == 1
    assert "skipped latin1.rs: not UTF-8" in result.stdout
    assert result.stdout.rstrip().endswith("1 errors, 0 warnings, 0 infos in 2 files")


def test_directory_walk_skips_target_and_hidden(tmp_path):
    for sub in ("target/debug", ".git", "src"):
        (tmp_path / sub).mkdir(parents=True)
        shutil.copy(RUST / NOASSIGN, tmp_path / sub / "main.rs")
    data = json.loads(invoke("lint", ".", "--format", "json", cwd=tmp_path).stdout)
    assert [d["path"] for d in data] == ["src/main.rs"]


def test_explain_prints_the_rule_docstring():
    result = runner.invoke(app, ["explain", "bs002"])
    assert result.exit_code == 0
    for heading in ("What it does", "Why is this bad?", "Example", "Use instead"):
        assert heading in result.stdout
    assert "BS002" in result.stdout and "ParamId" in result.stdout
    unknown = subprocess.run([sys.executable, "-c", "from burnside.cli import main; main()", "explain", "BS042"],
                             capture_output=True, text=True, check=False)
    assert unknown.returncode == 2 and unknown.stderr.startswith("error: unknown rule BS042")


def test_explain_knows_the_diagnosis_rules_too():
    result = runner.invoke(app, ["explain", "d004"])
    assert result.exit_code == 0
    assert "D004" in result.stdout and "with_epsilon(1e-8)" in result.stdout


@pytest.mark.parametrize("rule_id", ["BS001", "BS002", "BS003", "BS004", "BS005", "BS006", "BS007", "BS008", "BS009",
                                     "BS010"])
def test_every_rule_docstring_has_four_sections(rule_id):
    from burnside.lint.rules import RULES

    doc = RULES[rule_id].__doc__
    assert [line for line in doc.splitlines() if line.startswith("## ")] == [
        "## What it does",
        "## Why is this bad?",
        "## Example",
        "## Use instead",
    ]


def test_lint_command_starts_without_the_comparison_machinery(tmp_path):
    # Start-up is part of every `burnside lint`: numpy and the report and cargo
    # modules (0.5 s of imports) belong to the comparison commands only.
    probe = (
        "import sys\n"
        "from burnside.cli import app\n"
        "try:\n"
        f"    app(['lint', {str(tmp_path)!r}], prog_name='burnside')\n"
        "except SystemExit as exit:\n"
        "    assert exit.code == 0, exit.code\n"
        "heavy = sorted(m for m in ('numpy', 'burnside.compare', 'burnside.report', 'burnside.burn') "
        "if m in sys.modules)\n"
        "print(heavy, file=sys.stderr)\n"
    )
    env = {**os.environ, "PYTHONPATH": str(Path(__file__).parents[2] / "src")}
    result = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, env=env, check=True)
    assert result.stderr.strip() == "[]"
