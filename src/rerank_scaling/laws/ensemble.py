"""Model-form uncertainty: an ensemble of law forms whose interval is the mixture's.

The interval of one law is conditional on its form. On the default's path (four fitted sizes, a
curve that has not bent) the forms a reviewer would accept differ most where the data say least:

* ``log_linear_N``: M = a + b ln N, the unsaturated curve (no asymptote);
* ``power_N``: M = a - b N^-c with the asymptote free in [0, ceiling];
* ``power_N_ceiling``: the same with the asymptote fixed at the ceiling -- the reranking ceiling
  of the candidates (:mod:`.ceiling`) when known, else the metric's bound. For a loss (CE@k) this
  member is Fang et al.'s ``fang_N`` (Scaling Laws for Dense Retrieval) instead, the loss-specific saturating
  form.

A law whose asymptote ends on its bound gives one-sided draws: resamples cannot move the asymptote
above the bound, so the free power law's interval leans low at a bound (every miss of the
single-form interval lies above it in the default-path simulation). The ceiling member covers the
bound's side exactly and log-linear the unsaturated one; the mixture spans both. Measured on the
default's path (``benchmarks/results/default_path.md``: 200 simulated ladders, truth on its bound,
the same replicates for both): the bounded power law alone covers 0.920 with misses 14 above / 2
below (bias -0.0084), the ensemble with its discrepancy term 0.940 with 7 above / 5 below (bias
0.0014) at 1.184x the oracle's median width.

Draws beyond the fitted sizes get a model-discrepancy term (:mod:`.discrepancy`,
:func:`discrepancy_sd`): the ensemble forecasts its own largest fitted size from the smaller ones,
and the part of that error its draws did not expect, scaled by the log-size distance, is added to
every draw. The bootstrap sees noise, not misfit; the real ladders' misses are misfit
(``benchmarks/results/ladders.md``).

Draws: every member's run-bootstrap draws of the forecast (f + d* for percentile intervals, f - d*
for basic ones: :class:`~rerank_scaling.laws.fit_statistics.Intervals`) are pooled, the same number
per member; the ensemble's 95% interval is the mixture's 2.5th and 97.5th percentiles, so bootstrap
and form uncertainty propagate together.

Point forecast: the median of the members' own forecasts (each member's draws' median), one vote
per form (:func:`member_median`), not the mixture's median. The mixture's median leans towards the
narrowest member: log-linear, with two parameters, has the tightest draws, so it holds most of the
mixture's mass near the middle and pulls the median to its unsaturated extrapolation, while a form
whose draws spread (the free power law with one residual dof) counts for little there. The median
of the forms' forecasts is the robust combination of forecasts (Stock & Watson 2004, "Combination
forecasts of output growth in a seven-country data set"; Timmermann 2006, Handbook of Economic
Forecasting ch. 4, §7.1: median combination), equal weights applied to forecasts rather than to
draws. Measured on the real ladders, pooled over all 71 held-out points
(``benchmarks/results/ladders.md``): median |error| 0.0181 (the mixture's median gave 0.02361, the
seed paper's single power law 0.02218), OLMo's model-law slices 0.01086 (was 0.01674), Gadre et
al.'s 0.02541 (was 0.02784), the intervals unchanged; on the default's path
(``benchmarks/results/default_path.md``) the bar still holds (0.940 at 1.184x the oracle's width).

Weights: equal, not leave-one-size-out (LOSO) predictive scores. With four fitted sizes, leaving
one out leaves three points for a three-parameter law: its LOSO forecast interpolates exactly and
scores the noise of one point, and only one fold (the largest size) is an extrapolation at all.
Stacking weights need many held-out points to beat equal weights (Yao et al. 2018, "Using stacking
to average Bayesian predictive distributions"); with one informative fold they mostly pick the
luckiest form. Equal weights are the honest prior when the data cannot rank the forms.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import numpy as np
import pandas as pd

from rerank_scaling.laws import discrepancy, registry
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.fit_statistics import Intervals, forecast_errors
from rerank_scaling.laws.forecast_status import StatusRule
from rerank_scaling.laws.protocols import SplitFit, fit_split, forecast_rows
from rerank_scaling.registries.measures import metric_spec

NAME = registry.ENSEMBLE


def members(metric: str) -> tuple[str, ...]:
    """The forms the ensemble mixes for ``metric`` (registry names)."""
    if metric_spec(metric).direction > 0:
        return (registry.LOG_LINEAR_N, registry.POWER_N, registry.POWER_N_CEILING)
    return (registry.LOG_LINEAR_N, registry.POWER_N, registry.FANG_N)


def forecast_draws(intervals: Intervals, support: tuple[float, float] | None = None) -> np.ndarray:
    """(B, m) draws of the forecast at every point from one law's bootstrap, held to the metric's
    ``support`` (its range) when given: a value the metric cannot take is no possible outcome."""
    draws = (
        intervals.centre + intervals.errors if intervals.percentile else intervals.centre - intervals.errors
    )
    return draws if support is None else np.clip(draws, *support)


def support_of(fitted: dict[str, SplitFit]) -> tuple[float, float] | None:
    """The range of the metric the members were fitted to (None when the rows do not name it).

    Measured on the real ladders (benchmarks/results/ladders.md): with four fitted sizes the free
    power law's one-dof resamples reach accuracies below 0 (OLMo 2xC HellaSwag: 2.5th percentile
    -0.27), which the mixture's percentiles must not count as possible outcomes.
    """
    rows = next(iter(fitted.values())).rows
    return metric_spec(str(rows["metric"].iloc[0])).range if "metric" in rows.columns else None


def pool(draws: list[np.ndarray]) -> np.ndarray | None:
    """The equal-weight mixture's draws: the same number of finite draws from each member
    (None when no member has any)."""
    used = [d[np.all(np.isfinite(d), axis=1)] for d in draws]
    used = [d for d in used if len(d)]
    if not used:
        return None
    count = min(len(d) for d in used)
    return np.vstack([d[:count] for d in used])


def member_median(usable: dict[str, SplitFit]) -> np.ndarray:
    """(m,) the ensemble's point forecast: the median over the usable members of each member's own
    forecast, its draws' median held to the metric's range (module docstring, point forecast)."""
    support = support_of(usable)
    forecasts = [np.median(forecast_draws(f.intervals, support), axis=0) for f in usable.values()]
    return np.median(np.vstack(forecasts), axis=0)


def summarise(pooled: np.ndarray, level: float = 0.95) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(median, low, high) of (B, m) draws: the central ``level`` interval."""
    tail = (1 - level) / 2 * 100
    low, centre, high = np.percentile(pooled, [tail, 50, 100 - tail], axis=0)
    return centre, low, high


def fit_members(
    metric: str,
    fit_rows: pd.DataFrame,
    held_rows: pd.DataFrame,
    settings: FitSettings,
    seed: int,
    spread: tuple[float, float],
    ceiling: float | None = None,
) -> dict[str, SplitFit]:
    """Every member fitted and bootstrapped on the same split (asymptotes below ``ceiling``)."""
    bounds = registry.bounds_for(metric, ceiling)
    laws = {name: registry.law(name, metric, bounds) for name in members(metric)}
    return {name: fit_split(law, fit_rows, held_rows, settings, seed, spread) for name, law in laws.items()}


def usable_members(fitted: dict[str, SplitFit]) -> dict[str, SplitFit]:
    """Members with bootstrap draws whose fitted sizes identify their form (enough distinct N)."""
    return {
        name: f
        for name, f in fitted.items()
        if f.intervals is not None and f.intervals.successes and not f.too_few_levels
    }


def pooled_draws(fitted: dict[str, SplitFit]) -> np.ndarray | None:
    """(B, m) draws of the usable members' equal-weight mixture at every point; None if none."""
    usable = usable_members(fitted)
    support = support_of(fitted)
    return pool([forecast_draws(f.intervals, support) for f in usable.values()]) if usable else None


#: Resamples of the inner origin's fit (:func:`discrepancy_sd`): it estimates one variance.
INNER_BOOTSTRAP = 100
#: Sizes the inner origin must keep to fit: the three-parameter members' count.
INNER_SIZES = 3


def discrepancy_sd(
    metric: str,
    fit_rows: pd.DataFrame,
    settings: FitSettings,
    seed: int,
    spread: tuple[float, float],
    ceiling: float | None = None,
) -> tuple[float, str]:
    """(discrepancy sd per unit of ln N beyond the largest fitted size, how it was found): the
    ensemble's own forecast of the largest fitted size from the smaller ones, its error beyond its
    draws' spread (:mod:`.discrepancy`); 0 without an inner origin or when that error is within it."""
    split = discrepancy.inner_origin(fit_rows, INNER_SIZES)
    if split is None:
        return 0.0, f"no discrepancy term (fewer than {INNER_SIZES + 1} fitted sizes)"
    inner_fit, inner_held = split
    inner = replace(settings, bootstrap=min(settings.bootstrap, INNER_BOOTSTRAP))
    members = fit_members(metric, inner_fit, inner_held, inner, seed, spread, ceiling)
    draws = pooled_draws(members)
    if draws is None:
        return 0.0, "no discrepancy term (no member forecasts the inner origin)"
    held = next(iter(members.values())).rows["held_out"].to_numpy()
    excess = discrepancy.excess_sd(draws[:, held], inner_held["value"].to_numpy(float))
    per_ln_n = excess / discrepancy.inner_distance(fit_rows["N"].to_numpy(float))
    largest = str(inner_held["model"].iloc[0])
    return (
        per_ln_n,
        f"discrepancy sd {per_ln_n:.3g} per ln N (inner origin: {largest} from the smaller sizes)",
    )


def widened_draws(
    usable: dict[str, SplitFit],
    metric: str,
    fit_rows: pd.DataFrame,
    settings: FitSettings,
    seed: int,
    spread: tuple[float, float],
    ceiling: float | None = None,
) -> tuple[np.ndarray | None, str]:
    """((B, m) draws of the usable members' mixture with the discrepancy term added beyond the
    fitted sizes (:func:`discrepancy_sd`), held to the metric's range; how the term was found).

    The one forecast of the ensemble: the fit stage summarises it (:func:`widened_mixture`) and the
    rolling-origin backtests (:mod:`.backtests`) read every level's interval off it. None when no
    member has draws."""
    draws = pooled_draws(usable)
    if draws is None:
        return None, "no draws"
    per_ln_n, how = discrepancy_sd(metric, fit_rows, settings, seed, spread, ceiling)
    sizes = next(iter(usable.values())).rows["N"].to_numpy(float)
    draws = discrepancy.widen(draws, per_ln_n, discrepancy.distances(sizes, fit_rows["N"]), seed)
    support = support_of(usable)
    return (draws if support is None else np.clip(draws, *support)), how


def widened_mixture(
    usable: dict[str, SplitFit], draws: np.ndarray | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(point forecast, low, high) of the ensemble from :func:`widened_draws`' draws: the
    :func:`member_median` and the draws' 95% interval (NaN where there are no draws)."""
    if draws is None:
        nan = np.full(len(next(iter(usable.values())).rows), np.nan)
        return nan, nan, nan
    _, low, high = summarise(draws)
    return member_median(usable), low, high


def _why_left_out(fitted: SplitFit) -> str:
    if fitted.too_few_levels:
        return ", ".join(fitted.too_few_levels)
    return fitted.reason or fitted.status or "no bootstrap draws"


def fit_ensemble(
    keys: dict[str, Any],
    label: str,
    fit_rows: pd.DataFrame,
    held_rows: pd.DataFrame,
    settings: FitSettings,
    seed: int,
    spread: tuple[float, float],
    rule: StatusRule,
    ceiling: float | None = None,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """The ensemble on one model-protocol split: (fits row, forecast rows judged like any law's)."""
    metric = keys["metric"]
    fitted = fit_members(metric, fit_rows, held_rows, settings, seed, spread, ceiling)
    usable = usable_members(fitted)
    record: dict[str, Any] = {
        **keys,
        "protocol": label.split(":")[0],
        "split_label": label,
        "law": NAME,
        "formula": "equal-weight mixture of " + ", ".join(members(metric)),
        "planning": False,
        "uncertainty": settings.uncertainty,
        "n_fit": len(fit_rows),
        "n_held_out": len(held_rows),
        "n_units": int(fit_rows["model"].nunique()),
    }
    missing = sorted(set(fitted) - set(usable))
    if not usable:
        why = "; ".join(f"{n}: {_why_left_out(f)}" for n, f in fitted.items())
        record.update(status="failed", reason=f"no member of the ensemble forecasts: {why}")
        return record, pd.DataFrame()
    notes = [f"{n}: {f.status}" + (f" ({f.reason})" if f.reason else "") for n, f in usable.items()]
    notes += [f"{n}: left out ({_why_left_out(fitted[n])})" for n in missing]
    record.update(status="ok", reason="; ".join(notes))
    first = next(iter(usable.values()))
    draws, how = widened_draws(usable, metric, fit_rows, settings, seed, spread, ceiling)
    interval = widened_mixture(usable, draws)
    record["reason"] += f"; {how}"
    done = SplitFit(first.result, "ok", "", first.rows)
    inner = summarise(draws, 0.8)[1:] if draws is not None else None
    forecast = forecast_rows(done, fit_rows, label, NAME, ("N",), interval, rule, inner)
    held = forecast[forecast["held_out"]]
    # no parameters of its own (params stays empty); the weights are in the formula
    record["formula"] = f"equal-weight mixture of {', '.join(usable)} (1/{len(usable)} each)"
    record.update(
        bootstrap_ok=int(min(f.intervals.successes for f in usable.values()) * len(usable)),
        coverage=float(held["covered"].mean()) if len(held) else float("nan"),
        **forecast_errors(held["observed"], held["forecast"]),
    )
    return record, forecast
