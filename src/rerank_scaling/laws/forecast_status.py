"""Is a forecast usable? Judged on the forecast, not on the law's parameters.

A fit can leave a parameter unidentified (the asymptote of a curve that has not saturated) and
still forecast the next size well: the forecast is a property of the curve over the range it is
asked for, not of the parameters that trade against each other. "Usable" claims that the
observation will fall inside the interval, so each question below asks what could put it outside,
in this order (the first that fires names the status):

1. ``beyond_validated_range``: the extrapolation ratio x_new / x_max(fit) (per variable of the law,
   the largest) exceeds what rolling-origin backtests have validated (``fitting.validated_ratio``,
   or, when null, the largest ratio among the group's own rolling origins whose final forecasts
   were covered: :func:`validated_ratio`). Nothing is known about the law's error further out.
2. ``curvature_disagrees``: the ladder's own top segment disagrees with the law: forecast from the
   sizes below it (the last rolling origin, Tashman 2000), the largest fitted size fell outside the
   95% interval (:func:`last_segment`). Its slope is the last evidence of how the curve bends; a
   law that already misses it has no claim on the next size.
3. ``break_sensitive``: the interval excludes an outcome that a break of the slope just beyond the
   fitted sizes would give -- the remaining gain stalling (the largest fitted observation) or
   doubling (the forecast plus its predicted change). No fitted size can show such a break, so a
   forecast is only as safe as its interval is wide against its own predicted change. This is the
   opposite of the rule it replaces ("too wide" when the half-width exceeded the predicted change):
   in simulated ladders whose gains flatten or stop past the fitted sizes, the forecasts that rule
   passed were the over-optimistic ones, missing about half the time
   (``benchmarks/results/status_reliability.md`` measures the rule now in place).
4. ``too_wide``: the 95% half-width exceeds ``fitting.usable_half_width`` when it is set (> 0):
   the resolution the user's decision needs; or there is no interval at all.
5. ``form_sensitive``: another defensible form, log-linear in the law's variables
   (y = alpha + sum_v beta_v ln v, the curve every saturating law approaches before it bends),
   fitted to the same points, forecasts outside the interval's half-width: the answer depends on
   the form chosen, which the interval (conditional on the form) does not show.
Otherwise ``usable``. Questions 1 and 3 apply beyond the fitted points only, question 2 beyond
the largest fitted size. Each status comes with a
``reason`` that states its numbers, and the fit's own diagnostics (``status`` of the fit:
``ok``/``degenerate``) are quoted as information.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd

from rerank_scaling.laws.registry import ENSEMBLE

STATUSES = (
    "usable", "too_wide", "beyond_validated_range", "curvature_disagrees", "break_sensitive",
    "form_sensitive",
)  # fmt: skip
#: Multipliers of the predicted change a break just beyond the fitted sizes may apply (module
#: docstring, question 3): the gain stalls (0) or doubles (2).
BREAK_GAINS = (0.0, 2.0)


@dataclass(frozen=True)
class StatusRule:
    """Config ``fitting.validated_ratio`` (resolved to a number), ``fitting.usable_half_width`` and
    what the group's last rolling origin said of its top segment (:func:`last_segment`: empty when
    it agreed or was not backtested)."""

    validated_ratio: float
    usable_half_width: float = 0.0
    curvature_miss: str = ""


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
    for (largest, target), part in final.groupby(["fit_largest", "forecast_size"]):
        if part["covered@0.95"].all():
            ratios.append(float(sizes[target] / sizes[largest]))
    return max(ratios)


def last_segment(backtests: pd.DataFrame, sizes: pd.Series) -> str:
    """How the ladder's top segment disagreed with the law, or "" when it agreed or was not
    backtested: the last rolling origin (the largest fitted size forecast from the smaller ones),
    read off the model-form ensemble's backtest where it has one (else every law's), at the final
    checkpoint, disagreeing when its observation fell outside the 95% interval."""
    if backtests.empty or "covered@0.95" not in backtests:
        return ""
    final = backtests[backtests["final"] & backtests["forecast"].notna()]
    if final.empty:
        return ""
    top = final[final["forecast_size"].map(sizes) == max(sizes[m] for m in final["forecast_size"])]
    if (top["law"] == ENSEMBLE).any():
        top = top[top["law"] == ENSEMBLE]
    missed = top[~top["covered@0.95"].astype(bool)]
    if missed.empty:
        return ""
    row = missed.iloc[0]
    return (
        f"the top segment disagrees: {row['law']} fitted on {row['fit_sizes']} forecast "
        f"{row['forecast_size']} at {row['forecast']:.3f} [{row['low']:.3f}, {row['high']:.3f}], "
        f"observed {row['observed']:.3f}"
    )


def break_outcomes(forecast: np.ndarray, reference: float) -> np.ndarray:
    """(m, len(BREAK_GAINS)) outcomes of a break just beyond the fitted sizes: the predicted change
    from the largest fitted observation ``reference`` multiplied by each of :data:`BREAK_GAINS`."""
    gain = np.asarray(forecast, float) - reference
    return reference + np.outer(gain, BREAK_GAINS)


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
    # the top segment is the size ladder's: it speaks for forecasts beyond the largest fitted size
    size_ratio = rows["N"].to_numpy(float) / float(fit_rows["N"].max()) if "N" in variables else ratio * 0
    reference_model, reference = _reference(fit_rows, variables)
    forecast, low, high = (rows[c].to_numpy(float) for c in ("forecast", "low", "high"))
    half = (high - low) / 2
    alternative = log_linear_forecast(fit_rows, rows, variables)
    parameters = ""
    if fit_status != "ok" and fit_reason:
        detail = fit_reason.removeprefix("not identifiable: ")
        parameters = f"; parameters: {detail} (the forecast is judged on its interval)"
    outcomes = break_outcomes(forecast, reference)
    outside = (outcomes < low[:, None]) | (outcomes > high[:, None])
    statuses, reasons = [], []
    for i, model in enumerate(rows["model"]):
        interval = f"{forecast[i]:.3f} [{low[i]:.3f}, {high[i]:.3f}]"
        head = f"{model}: {interval} at {ratio[i]:.2g}x the largest fitted size"
        beyond = ratio[i] > 1 + 1e-9
        if not np.isfinite(half[i]):
            status, why = "too_wide", "no interval (no bootstrap refit converged)"
        elif ratio[i] > rule.validated_ratio * (1 + 1e-9):
            status = "beyond_validated_range"
            why = f"extrapolation {ratio[i]:.2g}x exceeds the validated {rule.validated_ratio:.2g}x"
        elif rule.curvature_miss and size_ratio[i] > 1 + 1e-9:
            status, why = "curvature_disagrees", rule.curvature_miss
        elif beyond and outside[i].any():
            status = "break_sensitive"
            why = (
                f"a break past {reference_model} (its {reference:.3f}) that stalls or doubles the predicted "
                f"change {forecast[i] - reference:+.3f} gives {outcomes[i, 0]:.3f} or {outcomes[i, 1]:.3f}, "
                "not both inside the interval"
            )
        elif rule.usable_half_width and half[i] > rule.usable_half_width:
            status = "too_wide"
            why = f"half-width {half[i]:.3f} exceeds the tolerance {rule.usable_half_width:.3f}"
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
            if beyond:
                why += "; the top segment agrees; a stall or a doubled gain stays inside"
        statuses.append(status)
        reasons.append(f"{head}: {status}; {why}{parameters}")
    return pd.DataFrame(
        {"forecast_status": statuses, "reason": reasons, "extrapolation": ratio}, index=rows.index
    )
