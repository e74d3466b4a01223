"""Simulated ladders on the embedded default's own path, with the noise structure of real runs.

The default fits the model law on each size's final checkpoint (``fitting.last_k: 1``) of four
fitted sizes (L1-L4 of MiniLM: 1.77 M non-embedding parameters per layer) and forecasts L6; its
nDCG@10 asymptote ends on its bound (the fitted curve is nearly log-linear). Here:

* truth M(N) = a - b N^-c with a = 1.0 on the metric's upper bound and b, c chosen so that L1 scores
  0.14 and L6 0.27, as on the default (``results/default``: 0.137-0.142 and 0.197-0.269);
* one value per run: the run's final value, whose deviation from the law (seed luck plus checkpoint
  noise) has sd growing with size, ``RUN_SD * (N / N_L1) ** GROWTH`` (0.012 at L1 to 0.019 at L6:
  the per-query paired SEs of the default's seed differences imply run sds of 0.011-0.017);
* two seeds at the largest fitted size for each of three objectives (the pooled seed spread, 3 dof);
  L4's fitted value is the mean of its two seeds.

The oracle interval is the central 95% of the true prediction error f_hat(L6) - y(L6) over
replicates: no method that uses only the data can be narrower on average and still cover.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rerank_scaling.laws import forms as laws
from rerank_scaling.laws.ensemble import fit_members, usable_members, widened_draws, widened_mixture
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.protocols import fit_split

SIZES = {"L1": 1.77, "L2": 3.54, "L3": 5.31, "L4": 7.08, "L6": 10.62}
HELD_OUT = "L6"
SEEDED = "L4"
LAW = laws.power_law("N", +1, laws.metric_range("nDCG@10"))
C = np.log(0.86 / 0.73) / np.log(SIZES["L6"] / SIZES["L1"])
TRUTH = np.array([1.0, 0.86 * SIZES["L1"] ** C, C])
RUN_SD = 0.012
GROWTH = 0.25


def run_sd(size: float) -> float:
    return RUN_SD * (size / SIZES["L1"]) ** GROWTH


def truth(size: float) -> float:
    return float(LAW.predict(TRUTH, {"N": np.array([size])})[0])


@dataclass
class Replicate:
    fit_rows: pd.DataFrame
    held_rows: pd.DataFrame
    spread: tuple[float, float]


def replicate(rng: np.random.Generator, objectives: int = 3) -> Replicate:
    """One ladder of the default's model protocol, and the seed spread pooled over objectives."""
    rows = []
    for model, size in SIZES.items():
        seeds = 2 if model == SEEDED else 1
        values = truth(size) + rng.normal(0, run_sd(size), seeds)
        rows.append(
            {"model": model, "N": size, "seeds": seeds, "value": float(values.mean()), "checkpoint": 4}
        )
    table = pd.DataFrame(rows)
    # the other objectives' seed pairs at L4 (same noise level), pooled as seed_spread() pools them
    pairs = rng.normal(0, run_sd(SIZES[SEEDED]), (objectives, 2))
    spread = (float(pairs.var(axis=1, ddof=1).mean()), float(objectives))
    held = table["model"] == HELD_OUT
    return Replicate(table[~held], table[held], spread)


def simulate(replicates: int, bootstrap: int = 200, seed: int = 0, ensemble: bool = False) -> pd.DataFrame:
    """Per replicate: the point forecast, the 95% interval and the observed held-out value, of the
    bounded power law alone or (``ensemble``) of the model-form ensemble (:mod:`rerank_scaling.laws.ensemble`)
    with the bound as its ceiling."""
    if ensemble:
        return simulate_both(replicates, bootstrap, seed)[1]
    rng = np.random.default_rng(seed)
    settings = FitSettings.of(bootstrap=bootstrap, last_k=1, uncertainty="run")
    rows = []
    for index in range(replicates):
        sample = replicate(rng)
        done = fit_split(LAW, sample.fit_rows, sample.held_rows, settings, index, sample.spread)
        rows.append(
            _forecast_row(sample, done, done.intervals.centre, *done.intervals.forecast_interval(0.95))
        )
    return judged(pd.DataFrame(rows))


def simulate_both(replicates: int, bootstrap: int = 200, seed: int = 0) -> tuple[pd.DataFrame, pd.DataFrame]:
    """:func:`simulate` of the bounded power law alone and of the ensemble, on the same ladders, from one
    pass: the ensemble's ``power_N`` member is :func:`fit_split` of :data:`LAW` (the same law, data, seed
    and bootstrap), so the law alone costs nothing more. Equal to the two calls of :func:`simulate`
    (tests/laws/test_default_path_calibration.py checks it)."""
    rng = np.random.default_rng(seed)
    settings = FitSettings.of(bootstrap=bootstrap, last_k=1, uncertainty="run")
    alone, mixed = [], []
    for index in range(replicates):
        sample = replicate(rng)
        args = (sample.fit_rows, sample.held_rows, settings, index, sample.spread)
        fitted = fit_members("nDCG@10", *args)
        usable = usable_members(fitted)
        draws, _ = widened_draws(usable, "nDCG@10", sample.fit_rows, *args[2:])
        done = fitted["power_N"]
        alone.append(_law_alone_row(sample, done))
        mixed.append(_forecast_row(sample, done, *widened_mixture(usable, draws)))
    return judged(pd.DataFrame(alone)), judged(pd.DataFrame(mixed))


def _law_alone_row(sample: Replicate, done) -> dict:
    """The bounded law's own forecast and 95% interval (NaN where its bootstrap gave no interval, which
    the ensemble's mixture can survive; :func:`simulate` of the law alone fails there)."""
    if done.intervals is None:
        return _forecast_row(sample, done, *np.full((3, len(done.rows)), np.nan))
    return _forecast_row(sample, done, done.intervals.centre, *done.intervals.forecast_interval(0.95))


def _forecast_row(sample: Replicate, done, centre: np.ndarray, low: np.ndarray, high: np.ndarray) -> dict:
    """One replicate's held-out forecast, interval, observation and fit status."""
    held = done.rows["held_out"].to_numpy()
    return {
        "forecast": float(centre[held][0]),
        "low": float(low[held][0]),
        "high": float(high[held][0]),
        "observed": float(sample.held_rows["value"].iloc[0]),
        "status": done.status,
    }


def judged(frame: pd.DataFrame) -> pd.DataFrame:
    """Replicates (forecast, low, high, observed) with whether each interval covered the truth, its
    width, and on which side a miss fell."""
    frame = frame.copy()
    frame["covered"] = (frame["observed"] >= frame["low"]) & (frame["observed"] <= frame["high"])
    frame["width"] = frame["high"] - frame["low"]
    frame["above"] = frame["observed"] > frame["high"]
    frame["below"] = frame["observed"] < frame["low"]
    return frame


def oracle_width(frame: pd.DataFrame) -> float:
    """Width of the central 95% of the true prediction error over replicates."""
    error = frame["forecast"] - frame["observed"]
    return float(np.percentile(error, 97.5) - np.percentile(error, 2.5))
