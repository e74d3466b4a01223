"""A user's table whose seeds measured different checkpoints: points are aligned by step, never by rank."""

from __future__ import annotations

import pandas as pd

from rerank_scaling.forecast.table import to_metrics
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.protocols import prepare

#: S4's seed 1 was evaluated at steps 10, 20, 30, its rerun (seed 2) at 15 and 30: ranked within
#: each seed, 10 would meet 15 and 20 would meet 30 -- points no run measured.
RUNS = pd.DataFrame(
    [("S1", 1e6, 0.20, 30, 1), ("S2", 2e6, 0.25, 30, 1), ("S3", 4e6, 0.29, 30, 1)]
    + [("S4", 8e6, 0.30, 10, 1), ("S4", 8e6, 0.31, 20, 1), ("S4", 8e6, 0.33, 30, 1)]
    + [("S4", 8e6, 0.40, 15, 2), ("S4", 8e6, 0.35, 30, 2)]
    + [("S5", 16e6, 0.36, 30, 1)],
    columns=["model", "size", "value", "step", "seed"],
)


def test_seeds_with_different_checkpoints_meet_only_at_a_shared_step():
    metrics = to_metrics(RUNS, "runs.csv", metric="nDCG@10").metrics
    points = prepare(metrics, FitSettings.of(metrics=("nDCG@10",))).query("model == 'S4'")
    measured = RUNS[RUNS["model"] == "S4"].groupby("step")
    # one point per step some seed measured, its value those seeds' mean, its seeds those seeds
    assert points["step"].tolist() == [10, 15, 20, 30]
    assert points["value"].tolist() == measured["value"].mean().tolist()
    assert points["seeds"].tolist() == measured["seed"].nunique().tolist()
    assert points["checkpoint"].tolist() == [1, 2, 3, 4]
    assert points["final"].tolist() == [False, False, False, True]
