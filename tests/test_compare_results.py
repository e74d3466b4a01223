"""scripts/compare_results.py: what counts as the same result (row order, declared renames, timing
columns) and what does not (a changed value)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pandas as pd
from conftest import REPO

SCRIPT = REPO / "scripts" / "compare_results.py"


def compare(a: Path, b: Path, *extra: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, str(SCRIPT), str(a), str(b), *extra], capture_output=True, text=True, check=False
    )


def write_run(root: Path, metrics: pd.DataFrame) -> Path:
    (root / "metrics").mkdir(parents=True)
    metrics.to_parquet(root / "metrics" / "per_query.parquet", index=False)
    return root


METRICS = pd.DataFrame(
    {
        "run": ["L1", "L1", "L2", "L2"],
        "metric": ["RBP@3", "AP", "RBP@3", "AP"],
        "value": [0.25, 0.5, 0.125, 0.75],
        "train_seconds": [1.0, 2.0, 3.0, 4.0],
    }
)


def test_reordered_rows_and_a_declared_rename_are_identical_and_said(tmp_path):
    old = write_run(tmp_path / "old", METRICS)
    new_rows = METRICS.assign(metric=METRICS.metric.str.replace("RBP@", "RelP@"), train_seconds=9.0)
    new = write_run(tmp_path / "new", new_rows.iloc[[1, 0, 3, 2]].reset_index(drop=True))

    undeclared = compare(old, new)
    assert undeclared.returncode == 1 and "differs: metrics/per_query.parquet" in undeclared.stdout

    declared = compare(old, new, "--rename", "RBP@=RelP@")
    assert declared.returncode == 0, declared.stdout
    assert "same rows, other order: metrics/per_query.parquet" in declared.stdout
    assert "declared rename: 'RBP@' -> 'RelP@'" in declared.stdout
    assert "['train_seconds']" in declared.stdout  # the timing column is ignored, and said
    assert declared.stdout.strip().endswith("identical")


def test_a_changed_value_differs_in_any_row_order(tmp_path):
    old = write_run(tmp_path / "old", METRICS)
    changed = METRICS.copy()
    changed.loc[2, "value"] = 0.126
    new = write_run(tmp_path / "new", changed.iloc[::-1].reset_index(drop=True))
    result = compare(old, new)
    assert result.returncode == 1
    assert "differs: metrics/per_query.parquet" in result.stdout and "same rows" not in result.stdout


def test_a_malformed_rename_is_refused_with_the_expected_form(tmp_path):
    old = write_run(tmp_path / "old", METRICS)
    result = compare(old, old, "--rename", "RBP@")
    assert result.returncode == 2 and "expected OLD=NEW" in result.stderr
