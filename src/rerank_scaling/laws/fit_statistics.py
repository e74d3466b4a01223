"""One statistics routine for every fit: goodness of fit, significance, held-out errors, intervals.

* R^2 = 1 - SS_res/SS_tot; adjusted R^2 = 1 - (1 - R^2)(n - 1)/(n - p);
* F-test against a constant model: F = ((SS_tot - SS_res)/(p - 1)) / (SS_res/(n - p)),
  p-value from F(p - 1, n - p); stars: *** p<0.001, ** p<0.01, * p<0.05, ns. With ``units``
  (the run of every point), n counts independent runs and the sums are over run means: the last
  10 checkpoints of one run are one observation of that run's luck, not ten (on the default's ladder, ten
  checkpoints of 4 sizes gave p ~ 1e-31 where 4 runs support no such claim);
* held-out errors of forecasts: RMSE, MAE, mean bias (forecast - observed);
* prediction intervals, two methods (config ``fitting.uncertainty``):

  ``run`` (default): a parametric bootstrap with a per-run random effect,
      y_{u,t} = f(theta, x_{u,t}) + delta_u + eps_{u,t},  delta_u ~ N(0, tau^2/m_u), eps ~ N(0, sigma^2),
  (m_u: seeds averaged into run u). Why not resample whole runs (the cluster bootstrap,
  Davison & Hinkley 1997 §3.8, Field & Welsh 2007)? The model protocol fits 3 or 4 sizes: a
  resample of 3 clusters repeats a size in 7 of 9 draws and leaves a 3-parameter law
  unidentified, so the cluster bootstrap is degenerate exactly where it is needed. The random-
  effect model keeps the dependence (D&H §3.8 recommend model-based resampling at the top level
  when it has few units) and needs two variance components:
      sigma^2 (checkpoint noise): within-run residual scatter, dof n - max(U, p);
      tau^2 (run-to-run offset): the seed spread (replicate runs of one size, pooled over the
      metric's groups, dof = sum of (seeds - 1)) pooled with the between-run residual mean square
      of the fit when it has spare runs (U > 3: the asymptote, the size amplitude and the size
      exponent can absorb three run offsets), or ``fitting.run_sigma`` when configured.
  Each resample first draws both variances from their scaled inverse-chi^2 sampling
  distributions (tau*^2 = tau^2 nu/chi^2_nu), so the intervals carry the uncertainty of the
  variance estimates the way a t quantile on nu dof does; then simulates the fitted curve plus
  run offsets and checkpoint noise, refits (:func:`rerank_scaling.laws.fitting.refit_multistart`) and
  records the prediction error d* = f(theta*, x_new) - (f(theta, x_new) + delta*_new + eps*_new),
  with a fresh offset for a run the fit has not seen (a held-out size) and, for later checkpoints
  of a fitted run, the offset that run drew in the same resample (its fitted points carry it too).
  The interval is the percentile one of
  the simulated predictive distribution, [f + q_lo(d*), f + q_hi(d*)] (D&H §5.3.1, §6.3.3 with
  model-based errors): a forecast is a nonlinear, bounded function of the exponent, and the
  percentile interval respects that transformation where the basic (pivot) interval reflects
  its skew the wrong way (tests/laws/test_fit_statistics.py: basic 0.85-0.88, percentile >= 0.90 at
  nominal 0.95 with 3 fitted sizes). The refit part of d* is first shifted by twice its median
  (the bias-corrected percentile interval, :func:`median_unbiased`): a plain percentile interval
  carries the fit's extrapolation bias twice, and sat off-centre on the OLMo ladder's (N, D) units.

  ``iid`` (the paper's, kept for like-for-like comparison): every point independent; residual
  bootstrap of modified residuals r_i / sqrt(1 - h_ii) (D&H Algorithm 6.4, eq. 6.9), studentized
  by each resample's residual scale (D&H §6.3.3).

  Parameter intervals are percentile intervals of the refits under either method.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy import stats

from rerank_scaling.laws.fitting import FitResult, fit_law, predict_batch, refit_multistart
from rerank_scaling.laws.forms import Law, Variables

#: Parameters that an offset per run can trade against (asymptote, size amplitude, size exponent).
BETWEEN_RUN_PARAMS = 3


@dataclass
class FitStatistics:
    r2: float
    adj_r2: float
    f_stat: float
    p_value: float
    stars: str
    n_units: int


def stars(p_value: float) -> str:
    if not np.isfinite(p_value):
        return ""
    return "***" if p_value < 0.001 else "**" if p_value < 0.01 else "*" if p_value < 0.05 else "ns"


def goodness_of_fit(
    y: np.ndarray, prediction: np.ndarray, n_params: int, units: np.ndarray | None = None
) -> FitStatistics:
    """R^2 over all points; adjusted R^2 and the F-test on the independent units (module docstring)."""
    y, prediction = np.asarray(y, float), np.asarray(prediction, float)
    ss_tot_points = float(((y - y.mean()) ** 2).sum())
    ss_res_points = float(((y - prediction) ** 2).sum())
    r2 = 1 - ss_res_points / ss_tot_points if ss_tot_points > 0 else float("nan")
    if units is not None:
        means = pd.DataFrame({"u": units, "y": y, "f": prediction}).groupby("u")[["y", "f"]].mean()
        y, prediction = means["y"].to_numpy(), means["f"].to_numpy()
    n, p = len(y), n_params
    ss_res = float(((y - prediction) ** 2).sum())
    ss_tot = float(((y - y.mean()) ** 2).sum())
    unit_r2 = 1 - ss_res / ss_tot if ss_tot > 0 else float("nan")
    adj = 1 - (1 - unit_r2) * (n - 1) / (n - p) if n > p else float("nan")
    if n > p > 1 and ss_res > 0:
        f_stat = ((ss_tot - ss_res) / (p - 1)) / (ss_res / (n - p))
        p_value = float(stats.f.sf(f_stat, p - 1, n - p))
    else:
        f_stat, p_value = float("nan"), float("nan")
    return FitStatistics(r2, adj, f_stat, p_value, stars(p_value), n)


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


#: Evaluation cap of a scipy bootstrap refit (only the huber_log loss uses scipy refits).
REFIT_EVALUATIONS = 200


@dataclass
class Intervals:
    """Bootstrap draws of one fit: parameter refits and prediction errors at the new points."""

    centre: np.ndarray  # f(theta, x_new)
    params: np.ndarray  # (B, P) refitted parameters
    errors: np.ndarray  # (B, m) prediction errors d*, already on the metric's scale
    basis: str = ""  # where the run-to-run variance came from (run method)
    percentile: bool = False  # percentile interval of f + d* (run method); else basic f - d*

    @property
    def successes(self) -> int:
        return len(self.params)

    def parameter_interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        if not self.successes:
            nan = np.full(self.params.shape[1] if self.params.ndim == 2 else 0, np.nan)
            return nan, nan
        tail = (1 - level) / 2 * 100
        return np.percentile(self.params, tail, axis=0), np.percentile(self.params, 100 - tail, axis=0)

    def forecast_interval(self, level: float = 0.95) -> tuple[np.ndarray, np.ndarray]:
        """Prediction interval at ``level``: percentile [f + q_lo(d*), f + q_hi(d*)] or basic
        [f - q_hi(d*), f - q_lo(d*)] (module docstring)."""
        if not self.successes:
            return np.full(len(self.centre), np.nan), np.full(len(self.centre), np.nan)
        tail = (1 - level) / 2 * 100
        low, high = np.percentile(self.errors, [tail, 100 - tail], axis=0)
        return (
            (self.centre + low, self.centre + high)
            if self.percentile
            else (self.centre - high, self.centre - low)
        )


def _refits(
    law: Law, fit: FitResult, x: Variables, samples: np.ndarray, loss: str
) -> tuple[np.ndarray, np.ndarray]:
    """Refit every column of ``samples`` (n, B): batched LM for least squares, scipy otherwise."""
    if law.log_target:
        samples = np.clip(samples, 1e-9, 1 - 1e-9)
    if loss == "least_squares":
        return refit_multistart(law, x, samples, fit.params)
    params, ok = [], []
    for column in samples.T:
        refit = fit_law(law, x, column, loss=loss, starts=[fit.params], max_evaluations=REFIT_EVALUATIONS)
        params.append(refit.params if refit.ok else np.full(len(fit.params), np.nan))
        ok.append(refit.ok)
    return np.array(params), np.array(ok)


def iid_bootstrap(
    law: Law,
    fit: FitResult,
    x: Variables,
    y: np.ndarray,
    x_new: Variables,
    resamples: int = 500,
    seed: int = 0,
    loss: str = "least_squares",
) -> Intervals:
    """The paper's i.i.d. residual bootstrap, studentized (module docstring, ``iid``)."""
    rng = np.random.default_rng(seed)
    y = np.asarray(y, float)
    n, dof = len(y), max(len(y) - len(fit.params), 1)
    fitted = law.predict(fit.params, x)
    scale = np.sqrt(((y - fitted) ** 2).sum() / dof)
    residuals = (y - fitted) / np.sqrt(1 - leverages(law, fit.params, x))
    residuals = residuals - residuals.mean()
    centre = law.predict(fit.params, x_new)
    samples = fitted[:, None] + rng.choice(residuals, (n, resamples))
    params, ok = _refits(law, fit, x, samples, loss)
    with np.errstate(all="ignore"):
        scale_star = np.sqrt(((samples.T - predict_batch(law, params, x)) ** 2).sum(1) / dof)
    forecasts = predict_batch(law, params, x_new)
    keep = ok & (scale_star > 0) & np.isfinite(forecasts).all(1)
    new_noise = rng.choice(residuals, (resamples, len(centre)))
    errors = (forecasts - (centre + new_noise))[keep] / scale_star[keep, None] * scale
    return Intervals(centre, params[keep], errors, "iid points")


@dataclass(frozen=True)
class VarianceComponents:
    """Run-to-run offset variance tau^2 and checkpoint noise sigma^2, with their degrees of freedom."""

    tau2: float
    tau_dof: float  # inf: taken as known (configured)
    sigma2: float
    sigma_dof: float
    basis: str


def _pooled(sources: list[tuple[str, float, float]]) -> tuple[float, float, str]:
    """Pool variance estimates (name, variance, dof) weighted by their degrees of freedom."""
    dof = sum(d for _, _, d in sources)
    value = sum(v * d for _, v, d in sources) / dof
    return value, dof, " + ".join(f"{name} ({d:g} dof)" for name, _, d in sources)


def one_point_per_run(
    residuals: np.ndarray,
    n_params: int,
    seed_spread: tuple[float, float] = (0.0, 0.0),
    configured_sigma: float | None = None,
    weights: np.ndarray | None = None,
) -> VarianceComponents:
    """The variance of a run's value when every run contributes one point (``last_k = 1``).

    A run's final value deviates from the law by its offset plus its checkpoint noise,
    delta_u + eps_u; with one point per run the two cannot be told apart, and a forecast of another
    run's final value needs only their sum, v = tau^2 + sigma^2. Two unbiased estimates of v are
    pooled by their degrees of freedom (the usual pooled variance):
      * the seed spread of final values, (sum of seeds - 1) dof (replicates of a final value
        estimate v itself, so sigma^2 must not be added again);
      * the residual mean square of the fit, sum_u m_u r_u^2 / (n - p) with m_u the seeds averaged
        into run u, (n - p) dof when the law leaves any.
    The result is returned as tau^2 = v (one offset per run) and sigma^2 = 0.
    """
    residuals = np.asarray(residuals, float)
    weights = np.ones(len(residuals)) if weights is None else np.asarray(weights, float)
    sources: list[tuple[str, float, float]] = []
    seed_var, seed_dof = seed_spread
    if seed_dof > 0:
        sources.append(("seed spread of final values", seed_var, seed_dof))
    spare = len(residuals) - n_params
    if spare > 0:
        sources.append(("residual mean square", float((weights * residuals**2).sum()) / spare, spare))
    if sources:
        value, dof, basis = _pooled(sources)
        return VarianceComponents(value, dof, 0.0, np.inf, f"one point per run: {basis}")
    if configured_sigma is not None:
        return VarianceComponents(configured_sigma**2, np.inf, 0.0, np.inf, "fitting.run_sigma")
    return VarianceComponents(0.0, np.inf, 0.0, np.inf, "none: one point per run, no seeds, no spare runs")


def variance_components(
    residuals: np.ndarray,
    units: np.ndarray,
    n_params: int,
    seed_spread: tuple[float, float] = (0.0, 0.0),
    configured_sigma: float | None = None,
    spread_points: int = 1,
    weights: np.ndarray | None = None,
) -> VarianceComponents:
    """tau^2 and sigma^2 of the random-effect model from a fit's residuals (module docstring).

    ``seed_spread`` is (pooled variance between seeds of a run's mean over its last
    ``spread_points`` checkpoints, its dof); that variance is tau^2 + sigma^2 / spread_points, so
    sigma^2 / spread_points is taken off before it is pooled into tau^2. With one point per run
    the two components are not separable: :func:`one_point_per_run`.
    """
    frame = pd.DataFrame({"u": units, "r": residuals})
    n, n_units = len(frame), frame["u"].nunique()
    if n == n_units:
        return one_point_per_run(residuals, n_params, seed_spread, configured_sigma, weights)
    means = frame.groupby("u")["r"].transform("mean")
    sigma_dof = n - max(n_units, n_params)
    within = float(((frame["r"] - means) ** 2).sum())
    sigma2 = within / sigma_dof if sigma_dof > 0 else float(frame["r"].var(ddof=0))
    sigma_dof = max(sigma_dof, 1)
    sources, tau_sum, tau_dof = [], 0.0, 0.0
    seed_var, seed_dof = seed_spread
    if seed_dof > 0:
        sources.append(f"seed spread ({seed_dof:g} dof)")
        corrected = max(seed_var - sigma2 / max(spread_points, 1), 0.0)
        tau_sum, tau_dof = tau_sum + corrected * seed_dof, tau_dof + seed_dof
    spare = n_units - min(n_params, BETWEEN_RUN_PARAMS)
    if n_units > 1 and spare > 0:
        unit_means = frame.groupby("u")["r"].agg(["mean", "size"])
        between = float((unit_means["size"] * unit_means["mean"] ** 2).sum()) / spare
        per_point = unit_means["size"].mean()
        sources.append(f"between-run residual scatter ({spare} dof)")
        tau_sum += max(between - sigma2, 0.0) / per_point * spare
        tau_dof += spare
    if tau_dof > 0:
        return VarianceComponents(tau_sum / tau_dof, tau_dof, sigma2, sigma_dof, " + ".join(sources))
    if configured_sigma is not None:
        return VarianceComponents(configured_sigma**2, np.inf, sigma2, sigma_dof, "fitting.run_sigma")
    return VarianceComponents(
        0.0, np.inf, sigma2, sigma_dof, "none: no seed replicates or spare runs; run offsets ignored"
    )


def _scaled_inverse_chi2(rng: np.random.Generator, value: float, dof: float, size: int) -> np.ndarray:
    """Draws of a variance estimate's sampling uncertainty: value * dof / chi^2_dof."""
    if not np.isfinite(dof) or value <= 0:
        return np.full(size, value)
    return value * dof / rng.chisquare(dof, size)


def run_bootstrap(
    law: Law,
    fit: FitResult,
    x: Variables,
    units: np.ndarray,
    x_new: Variables,
    new_units: np.ndarray,
    components: VarianceComponents,
    seeds: np.ndarray | None = None,
    resamples: int = 500,
    seed: int = 0,
    loss: str = "least_squares",
) -> Intervals:
    """Parametric bootstrap with a per-run random effect (module docstring, ``run``).

    ``units`` names the run of every fitted point, ``new_units`` that of every new point; a new point
    of a run not among ``units`` gets a fresh run offset. ``seeds`` (per fitted point) divides a run's
    offset variance when seeds were averaged.
    """
    rng = np.random.default_rng(seed)
    units, new_units = np.asarray(units), np.asarray(new_units)
    names, index = np.unique(units, return_inverse=True)
    new_names, new_index = np.unique(new_units, return_inverse=True)
    fresh = ~np.isin(new_names, names)
    per_run = np.ones(len(names))
    if seeds is not None:
        per_run = (
            pd.Series(np.asarray(seeds, float)).groupby(index).max().reindex(range(len(names))).to_numpy()
        )
    fitted = law.predict(fit.params, x)
    centre = law.predict(fit.params, x_new)
    tau2 = _scaled_inverse_chi2(rng, components.tau2, components.tau_dof, resamples)
    sigma2 = _scaled_inverse_chi2(rng, components.sigma2, components.sigma_dof, resamples)
    offsets = rng.standard_normal((resamples, len(names))) * np.sqrt(tau2[:, None] / per_run)
    noise = rng.standard_normal((resamples, len(fitted))) * np.sqrt(sigma2[:, None])
    samples = (fitted + offsets[:, index] + noise).T
    params, ok = _refits(law, fit, x, samples, loss)
    # a new point of a fitted run shares that run's offset in this resample (its later checkpoints
    # carry the same luck as the fitted ones); a run the fit has not seen gets a fresh offset
    new_offsets = rng.standard_normal((resamples, len(new_names))) * np.sqrt(tau2[:, None])
    seen = np.flatnonzero(~fresh)
    new_offsets[:, seen] = offsets[:, np.searchsorted(names, new_names[seen])]
    new_noise = rng.standard_normal((resamples, len(centre))) * np.sqrt(sigma2[:, None])
    forecasts = predict_batch(law, params, x_new)
    keep = ok & np.isfinite(forecasts).all(1)
    estimation = median_unbiased(forecasts[keep] - centre)
    errors = estimation - (new_offsets[:, new_index] + new_noise)[keep]
    return Intervals(centre, params[keep], errors, components.basis, percentile=True)


def median_unbiased(estimation: np.ndarray) -> np.ndarray:
    """Refit errors f(theta*) - f(theta_hat) (B, m) shifted so that the percentile interval is
    bias-corrected: the bias-corrected (BC) percentile method of Efron (1981), D&H §5.3.2 eq. 5.23
    with acceleration 0.

    A law fitted to noisy sizes is median-biased where it extrapolates (on the OLMo ladder's (N, D)
    units the refits' forecasts of the 3B runs sat below the fit's on accuracies, by up to half the
    interval's half-width, and above it on losses). The bootstrap estimates that bias as
    b = median f(theta*) - f(theta_hat); the fit itself carries the same bias against the truth,
    so the percentile interval f_hat + q(d*) doubles it where the basic interval f_hat - q(d*)
    cancels it (which is why the i.i.d. bootstrap
    covered OLMo's 3B runs and the run bootstrap, off-centre by 2b, did not). Subtracting 2b centres
    the draws on f_hat - b, the bias-corrected forecast; for a normal estimation error this is exactly
    BC's percentile shift Phi(2 z0 + z_alpha) with z0 = -b / sd, and, unlike the basic interval, the
    shape of the draws (their skew at a bound) is kept.
    """
    if not len(estimation):
        return estimation
    return estimation - 2 * np.median(estimation, axis=0)
