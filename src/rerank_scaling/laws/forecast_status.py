"""Is a forecast usable? Judged on the forecast, not on the law's parameters (issue 24, item 1).

A fit can leave a parameter unidentified (the asymptote of a curve that has not saturated) and
still forecast the next size well: the forecast is a property of the curve over the range it is
asked for, not of the parameters that trade against each other. So a forecast's status asks three
questions of the forecast itself, in this order:

1. ``beyond_validated_range``: the extrapolation ratio x_new / x_max(fit) (per variable of the law,
   the largest) exceeds what rolling-origin backtests have validated (``fitting.validated_ratio``,
   or, when null, the largest ratio among the group's own rolling origins whose final forecasts
   were covered: :func:`validated_ratio`). Nothing is known about the law's error further out.
2. ``too_wide``: the 95% interval's half-width exceeds the larger of the forecast's distance from
   the largest fitted observation and ``fitting.usable_half_width``. Why this rule: the decision a
   forecast serves is "does the larger model change the metric, and by about how much?". An
   interval that is wider than the predicted change contains "no change" (the largest fitted
   size's value) and so cannot tell the two apart; an absolute tolerance lets a user who needs
   only a given resolution (e.g. +-0.03 nDCG) accept a forecast of a flat curve.
3. ``form_sensitive``: another defensible form, log-linear in the law's variables
   (y = alpha + sum_v beta_v ln v, the curve every saturating law approaches before it bends),
   fitted to the same points, forecasts outside the interval's half-width: the answer depends on
   the form chosen, which the interval (conditional on the form) does not show.
Otherwise ``usable``. Each status comes with a ``reason`` that states its numbers, and the fit's
own diagnostics (``status`` of the fit: ``ok``/``degenerate``) are quoted as information.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

STATUSES = ("usable", "too_wide", "beyond_validated_range", "form_sensitive")


@dataclass(frozen=True)
class StatusRule:
    """Config ``fitting.validated_ratio`` (resolved to a number) and ``fitting.usable_half_width``."""

    validated_ratio: float
    usable_half_width: float = 0.0


def validated_ratio(backtests: pd.DataFrame, sizes: pd.Series) -> float:
    """The largest size ratio N_next / N_max(fit) among rolling origins whose final-checkpoint
    forecasts were all inside their 95% intervals (1.0, i.e. none, without such an origin).

    ``backtests`` are :func:`rerank_scaling.laws.backtests.backtest_group`'s points; ``sizes`` maps
    a model to its N.
    """
    if backtests.empty or "covered@0.95" not in backtests:
        return 1.0
    final = backtests[backtests["final"] & backtests["forecast"].notna()]
    ratios = [1.0]
    for (fit_sizes, target), part in final.groupby(["fit_sizes", "forecast_size"]):
        if part["covered@0.95"].all():
            ratios.append(float(sizes[target] / max(sizes[m] for m in fit_sizes.split("+"))))
    return max(ratios)


def log_linear_forecast(
    fit_rows: pd.DataFrame, new_rows: pd.DataFrame, variables: tuple[str, ...]
) -> np.ndarray:
    """Least-squares forecasts of y = alpha + sum_v beta_v ln v (NaN where it is not identified)."""
    used = [v for v in variables if fit_rows[v].nunique() > 1]
    if len(fit_rows) < len(used) + 2:
        return np.full(len(new_rows), np.nan)
    design = np.column_stack([np.ones(len(fit_rows))] + [np.log(fit_rows[v].to_numpy(float)) for v in used])
    coef, *_ = np.linalg.lstsq(design, fit_rows["value"].to_numpy(float), rcond=None)
    new = np.column_stack([np.ones(len(new_rows))] + [np.log(new_rows[v].to_numpy(float)) for v in used])
    return new @ coef


def _reference(fit_rows: pd.DataFrame, variables: tuple[str, ...]) -> tuple[str, float]:
    """The largest fitted observation: the point furthest along the law's variables."""
    last = fit_rows.sort_values(list(variables)).iloc[-1]
    return str(last["model"]), float(last["value"])


def judge(
    rows: pd.DataFrame,
    fit_rows: pd.DataFrame,
    variables: tuple[str, ...],
    rule: StatusRule,
    fit_status: str = "ok",
    fit_reason: str = "",
) -> pd.DataFrame:
    """``forecast_status``, ``reason`` and ``extrapolation`` of every row of ``rows`` (columns
    ``model``, ``forecast``, ``low``, ``high`` and the law's variables), from the points fitted."""
    ratio = np.ones(len(rows))
    for v in variables:
        ratio = np.maximum(ratio, rows[v].to_numpy(float) / float(fit_rows[v].max()))
    reference_model, reference = _reference(fit_rows, variables)
    forecast, low, high = (rows[c].to_numpy(float) for c in ("forecast", "low", "high"))
    half = (high - low) / 2
    distance = np.abs(forecast - reference)
    alternative = log_linear_forecast(fit_rows, rows, variables)
    parameters = ""
    if fit_status != "ok" and fit_reason:
        detail = fit_reason.removeprefix("not identifiable: ")
        parameters = f"; parameters: {detail} (the forecast is judged on its interval)"
    statuses, reasons = [], []
    for i, model in enumerate(rows["model"]):
        interval = f"{forecast[i]:.3f} [{low[i]:.3f}, {high[i]:.3f}]"
        head = f"{model}: {interval} at {ratio[i]:.2g}x the largest fitted size"
        if not np.isfinite(half[i]):
            status, why = "too_wide", "no interval (no bootstrap refit converged)"
        elif ratio[i] > rule.validated_ratio * (1 + 1e-9):
            status = "beyond_validated_range"
            why = f"extrapolation {ratio[i]:.2g}x exceeds the validated {rule.validated_ratio:.2g}x"
        elif half[i] > max(distance[i], rule.usable_half_width):
            status = "too_wide"
            why = (
                f"half-width {half[i]:.3f} exceeds the forecast's distance {distance[i]:.3f} from "
                f"{reference_model}'s {reference:.3f}"
                + (f" and the tolerance {rule.usable_half_width:.3f}" if rule.usable_half_width else "")
            )
        elif np.isfinite(alternative[i]) and abs(alternative[i] - forecast[i]) > half[i]:
            status = "form_sensitive"
            why = f"log-linear forecasts {alternative[i]:.3f}, outside the half-width {half[i]:.3f}"
        else:
            check = (
                "log-linear agrees"
                if np.isfinite(alternative[i])
                else "too few points for a log-linear check"
            )
            status, why = "usable", f"half-width {half[i]:.3f}; {check}"
        statuses.append(status)
        reasons.append(f"{head}: {status}; {why}{parameters}")
    return pd.DataFrame(
        {"forecast_status": statuses, "reason": reasons, "extrapolation": ratio}, index=rows.index
    )
