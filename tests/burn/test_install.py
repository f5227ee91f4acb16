"""Installs are independent: four non-editable installs from one checkout at once (as CI jobs side by side
do) each get a whole package, and none writes into the checkout. setuptools built in the checkout's
`build/` by default, where one build deleted the `_rust/` another was packing: that install lacked its
Cargo.toml and burnside-trace (setup.py).

Real pip installs (`pip install --no-deps --target DIR CHECKOUT`, build isolation on, so pip fetches
setuptools and wheel into each build's own environment: from its cache after the first time), each into
a folder of its own, run with that folder on PYTHONPATH and this interpreter's dependencies. The checkout
is a copy of this one's sources, so a build that writes into it writes into the copy. Each install makes
a port with `burnside new`; one of them records and checks it (burnside-trace compiled at its new place,
burn reused). Cost on a 2-core machine: about 10-20 s for the four installs, 10-30 s for the check.
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
INSTALLS = 4
BURNSIDE = [sys.executable, "-c", "from burnside.cli import main; main()"]

#: What is no source of the checkout: build output, caches, VCS (the copy is the sources a clone holds).
_NOT_SOURCES = shutil.ignore_patterns(".git", "target", "build", "dist", "*.egg-info", "__pycache__", "*.pyc",
                                      ".pytest_cache", "burnside-out", "_rust", "*.tmp")


def _tree(root: Path) -> dict[str, int]:
    """Every path under ``root`` with its modification time."""
    return {str(p.relative_to(root)): p.lstat().st_mtime_ns for p in root.rglob("*")}


def _contents(root: Path) -> dict[str, str]:
    """Every file under ``root`` (its Rust workspace's build output and temporaries left out) with its hash."""
    return {str(p.relative_to(root)): hashlib.sha256(p.read_bytes()).hexdigest() for p in root.rglob("*")
            if p.is_file() and "target" not in p.relative_to(root).parts and not p.name.endswith(".tmp")
            and "__pycache__" not in p.parts}


def _env(site: Path) -> dict[str, str]:
    """The environment that runs the install in ``site`` (and not the checkout's package, nor its rust/)."""
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "BURNSIDE_RUST_DIR")}
    return env | {"PYTHONPATH": str(site)}


@pytest.fixture(scope="module")
def installs(tmp_path_factory) -> tuple[Path, dict[str, int], list[Path]]:
    """The checkout's copy, its tree before the installs, and the four install folders."""
    root = tmp_path_factory.mktemp("installs")
    checkout = root / "checkout"
    shutil.copytree(REPO, checkout, ignore=_NOT_SOURCES)
    before = _tree(checkout)
    sites = [root / f"site{k}" for k in range(INSTALLS)]
    procs = [subprocess.Popen([sys.executable, "-m", "pip", "install", "--disable-pip-version-check", "-q",
                               "--no-deps", "--target", str(site), str(checkout)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True) for site in sites]
    for proc in procs:
        out, err = proc.communicate(timeout=900)
        assert proc.returncode == 0, out + err
    return checkout, before, sites


def test_installs_at_once_write_nothing_into_the_checkout(installs):
    checkout, before, _ = installs
    after = _tree(checkout)
    assert sorted(set(after) - set(before)) == [], "written into the checkout"
    assert {p for p in before if after.get(p) != before[p]} == set(), "changed in the checkout"


def test_each_install_carries_the_whole_workspace(installs):
    checkout, _, sites = installs
    workspace = _contents(checkout / "rust")
    assert "Cargo.toml" in workspace and "Cargo.lock" in workspace and "burnside-trace/Cargo.toml" in workspace
    for site in sites:
        assert _contents(site / "burnside" / "_rust") == workspace, site


def test_each_install_makes_a_new_port_on_its_own_workspace(installs, tmp_path):
    _, _, sites = installs
    for k, site in enumerate(sites):
        made = subprocess.run([*BURNSIDE, "new", f"port{k}"], cwd=tmp_path, env=_env(site), capture_output=True,
                              text=True, timeout=120)
        assert made.returncode == 0, made.stdout + made.stderr
        manifest = (tmp_path / f"port{k}" / "Cargo.toml").read_text()
        assert f'burnside-trace = {{ path = "{(site / "burnside" / "_rust" / "burnside-trace").resolve()}" }}' \
            in manifest


def test_a_port_made_by_an_install_is_ok_under_its_check(programs, installs, tmp_path):
    _, _, sites = installs
    env = _env(sites[0])
    made = subprocess.run([*BURNSIDE, "new", "installed"], cwd=tmp_path, env=env, capture_output=True, text=True,
                          timeout=120)
    assert made.returncode == 0, made.stdout + made.stderr
    port = tmp_path / "installed"
    recorded = subprocess.run([sys.executable, "record.py"], cwd=port, env=env, capture_output=True, text=True,
                              timeout=600)
    assert recorded.returncode == 0, recorded.stdout + recorded.stderr
    checked = subprocess.run([*BURNSIDE, "check", "--burn-crate", ".", "--bin", "installed", "--torch-trace",
                              "traces/torch.safetensors", "--reference", "traces/reference.safetensors"],
                             cwd=port, env=env, capture_output=True, text=True, timeout=900)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert [line for line in checked.stdout.splitlines() if line.startswith("worst=")][0].endswith(" OK")


def test_an_install_without_its_workspace_names_where_it_looked(installs, tmp_path):
    _, _, sites = installs
    broken = tmp_path / "site"
    shutil.copytree(sites[-1], broken)
    (broken / "burnside" / "_rust" / "Cargo.toml").unlink()
    made = subprocess.run([*BURNSIDE, "new", "port"], cwd=tmp_path, env=_env(broken), capture_output=True,
                          text=True, timeout=120)
    assert made.returncode == 2, made.stdout + made.stderr
    # an installed package has no checkout around it: its two places, neither holding the workspace
    packaged, checkout = broken / "burnside" / "_rust", broken.parent / "rust"
    assert made.stderr == (f"error: burnside's Rust workspace is not at {packaged.resolve()} (the installed package's "
                           f"copy) nor at {checkout.resolve()} (a checkout's rust/): no Cargo.toml in either; "
                           "reinstall burnside, or set BURNSIDE_RUST_DIR to the rust/ directory of a burnside "
                           "checkout\n")
    assert not (tmp_path / "port").exists()
