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
    # evaluation.unit checkpoint: 20 jobs per run, but for the runs whose jobs would mostly pay set-up
    # (cluster.max_setup_share), scored whole in evaluate_bundle jobs (tests/test_job_resources.py)
    assert int(counts["evaluate_part"]) % 20 == 0 and int(counts["evaluate_part"]) < sizes * objectives * 20
    assert int(counts["evaluate_bundle"]) >= 1
    assert "evaluate_run" not in counts
    assert int(counts["bm25_search"]) == 5  # train, dev, dl19, dl20, dlhard
    checkpoints = _snakemake("-n", "--configfile", "config.paper.yaml", "--summary")
    # Every run declares every checkpoint (20 each in the paper config) as an output.
    assert (checkpoints.stdout.count("checkpoint.json")) == sizes * objectives * 20
