"""Model discrepancy from an inner rolling origin: what the bootstrap cannot see.

A bootstrap interval is conditional on the law (or the mixture of laws) being right: it resamples
noise around the fitted curve, so a curve that bends differently beyond the fitted sizes -- misfit,
not noise -- is outside its reach. Kennedy & O'Hagan (2001, "Bayesian calibration of computer
models", §4.3) add a discrepancy term delta(x) to the model for exactly this; here its scale is
estimated the way a forecaster validates on the past (Tashman 2000, rolling origins; the split-
conformal idea of Vovk et al. 2005 of calibrating on held-back data), using only the fitted sizes:

1. hold back the largest fitted size; forecast it from the smaller ones with the same method
   (``inner``: its draws at the held-back points);
2. its squared error e^2 estimates discrepancy^2 + v, v the inner draws' variance (the noise and
   fit uncertainty the bootstrap already carries), so the excess ``max(e^2 - v, 0)`` (averaged over
   the held-back size's points) estimates discrepancy^2 at that extrapolation distance;
3. a misfit grows with the distance extrapolated: its sd is taken proportional to the log-size
   distance beyond the largest fitted size, s(N) = s_1 * ln(N / N_max) / ln(N_max / N_prev),
   with s_1 the excess's square root at the inner origin's distance ln(N_max / N_prev);
4. every draw at a point beyond the fitted sizes gets an independent N(0, s(N)^2) term, so the
   interval is the mixture's widened by the discrepancy, not replaced by it.

One origin is one noisy estimate (a chi^2 with about one degree of freedom): the term is a plug-in,
zero when the inner forecast erred by less than its own interval's spread, which on a correct law
is most of the time (e^2 < v about two times in three). Points at or inside the fitted sizes get no term.
"""

from __future__ import annotations

import numpy as np
import pandas as pd


def inner_origin(fit_rows: pd.DataFrame, min_sizes: int) -> tuple[pd.DataFrame, pd.DataFrame] | None:
    """(rows of every fitted size but the largest, rows of the largest), or None when fewer than
    ``min_sizes`` sizes would remain to fit."""
    sizes = fit_rows.groupby("model")["N"].first().sort_values()
    if len(sizes) - 1 < min_sizes:
        return None
    largest = fit_rows["model"] == sizes.index[-1]
    return fit_rows[~largest], fit_rows[largest]


def excess_sd(draws: np.ndarray, observed: np.ndarray) -> float:
    """sqrt(max(mean(e^2 - v), 0)): the inner forecast's squared error (e: the draws' median minus
    the observation) beyond what its draws' variance v expects (module docstring, step 2)."""
    draws, observed = np.asarray(draws, float), np.asarray(observed, float)
    error = np.median(draws, axis=0) - observed
    excess = float(np.mean(error**2 - draws.var(axis=0)))
    return float(np.sqrt(excess)) if excess > 0 else 0.0


def distances(size: np.ndarray, fitted_sizes: np.ndarray) -> np.ndarray:
    """ln(N / N_max(fit)) beyond the largest fitted size, 0 at or inside it."""
    return np.clip(np.log(np.asarray(size, float) / np.max(fitted_sizes)), 0.0, None)


def inner_distance(fitted_sizes: np.ndarray) -> float:
    """ln(N_max / N_prev): how far the inner origin extrapolates."""
    ordered = np.unique(np.asarray(fitted_sizes, float))
    return float(np.log(ordered[-1] / ordered[-2]))


def widen(draws: np.ndarray, sd_at_one: float, distance: np.ndarray, seed: int) -> np.ndarray:
    """(B, m) draws plus an independent N(0, (sd_at_one * distance)^2) discrepancy term per draw and
    point (module docstring, step 4); unchanged where either is zero."""
    if sd_at_one <= 0 or not np.any(distance > 0):
        return draws
    rng = np.random.default_rng(seed)
    return draws + rng.standard_normal(draws.shape) * sd_at_one * np.asarray(distance, float)
