"""One statistics routine for every fit: goodness of fit, significance, held-out errors, bootstrap.

* R^2 = 1 - SS_res/SS_tot; adjusted R^2 = 1 - (1 - R^2)(n - 1)/(n - p);
* F-test against a constant model: F = ((SS_tot - SS_res)/(p - 1)) / (SS_res/(n - p)),
  p-value from F(p - 1, n - p); stars: *** p<0.001, ** p<0.01, * p<0.05, ns;
* held-out errors of forecasts: RMSE, MAE, mean bias (forecast - observed);
* bootstrap (residual, seeded): 95% intervals of parameters and prediction intervals of
  forecasts (:func:`bootstrap`), and the coverage of held-out observations.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy import stats

from rerank_scaling.fitting import FitResult, fit_law
from rerank_scaling.laws import Law, Variables


@dataclass
class FitStatistics:
    r2: float
    adj_r2: float
    f_stat: float
    p_value: float
    stars: str


def stars(p_value: float) -> str:
    if not np.isfinite(p_value):
        return ""
    return "***" if p_value < 0.001 else "**" if p_value < 0.01 else "*" if p_value < 0.05 else "ns"


def goodness_of_fit(y: np.ndarray, prediction: np.ndarray, n_params: int) -> FitStatistics:
    """R^2, adjusted R^2 and the F-test of a fit against a constant model."""
    y, prediction = np.asarray(y, float), np.asarray(prediction, float)
    n, p = len(y), n_params
    ss_res = float(((y - prediction) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    r2 = 1 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    adj = 1 - (1 - r2) * (n - 1) / (n - p) if n > p else float("nan")
    if n > p > 1 and ss_res > 0:
        f_stat = ((ss_tot - ss_res) / (p - 1)) / (ss_res / (n - p))
        p_value = float(stats.f.sf(f_stat, p - 1, n - p))
    else:
        f_stat, p_value = float("nan"), float("nan")
    return FitStatistics(r2, adj, f_stat, p_value, stars(p_value))


def forecast_errors(observed: np.ndarray, forecast: np.ndarray) -> dict[str, float]:
    """RMSE, MAE and mean bias (forecast - observed) of held-out forecasts."""
    error = np.asarray(forecast, float) - np.asarray(observed, float)
    if not len(error):
        return {"rmse": float("nan"), "mae": float("nan"), "bias": float("nan")}
    return {
        "rmse": float(np.sqrt((error**2).mean())),
        "mae": float(np.abs(error).mean()),
        "bias": float(error.mean()),
    }


def leverages(law: Law, params: np.ndarray, x: Variables) -> np.ndarray:
    """Diagonal of the hat matrix J (J^T J)^-1 J^T of a nonlinear fit (forward-difference Jacobian)."""
    base = law.predict(params, x)
    columns = []
    for i, value in enumerate(params):
        step = 1e-6 * max(abs(value), 1e-3)
        shifted = np.array(params, dtype=float)
        shifted[i] += step
        columns.append((law.predict(shifted, x) - base) / step)
    jacobian = np.column_stack(columns)
    hat = jacobian @ np.linalg.pinv(jacobian.T @ jacobian) @ jacobian.T
    return np.clip(np.diag(hat), 0.0, 0.99)


#: Evaluation cap of a bootstrap refit: it starts at the original optimum, a few steps away from its own;
#: refits that have not converged by then are nearly flat directions, where more steps change little.
REFIT_EVALUATIONS = 200


@dataclass
class Bootstrap:
    params_low: np.ndarray
    params_high: np.ndarray
    forecast_low: np.ndarray
    forecast_high: np.ndarray
    successes: int


def bootstrap(
    law: Law,
    fit: FitResult,
    x: Variables,
    y: np.ndarray,
    x_new: Variables,
    resamples: int = 500,
    seed: int = 0,
    loss: str = "least_squares",
    level: float = 0.95,
) -> Bootstrap:
    """Residual bootstrap: parameter intervals and studentized prediction intervals at ``x_new``.

    Davison & Hinkley (1997, Algorithm 6.4): resample modified residuals r_i / sqrt(1 - h_ii)
    (eq. 6.9; leverages h from the fit's Jacobian) onto the fitted curve and refit. Each resample
    gives a prediction error d* = f(theta*, x) - (f(theta, x) + e*), studentized by the resample's
    residual scale s* = sqrt(SS_res*/(n - p)) (D&H §6.3.3): z* = d*/s*. The interval is
    [f - s q_hi(z*), f - s q_lo(z*)]; studentizing carries the uncertainty of s into the interval,
    which the plain percentile form misses at the small n of scaling-law fits (it under-covers).
    Parameters get percentile intervals.
    """
    rng = np.random.default_rng(seed)
    y = np.asarray(y, float)
    n, dof = len(y), max(len(y) - len(fit.params), 1)
    fitted = law.predict(fit.params, x)
    scale = np.sqrt(((y - fitted) ** 2).sum() / dof)
    residuals = (y - fitted) / np.sqrt(1 - leverages(law, fit.params, x))
    residuals = residuals - residuals.mean()
    centre = law.predict(fit.params, x_new)
    params, errors = [], []
    for _ in range(resamples):
        resampled = fitted + rng.choice(residuals, n)
        refit = fit_law(law, x, resampled, loss=loss, starts=[fit.params], max_evaluations=REFIT_EVALUATIONS)
        if not refit.ok:
            continue
        scale_star = np.sqrt(((resampled - law.predict(refit.params, x)) ** 2).sum() / dof)
        if scale_star <= 0:
            continue
        params.append(refit.params)
        error = law.predict(refit.params, x_new) - (centre + rng.choice(residuals, len(centre)))
        errors.append(error / scale_star)
    tail = (1 - level) / 2 * 100
    if not params:
        nan_p, nan_f = np.full(len(fit.params), np.nan), np.full(len(centre), np.nan)
        return Bootstrap(nan_p, nan_p, nan_f, nan_f, 0)
    params, errors = np.array(params), np.array(errors)
    return Bootstrap(
        np.percentile(params, tail, axis=0),
        np.percentile(params, 100 - tail, axis=0),
        centre - scale * np.percentile(errors, 100 - tail, axis=0),
        centre - scale * np.percentile(errors, tail, axis=0),
        len(params),
    )
