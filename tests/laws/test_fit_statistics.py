"""Calibration of forecast intervals under the noise structure of real runs.

Simulated like the embedded default's model-scaling protocol: a depth ladder of 4 sizes (MiniLM
layers, 1.77M non-embedding parameters each: N = 1.77, 3.54, 5.31, 7.08 M), 3 fitted, the 4th held
out; each size is one run whose last 10 checkpoints are fitted. Every run gets one offset
delta ~ N(0, tau^2) shared by its checkpoints, and every checkpoint its own noise eps ~ N(0, sigma^2).

Noise levels, and where they come from (no default metrics table exists on the machine that wrote
this test, so they are taken from a review's measurements of the default):
* tau = 0.004 nDCG@10: the per-run offset of that review's simulation;
* sigma = 0.002 (regime "run-dominated"): checkpoints late in a run move little; here the run offset
  dominates and an i.i.d. analysis fails (the review: ~35% coverage);
* sigma = 0.015 (regime "checkpoint-dominated"): the review reports checkpoint-to-checkpoint jumps up
  to +-0.05 nDCG@10 on 25 dev queries; a jump is a difference of two checkpoints, sd sqrt(2) sigma,
  so +-0.05 as a ~2.4-sd extreme gives sigma ~ 0.015.
The seed spread the run method reads is estimated, as on the default, from replicate seeds pooled
over 3 objectives x 2 splits (6 dof): here 6 simulated pairs of run means.
"""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from rerank_scaling.laws import forms as laws
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.protocols import fit_split

TRUTH = np.array([0.40, 0.20, 0.6])  # a, b, c of M = a - b N^-c, N in millions
SIZES = 1.77 * np.arange(1, 5)
LAST_K = 10
REPLICATES = 150
LAW = laws.power_law("N", +1, laws.metric_range("nDCG@10"))


def _runs(rng: np.random.Generator, tau: float, sigma: float) -> pd.DataFrame:
    rows = []
    for index, size in enumerate(SIZES):
        offset = rng.normal(0, tau)
        clean = LAW.predict(TRUTH, {"N": np.array([size])})[0]
        for checkpoint in range(LAST_K):
            rows.append(
                {
                    "model": f"L{index + 1}",
                    "N": size,
                    "seeds": 1,
                    "value": clean + offset + rng.normal(0, sigma),
                    "checkpoint": checkpoint,
                }
            )
    return pd.DataFrame(rows)


def _seed_spread(rng: np.random.Generator, tau: float, sigma: float, pairs: int = 6) -> tuple[float, float]:
    """Pooled between-seed variance of run means over the last k checkpoints, from replicate pairs."""
    means = rng.normal(0, tau, (pairs, 2)) + rng.normal(0, sigma / np.sqrt(LAST_K), (pairs, 2))
    return float(means.var(axis=1, ddof=1).mean()), float(pairs)


def coverage(method: str, tau: float, sigma: float, seed: int = 0) -> float:
    """Share of held-out checkpoints (size L4) inside their nominal 95% prediction interval."""
    rng = np.random.default_rng(seed)
    settings = FitSettings.of(bootstrap=200, uncertainty=method)
    covered = total = 0
    for replicate in range(REPLICATES):
        runs = _runs(rng, tau, sigma)
        spread = _seed_spread(rng, tau, sigma)
        fitted = fit_split(
            LAW, runs[runs["model"] != "L4"], runs[runs["model"] == "L4"], settings, replicate, spread
        )
        assert fitted.intervals is not None, fitted.reason
        low, high = fitted.intervals.forecast_interval(0.95)
        held = fitted.rows["held_out"].to_numpy()
        observed = fitted.rows["value"].to_numpy()[held]
        covered += int(((observed >= low[held]) & (observed <= high[held])).sum())
        total += int(held.sum())
    return covered / total


@pytest.mark.parametrize(("sigma", "regime"), [(0.002, "run-dominated"), (0.015, "checkpoint-dominated")])
@pytest.mark.slow
def test_run_level_intervals_cover_held_out_sizes_at_nominal(sigma, regime):
    """Nominal 95% intervals of the default method cover >= 90% of a held-out size's checkpoints.

    150 replicates: the Monte Carlo standard error of the coverage is ~0.02 at 0.93 (points of one
    replicate share its run offset, so replicates, not points, are the independent draws).
    """
    assert coverage("run", tau=0.004, sigma=sigma) >= 0.90, regime


@pytest.mark.slow
def test_iid_intervals_under_cover_when_runs_have_offsets():
    """The paper's i.i.d. bootstrap, same data: intervals far too narrow (the review measured ~35%)."""
    assert coverage("iid", tau=0.004, sigma=0.002) < 0.7
