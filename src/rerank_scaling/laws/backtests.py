"""Rolling-origin backtests over model sizes (beyond the paper).

The fitted sizes of a group (role ``fit``: a held-out size is never part of a backtest) are ordered
by N; for every k from 2 to (number of sizes - 1), fit on the k smallest and forecast the next one
(Tashman 2000, rolling-origin evaluation; Hyndman & Athanasopoulos, "time series cross-validation",
here over size instead of time). Three forecasts are backtested, each with its protocol's rows: the
power law in N and the model-form ensemble (:mod:`.ensemble`) on the last ``last_k`` checkpoints
(model protocol), and the additive joint law on every checkpoint (the released code's joint
protocol). The ensemble counts where its identified members do: with two or three sizes its
log-linear member forecasts where a three-parameter law cannot. Its draws are the fit stage's
(:func:`.ensemble.widened_draws`: the mixture with its model-discrepancy term beyond the fitted
sizes, found from an inner origin of the origin's own sizes), so the backtest judges the forecast
the fit stage reports; an origin with fewer than four sizes has no inner origin and no term. Each held-out
point records its forecast and its prediction interval at every level of :data:`LEVELS`, so the
calibration can be read off, with two naive baselines at the final checkpoint: the largest fitted
size's value ("no change") and a log-linear fit in N.

Calibration is counted over independent units (:func:`calibration`): the checkpoints of one
forecast share one fit and one run offset, so a unit is one (group, origin) at its final
checkpoint, and only origins with as many sizes as the law needs count. Coverage claims are exact
binomial ones (Clopper & Pearson 1934): "k of n inside is consistent with coverage >= L" with L the
one-sided 95% lower bound.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pandas as pd
from scipy import stats

from rerank_scaling.laws import registry
from rerank_scaling.laws.ensemble import NAME as ENSEMBLE
from rerank_scaling.laws.ensemble import (
    fit_members,
    forecast_draws,
    member_median,
    usable_members,
    widened_draws,
)
from rerank_scaling.laws.fit_settings import FitSettings
from rerank_scaling.laws.forecast_status import log_linear_forecast
from rerank_scaling.laws.identifiability import too_few_levels
from rerank_scaling.laws.protocols import ceiling_of, fit_split, last_checkpoints

#: Nominal levels of the calibration curve.
LEVELS = (0.5, 0.68, 0.8, 0.9, 0.95, 0.99)


def rolling_origins(group: pd.DataFrame) -> list[tuple[int, list[str], str]]:
    """(k, the k smallest fitted models, the next one) for every k from 2 to the number of fitted
    sizes - 1; held-out sizes (role ``held_out``) are never used."""
    fitted = group[group["role"] == "fit"] if "role" in group else group
    order = fitted.groupby("model")["N"].first().sort_values().index.tolist()
    return [(k, order[:k], order[k]) for k in range(2, len(order))]


def _protocol_rows(protocol: str, rows: pd.DataFrame, settings: FitSettings) -> pd.DataFrame:
    return last_checkpoints(rows, settings.size_points) if protocol == "model" else rows


def backtest_group(
    keys: dict[str, Any],
    group: pd.DataFrame,
    settings: FitSettings,
    seed: int,
    spread: tuple[float, float] = (0.0, 0.0),
) -> pd.DataFrame:
    """Held-out points of every rolling origin of one group, with intervals at every level."""

    bounds = registry.bounds_for(keys["metric"], ceiling_of(settings, keys))
    candidates = (
        ("model", registry.law(registry.POWER_N, keys["metric"], bounds)),
        ("joint_code", registry.law(registry.ADDITIVE, keys["metric"], bounds)),
    )
    ceiling = ceiling_of(settings, keys)
    frames = []
    for k, fitted, following in rolling_origins(group):
        finals = last_checkpoints(group[group["model"].isin(fitted)], 1)  # each fitted size's final value
        target = last_checkpoints(group[group["model"] == following], 1)
        common = {
            **keys,
            "origin": k,
            "naive_last": float(finals.sort_values("N")["value"].iloc[-1]),
            "log_linear": float(log_linear_forecast(finals, target, ("N",))[0]),
            "fit_sizes": "+".join(fitted),  # for reading; a name may hold "+" itself
            "fit_largest": fitted[-1],
            "uncertainty": settings.uncertainty,
        }
        for protocol, law in candidates:
            fit_rows = _protocol_rows(protocol, group[group["model"].isin(fitted)], settings)
            held_rows = _protocol_rows(protocol, group[group["model"] == following], settings)
            done = fit_split(law, fit_rows, held_rows, settings, seed + k, spread)
            identified = not too_few_levels(law, {v: fit_rows[v].to_numpy(float) for v in law.variables})
            draws = forecast_draws(done.intervals) if done.intervals is not None else None
            if draws is not None and not len(draws):
                draws = None
            record = {"protocol": protocol, "law": law.name, "status": done.status, "reason": done.reason}
            centre = done.intervals.centre if draws is not None else None
            frames.append(_points(done.rows, draws, common | record, identified, centre))
        fit_rows = _protocol_rows("model", group[group["model"].isin(fitted)], settings)
        held_rows = _protocol_rows("model", group[group["model"] == following], settings)
        members = fit_members(keys["metric"], fit_rows, held_rows, settings, seed + k, spread, ceiling)
        usable = usable_members(members)
        draws, how = (
            widened_draws(usable, keys["metric"], fit_rows, settings, seed + k, spread, ceiling)
            if usable
            else (None, "")
        )
        record = {"protocol": "model", "law": ENSEMBLE, "status": "ok" if usable else "failed"}
        record["reason"] = (
            f"members: {', '.join(usable)}; {how}" if usable else "no member is identified by these sizes"
        )
        rows = next(iter(members.values())).rows
        centre = member_median(usable) if draws is not None else None
        frames.append(_points(rows, draws, common | record, bool(usable), centre))
    return pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()


def _points(
    rows: pd.DataFrame,
    draws: np.ndarray | None,
    record: dict[str, Any],
    identified: bool,
    centre: np.ndarray | None = None,
) -> pd.DataFrame:
    """The held-out points of one backtest fit: the forecast (``centre``: the law's fitted curve, or
    the ensemble's :func:`.ensemble.member_median`; else the draws' median) and the interval of the
    draws at every level of :data:`LEVELS` (:func:`.ensemble.forecast_draws` makes them percentile or
    basic as the fit's intervals are); no forecast where there are no draws."""
    held = rows[rows["held_out"]]
    frame = held[["model", "checkpoint", "step", "final", "value"]].rename(
        columns={"value": "observed", "model": "forecast_size"}
    )
    frame = frame.assign(**record, enough_sizes=identified)
    if draws is None:
        return frame
    mask = rows["held_out"].to_numpy()
    frame["forecast"] = np.median(draws[:, mask], axis=0) if centre is None else centre[mask]
    for level in LEVELS:
        tail = (1 - level) / 2 * 100
        low, high = np.percentile(draws[:, mask], [tail, 100 - tail], axis=0)
        frame[f"covered@{level:g}"] = (frame["observed"] >= low) & (frame["observed"] <= high)
        if level == 0.95:
            frame["low"], frame["high"] = low, high
    return frame


def summary(points: pd.DataFrame) -> pd.DataFrame:
    """Error and coverage per rolling-origin step: RMSE, MAE, bias, 95% coverage (all and final)."""
    if points.empty or "forecast" not in points:
        return pd.DataFrame()
    keys = [
        "objective",
        "attention",
        "metric",
        "split",
        "protocol",
        "law",
        "origin",
        "fit_sizes",
        "forecast_size",
    ]
    rows = []
    for values, part in points.dropna(subset=["forecast"]).groupby(keys):
        error = part["forecast"] - part["observed"]
        final = part[part["final"]]
        rows.append(
            dict(zip(keys, values, strict=True))
            | {
                "status": part["status"].iloc[0],
                "reason": part["reason"].iloc[0],
                "n": len(part),
                "rmse": float(np.sqrt((error**2).mean())),
                "mae": float(error.abs().mean()),
                "bias": float(error.mean()),
                "coverage_95": float(part["covered@0.95"].mean()),
                "final_covered_95": bool(final["covered@0.95"].all()) if len(final) else np.nan,
            }
        )
    return pd.DataFrame(rows)


def coverage_bound(inside: int, total: int, confidence: float = 0.95) -> float:
    """One-sided exact (Clopper-Pearson) lower confidence bound on coverage from k of n inside."""
    if total == 0:
        return float("nan")
    return float(stats.beta.ppf(1 - confidence, inside, total - inside + 1)) if inside else 0.0


def interval_score(low: np.ndarray, high: np.ndarray, y: np.ndarray, level: float = 0.95) -> np.ndarray:
    """Gneiting & Raftery (2007) eq. 43: width plus 2/alpha times the distance outside."""
    alpha = 1 - level
    return (high - low) + 2 / alpha * np.clip(low - y, 0, None) + 2 / alpha * np.clip(y - high, 0, None)


def calibration(points: pd.DataFrame) -> pd.DataFrame:
    """Coverage per (protocol, law, metric) over independent units, at every nominal level.

    A unit is one (group, origin) at its final checkpoint, kept only when the origin has as many
    sizes as the law needs (``enough_sizes``) and its fit did not fail. With each level: units
    inside, the exact one-sided 95% lower bound on coverage and its sentence; at the final
    checkpoint, the method's median |error| and interval score against the naive baselines'
    median |error| (the largest fitted size's value, a log-linear fit in N).
    """
    if points.empty or "forecast" not in points:
        return pd.DataFrame()
    units = points.dropna(subset=["forecast"])
    units = units[units["final"] & units.get("enough_sizes", True)]
    rows = []
    for (protocol, law, metric), part in units.groupby(["protocol", "law", "metric"]):
        y = part["observed"].to_numpy(float)
        scores = interval_score(part["low"].to_numpy(float), part["high"].to_numpy(float), y)
        for level in LEVELS:
            inside, total = int(part[f"covered@{level:g}"].sum()), len(part)
            bound = coverage_bound(inside, total)
            rows.append(
                {
                    "protocol": protocol,
                    "law": law,
                    "metric": metric,
                    "uncertainty": part["uncertainty"].iloc[0],
                    "nominal": level,
                    "empirical": inside / total,
                    "n_units": total,
                    "inside": inside,
                    "coverage_lower_95": bound,
                    "statement": f"{inside} of {total} inside is consistent with coverage >= {bound:.2f}",
                    "median_abs_error": float(np.median(np.abs(part["forecast"] - y))),
                    "median_interval_score_95": float(np.median(scores)),
                    "naive_last_median_abs_error": float(np.median(np.abs(part["naive_last"] - y))),
                    "log_linear_median_abs_error": float(np.nanmedian(np.abs(part["log_linear"] - y)))
                    if part["log_linear"].notna().any()
                    else np.nan,
                }
            )
    return pd.DataFrame(rows)
