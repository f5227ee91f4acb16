"""Every burn-side experiment runs and its page's claims hold."""

from __future__ import annotations

import pytest
from rich.console import Console

from burnside.experiments import Context, get_experiment, run_experiment

BURN_EXPERIMENTS = ["S1", "S3", "S4", "S6", "S7", "S8", "S11", "S12", "S13", "S14", "S15", "S16"]


@pytest.mark.parametrize("experiment_id", BURN_EXPERIMENTS)
def test_experiment_claims_hold(experiment_id, programs, tmp_path):
    console = Console(record=True, width=140)
    result = run_experiment(get_experiment(experiment_id), Context(console=console, workdir=tmp_path, progress=False))
    text = console.export_text()
    assert result.claims, text
    assert result.passed, text
    assert "✗" not in text


def test_s13_prints_the_page_table_line(programs, tmp_path):
    console = Console(record=True, width=140)
    run_experiment(get_experiment("S13"), Context(console=console, workdir=tmp_path, progress=False))
    assert "fresh == discarded+new, bit for bit: true" in console.export_text()
