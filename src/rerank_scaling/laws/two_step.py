"""Two-step forecasts: a rank metric through a continuous loss.

A rank metric such as nDCG@10 moves in steps and saturates at the reranking ceiling; the contrastive
entropy over the candidate list (CE@k, the loss of Fang et al., Scaling Laws for Dense Retrieval) is
continuous and follows a smooth law in N. Following the two-step method of Bhagia et al. 2024 ("Establishing
Task Scaling Laws via Compute-Efficient Model Ladders", the OLMo ladder: task loss from (N, D), then accuracy
from task loss), the forecast goes

1. CE at the target size from the model-form ensemble of CE's laws (:mod:`.ensemble`: log-linear,
   the bounded power law, Fang's law), fitted on the fitted sizes' final checkpoints as the model
   protocol fits them;
2. the rank metric from CE by a monotone map ``M = u + v CE`` (v < 0), fitted by least squares on
   every checkpoint of every fitted run (the runs' whole trajectories, not only their finals: the
   map is one relation between two measurements of one ranking, wherever a run is on its way).

Uncertainty propagates through both steps, draw by draw: CE draws from the ensemble's pooled
bootstrap (run noise included) widened by its model-discrepancy term beyond the fitted sizes
(:func:`.ensemble.widened_draws`, the fit stage's own ensemble forecast); a map refitted on a
bootstrap resample of the fitted runs (runs, not checkpoints, are the independent units); and the
held-out run's own scatter about the map, drawn from N(0, s^2) with s^2 the mean squared residual
of the fitted runs' final checkpoints (the points a forecast is about). The forecast is the median
of the draws, the 95% interval their 2.5th and 97.5th percentiles; rows are judged like every
law's (:mod:`.forecast_status`).

A linear map is a local one: it is trusted over the CE range the fitted runs span, and the
forecast status's extrapolation ratio (in N) is the only range check it gets.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd

from rerank_scaling.laws import registry
from rerank_scaling.laws.ensemble import fit_members, usable_members, widened_draws
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.fit_statistics import forecast_errors
from rerank_scaling.laws.fitting import FitResult
from rerank_scaling.laws.forecast_status import StatusRule
from rerank_scaling.laws.protocols import SplitFit, forecast_rows, splits_for
from rerank_scaling.registries.measures import metric_spec

NAME = registry.TWO_STEP
#: Fewest fitted runs for the map's bootstrap (two parameters, and a resample of runs needs spread).
MIN_RUNS = 3


def loss_metrics(metrics: tuple[str, ...]) -> list[str]:
    """The continuous losses among the fitted metrics (CE@k over k candidates): step 1's candidates."""
    return [m for m in metrics if metric_spec(m).direction < 0 and metric_spec(m).k is not None]


def fit_map(pairs: pd.DataFrame) -> tuple[float, float]:
    """Least-squares ``target = u + v loss`` over the (loss, target) pairs; (u, v)."""
    design = np.column_stack([np.ones(len(pairs)), pairs["loss"].to_numpy(float)])
    (u, v), *_ = np.linalg.lstsq(design, pairs["target"].to_numpy(float), rcond=None)
    return float(u), float(v)


def map_draws(pairs: pd.DataFrame, draws: int, rng: np.random.Generator) -> np.ndarray:
    """(draws, 2) maps refitted on resamples of the runs (column ``model``) with replacement.

    A resample's least squares is :func:`fit_map` on the chosen runs' rows concatenated, a run
    drawn c times counting c times: the normal equations of per-run sums weighted by the counts,
    solved by least squares as :func:`fit_map` is (a resample whose losses are all equal has no
    slope to find: the minimum-norm solution, not an error)."""
    runs = pairs["model"].unique()
    loss, target = pairs["loss"].to_numpy(float), pairs["target"].to_numpy(float)
    run_of = pd.Categorical(pairs["model"], categories=runs).codes
    sums = np.stack(
        [
            np.bincount(run_of, weights=w, minlength=len(runs))
            for w in (np.ones_like(loss), loss, loss**2, target, loss * target)
        ],
        axis=1,
    )  # per run: n, sum x, sum x^2, sum y, sum xy
    out = np.empty((draws, 2))
    for index in range(draws):
        chosen = rng.choice(len(runs), size=len(runs), replace=True)
        while len(set(chosen)) < 2:  # one run alone cannot place a line through the sizes
            chosen = rng.choice(len(runs), size=len(runs), replace=True)
        n, x, xx, y, xy = np.bincount(chosen, minlength=len(runs)) @ sums
        out[index] = np.linalg.lstsq(np.array([[n, x], [x, xx]]), np.array([y, xy]), rcond=None)[0]
    return out


def _paired(loss_rows: pd.DataFrame, target_rows: pd.DataFrame) -> pd.DataFrame:
    keys = ["model", "checkpoint"]
    return (
        loss_rows[[*keys, "value", "final"]]
        .rename(columns={"value": "loss"})
        .merge(target_rows[[*keys, "value"]].rename(columns={"value": "target"}), on=keys)
    )


def fit_two_step(
    keys: dict[str, Any],
    loss_metric: str,
    loss_group: pd.DataFrame,
    target_group: pd.DataFrame,
    settings: FitSettings,
    seed: int,
    spread: tuple[float, float],
    rule: StatusRule,
) -> tuple[dict[str, Any], pd.DataFrame]:
    """The two-step forecast of ``keys['metric']`` through ``loss_metric`` on one group:
    (fits row, forecast rows of the model protocol's fitted and held-out points)."""
    target = keys["metric"]
    record: dict[str, Any] = {
        **keys,
        "protocol": "model",
        "split_label": "model",
        "law": NAME,
        "formula": f"{target} = u + v {loss_metric}; {loss_metric} by the ensemble of its forms",
        "planning": False,
        "uncertainty": settings.uncertainty,
    }
    (_, loss_fit, loss_held), (_, target_fit, target_held) = (
        next(splits_for("model", group, settings)) for group in (loss_group, target_group)
    )
    fitted_runs = loss_group[loss_group["role"] == "fit"]
    pairs = _paired(fitted_runs, target_group[target_group["role"] == "fit"])
    record.update(n_fit=len(target_fit), n_held_out=len(target_held), n_units=int(pairs["model"].nunique()))
    u, v = fit_map(pairs) if len(pairs) >= 2 else (np.nan, np.nan)
    direction = metric_spec(target).direction * metric_spec(loss_metric).direction
    problem = ""
    if pairs["model"].nunique() < MIN_RUNS:
        problem = f"{pairs['model'].nunique()} fitted runs for the map; it needs {MIN_RUNS}"
    elif not np.isfinite(v) or np.sign(v) != np.sign(direction):
        problem = f"the map is not monotone the right way: {target} = {u:.3g} + {v:.3g} {loss_metric}"
    members = fit_members(loss_metric, loss_fit, loss_held, settings, seed, spread) if not problem else {}
    # the loss's forecast is the ensemble's, its model-discrepancy term included (as the fit stage
    # and the backtests forecast it): without it the two-step interval under-covered
    draws, widening = (
        (None, "")
        if problem
        else widened_draws(usable_members(members), loss_metric, loss_fit, settings, seed, spread)
    )
    if draws is None and not problem:
        problem = f"no form of {loss_metric} forecasts (the ensemble's members all left out)"
    if problem:
        record.update(status="failed", reason=problem)
        return record, pd.DataFrame()
    loss_points = next(iter(members.values())).rows[["model", "checkpoint"]]
    rng = np.random.default_rng(seed)
    maps = map_draws(pairs, len(draws), rng)
    finals = pairs[pairs["final"]]
    scatter = float(np.sqrt(np.mean((finals["target"] - (u + v * finals["loss"])) ** 2)))
    noise = rng.normal(0.0, scatter, draws.shape)
    target_draws = maps[:, :1] + maps[:, 1:] * draws + noise
    low, centre, high = np.percentile(target_draws, [2.5, 50, 97.5], axis=0)
    position = {tuple(k): i for i, k in enumerate(loss_points.itertuples(index=False))}
    both = pd.concat(
        [target_fit.assign(held_out=False), target_held.assign(held_out=True)], ignore_index=True
    )
    order = [position.get((m, c)) for m, c in zip(both["model"], both["checkpoint"], strict=True)]
    if any(i is None for i in order):
        record.update(status="failed", reason=f"{target} has points without a {loss_metric} value")
        return record, pd.DataFrame()
    interval = (centre[order], low[order], high[order])
    done = SplitFit(FitResult(NAME, "ok", params=np.array([u, v]), n=len(pairs)), "ok", "", both)
    forecast = forecast_rows(done, target_fit, "model", NAME, ("N",), interval, rule)
    held = forecast[forecast["held_out"]]
    notes = ", ".join(usable_members(members))
    record.update(
        status="ok",
        reason=f"map u = {u:.4g}, v = {v:.4g} over {len(pairs)} checkpoints, scatter {scatter:.4f}; "
        f"{loss_metric} forms: {notes}; {widening}",
        bootstrap_ok=len(draws),
        coverage=float(held["covered"].mean()) if len(held) else float("nan"),
        **forecast_errors(held["observed"], held["forecast"]),
    )
    return record, forecast
