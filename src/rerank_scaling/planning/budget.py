"""Budget allocation (Fang et al., Scaling Laws for Dense Retrieval eq. 11): under a budget B, size N affords
D(N) = (B - Z_infer C_infer(N)) / (Z_data + Z_train f_train(N)) examples; the fitted joint law's prediction
M(N, D(N)) is maximised over N (grid, then bounded refinement in log N), with and without the inference term,
and only where the forecast is defined: inside the metric's range and the validated range
(:class:`~.forecast.ValidatedRange`). The decision among the configured sizes, with P(best), is
:mod:`.decision_rows`; this is the point optimum of the central fit.

A generalisation of eq. 11, stated: Fang et al., Scaling Laws for Dense Retrieval prices training as Z_train N
(a cost per parameter for a fixed amount of data). Here training costs Z_train C_train = Z_train D f_train(N),
the price of a FLOP times the FLOPs of D examples at size N (f_train ~ 6 N tokens for an encoder, plus
attention; :mod:`.cost_model`). Why not follow the paper with a switch: with Z_train N the cost
does not depend on D, so D(N) = (B - Z_infer C_infer(N) - Z_train N) / Z_data and the allocation
between size and data, which is the question eq. 11 is asked, turns on the price of a training
*example* alone; training compute, the dominant cost of a GPU run, would be free per example. The
paper's form is the special case of a fixed D (then Z_train D f_train(N) = Z'_train N with
Z'_train = Z_train D f_train(N) / N, constant when f_train is linear in N), so nothing it can
express is lost.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pandas as pd
from scipy.optimize import minimize_scalar

from rerank_scaling.planning.cost_model import CostModel
from rerank_scaling.planning.forecast import MetricForecast


@dataclass(frozen=True)
class Allocation:
    """The best size under one budget, and what it buys."""

    budget: float
    inference: bool
    status: str  # "ok" | "infeasible"
    reason: str = ""
    size: float = float("nan")
    examples: float = float("nan")
    predicted: float = float("nan")
    at_boundary: bool = False  # at an end of the size range or of the validated range (may lie outside)


def budget_curve(
    forecast: MetricForecast, cost: CostModel, budget: float, sizes: np.ndarray, inference: bool = True
) -> pd.DataFrame:
    """M(N, D(N)) over ``sizes`` when each size spends the whole ``budget`` (NaN: unaffordable)."""
    sizes = np.asarray(sizes, float)
    d = cost.affordable_examples(sizes, budget, inference)
    predicted = np.where(np.isfinite(d), forecast(sizes, np.nan_to_num(d, nan=1.0)), np.nan)
    return pd.DataFrame({"size": sizes, "examples": d, "predicted": predicted})


def optimal_allocation(
    forecast: MetricForecast,
    cost: CostModel,
    budget: float,
    bounds: tuple[float, float],
    inference: bool = True,
    grid: int = 256,
) -> Allocation:
    """argmax_N M(N, D(N)) on [lo, hi]: a log-spaced grid, then bounded refinement around its best."""
    sizes = np.geomspace(*bounds, grid)

    def utility(n: np.ndarray) -> np.ndarray:
        d = cost.affordable_examples(n, budget, inference)
        return np.where(np.isfinite(d), forecast.utility(n, np.nan_to_num(d, nan=1.0)), -np.inf)

    values = utility(sizes)
    if not np.isfinite(values).any():
        where = "in range"
        if forecast.validated is not None:
            where = (
                f"within the validated range ({forecast.validated.ratio:.3g}x the fitted sizes and examples)"
            )
        return Allocation(
            budget, inference, "infeasible", f"budget {budget:.4g} buys no training at any size {where}"
        )
    best = int(np.argmax(values))
    lo, hi = np.log(sizes[max(best - 1, 0)]), np.log(sizes[min(best + 1, grid - 1)])
    with np.errstate(invalid="ignore"):  # -inf beyond the validated range, next to the grid's best
        refined = minimize_scalar(
            lambda log_n: -float(utility(np.array([np.exp(log_n)]))[0]),
            bounds=(lo, hi),
            method="bounded",
            options={"xatol": 1e-7},
        )
    size = float(np.exp(refined.x)) if -refined.fun >= values[best] else float(sizes[best])
    d = float(cost.affordable_examples(np.array([size]), budget, inference)[0])
    return Allocation(
        budget,
        inference,
        "ok",
        size=size,
        examples=d,
        predicted=float(forecast(np.array([size]), np.array([d]))[0]),
        at_boundary=bool(best in (0, grid - 1) or not np.isfinite(values[[best - 1, best + 1]]).all()),
    )
