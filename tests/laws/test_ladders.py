"""The forecasting engine against a real ladder: the OLMo ladder's final losses (tests/fixtures/ladders,
provenance there), 190M-1B fitted, 3B held out, as benchmarks/bench_ladders.py does on all ladders."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pandas as pd
import pytest

from rerank_scaling.forecast.run import forecast_runs
from rerank_scaling.records import MetricSpec

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "benchmarks"))
from bench_ladders import olmo_size  # noqa: E402

LOSS = MetricSpec("CrossEntropyLoss", -1, (0.0, 10.0))


def olmo_runs() -> pd.DataFrame:
    table = pd.read_csv(REPO / "tests" / "fixtures" / "ladders" / "olmo_ladder_final_loss.csv")
    size = table["N_params"].fillna(olmo_size(table).groupby(table["size"]).transform("median"))
    return pd.DataFrame(
        {
            "model": table["size"],
            "size": size,
            "value": table["CrossEntropyLoss"],
            "seed": np.where(table["xC"].str.endswith("-rerun"), "rerun", "first"),
            "tokens": table["tokens"].astype(float),
            "multiple": table["xC"].str.removesuffix("-rerun"),
            "role": np.where(table["size"] == "3B", "held_out", "fit"),
        }
    )


@pytest.mark.slow
def test_the_joint_law_forecasts_the_3b_runs_at_every_token_multiple():
    """The additive law in (N, D) over 190M-1B at 0.5x-10x tokens: the five 3B runs' losses within
    0.05 (1.7%), at least 4 of 5 inside their 95% intervals, which are about 0.1 wide
    (benchmarks/results/ladders.md, 200 resamples: 0.097-0.131, all five inside). The 0.5x run sits at
    the upper edge (2.934 against 2.949 there): with this test's 100 resamples it falls just outside,
    the bias-corrected interval having moved down (the CE refits forecast above the fit)."""
    result = forecast_runs(olmo_runs().drop(columns="multiple"), None, (), None, LOSS, 100, 0)
    every = result.every
    held = every[every["held_out"] & (every["role"] == "held_out") & (every["law"] == "additive")]
    held = held[held["split_label"] == "joint_code"]
    assert len(held) == 5
    assert (held["forecast"] - held["observed"]).abs().max() < 0.05
    assert held["covered"].sum() >= 4
    assert (held["high"] - held["low"]).median() < 0.2


@pytest.mark.slow
def test_the_ensemble_forecasts_3b_from_four_sizes_at_each_multiple():
    """Per token multiple, a law in N alone: median |error| below 0.03 over the five multiples, and at
    least 4 of the 5 inside. benchmarks/results/ladders.md fits the multiples as objectives of one
    table (the 1x reruns' seed spread pooled into all) with 200 resamples: 4 of 5, the 0.5x miss
    0.014 above its interval; here each multiple is fitted alone with 100."""
    errors, inside = [], 0
    for _, part in olmo_runs().groupby("multiple"):
        result = forecast_runs(part.drop(columns=["multiple", "tokens"]), None, (), None, LOSS, 100, 0)
        row = result.forecasts[result.forecasts["law"] == "ensemble"].iloc[0]
        errors.append(abs(row["forecast"] - row["observed"]))
        inside += int(row["low"] <= row["observed"] <= row["high"])
    assert np.median(errors) < 0.03
    assert inside >= 4


def test_the_oracle_frontier_sizes_intervals_from_known_errors():
    """Two groups whose errors are +-1 and +-10 exactly, the engine's intervals +-2 per group scale:
    every row's multiple follows by hand (benchmarks/bench_ladders.py, ``oracle_frontier``)."""
    from bench_ladders import oracle_frontier

    scale = np.repeat([1.0, 10.0], 4)
    error = scale * np.tile([1.0, -1.0], 4)
    points = pd.DataFrame(
        {
            "ladder": np.repeat(["small", "large"], 4),
            "kind": "model",
            "metric": "loss",
            "forecast": 0.0,
            "observed": error,
            "low": -2 * scale,
            "high": 2 * scale,
        }
    )
    frontier = oracle_frontier(points).set_index("intervals")
    median_error = 5.5  # the median of four 1s and four 10s
    # The engine's intervals: every error is half a side, k = 0.5 of a median width of 22.
    assert frontier.iloc[0]["width / |error| at 90%"] == pytest.approx(0.5 * 22 / median_error)
    # Knowing each group's scale: q = 1 of a median width of 2 x 5.5.
    assert frontier.iloc[1]["width / |error| at 95%"] == pytest.approx(11 / median_error)
    # The other three errors of a +1 are -1, +1, -1: mean -1/3, rms 1, so the point sits at 4/3.
    assert frontier.iloc[2]["width / |error| at 90%"] == pytest.approx(4 / 3 * 11 / median_error)
    # At 3x, q = 3 x 5.5 / 11 = 1.5 > 4/3: every point is covered.
    assert frontier.iloc[2]["coverage at 3x"] == 1.0
