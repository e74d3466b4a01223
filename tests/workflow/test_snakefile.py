"""The workflow definition itself: lint-clean, and the paper grid plans without touching the network."""

from __future__ import annotations

import re
import subprocess
import sys

from conftest import REPO


def _snakemake(*args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "snakemake", *args], cwd=REPO, capture_output=True, text=True
    )


def test_snakemake_lint_is_clean():
    result = _snakemake("--lint")
    assert result.returncode == 0, result.stdout + result.stderr


def test_paper_config_plans_the_full_grid_offline():
    result = _snakemake("-n", "--configfile", "config.paper.yaml", "--quiet", "rules")
    assert result.returncode == 0, result.stderr[-3000:]
    counts = dict(re.findall(r"^(\w+)\s+(\d+)$", result.stdout + result.stderr, re.M))
    sizes, objectives = 6, 3
    assert int(counts["train"]) == sizes * objectives
    assert int(counts["evaluate_part"]) == sizes * objectives * 20  # evaluation.unit: checkpoint
    assert "evaluate_run" not in counts
    assert int(counts["bm25_search"]) == 5  # train, dev, dl19, dl20, dlhard
    checkpoints = _snakemake("-n", "--configfile", "config.paper.yaml", "--summary")
    # Every run declares every checkpoint (20 each in the paper config) as an output.
    assert (checkpoints.stdout.count("checkpoint.json")) == sizes * objectives * 20
