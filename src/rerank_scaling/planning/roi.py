"""ROI-constrained choice (Scaling Laws for Online Advertisement Retrieval eqs. 5-6): with the training set D
fixed, the value is a linear map of the metric, V(N) = v sign (M(N, D) - M_ref) (M_ref e.g. BM25's value: what
the reranker adds over the first stage), and

    N_roi = argmax_N M(N, D)   subject to   V(N) / Z(N, D) >= lambda          (eqs. 5-6)

by grid search over candidate sizes (maximising V is the same as maximising M: v > 0). Without a
configured v no choice is made: any default v would decide the answer (a v scaled so that the best
candidate meets lambda is circular), so the plan reports the frontier (metric and cost per size)
and, per size, the break-even v* = lambda Z(N, D) / (sign (M(N, D) - M_ref)) at which it becomes
feasible; the user reads the choice off for their own v.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rerank_scaling.planning.cost_model import CostModel
from rerank_scaling.planning.forecast import MetricForecast


def value_of(predicted: np.ndarray, sign: int, value_per_point: float, reference: float) -> np.ndarray:
    """V = v sign (M - M_ref): revenue as a linear map of the metric's gain over the reference."""
    return value_per_point * sign * (np.asarray(predicted, float) - reference)


def roi_frontier(
    forecast: MetricForecast,
    cost: CostModel,
    sizes: np.ndarray,
    examples: float,
    value_per_point: float,
    reference: float,
    lam: float,
    inference: bool = True,
) -> pd.DataFrame:
    """Per candidate size (training set ``examples`` fixed): metric, value, cost, ROI = V / Z, feasible,
    and the break-even value per metric point v* = lambda Z / (sign (M - M_ref)) (NaN where the size
    does not beat the reference). ``value_per_point`` NaN: no value map; value, ROI NaN, none feasible."""
    sizes = np.asarray(sizes, float)
    d = np.full(len(sizes), float(examples))
    predicted = forecast(sizes, d)
    value = value_of(predicted, forecast.sign, value_per_point, reference)
    total = cost.total(sizes, d, inference)
    roi = value / total
    gain = value_of(predicted, forecast.sign, 1.0, reference)
    with np.errstate(all="ignore"):
        break_even = np.where(gain > 0, lam * total / gain, np.nan)
    frame = pd.DataFrame(
        {
            "size": sizes,
            "examples": d,
            "predicted": predicted,
            "value": value,
            "roi": roi,
            "break_even_value_per_point": break_even,
        }
    )
    frame = pd.concat([frame, cost.breakdown(sizes, d, inference)], axis=1)
    frame["feasible"] = np.isfinite(roi) & (roi >= lam)
    return frame


def roi_choice(frontier: pd.DataFrame, sign: int) -> pd.Series | None:
    """Eqs. 5-6 by grid search: the feasible candidate with the best metric; None if none is feasible."""
    feasible = frontier[frontier["feasible"] & np.isfinite(frontier["predicted"])]
    if feasible.empty:
        return None
    return feasible.loc[(sign * feasible["predicted"]).idxmax()]


def reference_metric(metrics: pd.DataFrame, metric: str, split: str, setting: str | float) -> float:
    """M_ref of the value map: BM25's value on the split ("bm25"), or the configured number."""
    if not isinstance(setting, str):
        return float(setting)
    rows = metrics[
        (metrics["family"] == "bm25") & (metrics["metric"] == metric) & (metrics["split"] == split)
    ]
    return float(rows["value"].iloc[0]) if len(rows) else 0.0
