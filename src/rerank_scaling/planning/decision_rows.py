"""The plan's decisions as rows: per group and budget (Fang et al., Scaling Laws for Dense Retrieval eq. 11)
and per group and law of the ROI choice (Scaling Laws for Online Advertisement Retrieval eqs. 5-6), a
``decision`` row (the verdict, :func:`.decisions.decide`) and one ``candidate`` row per configured size (its
examples, extrapolation, forecast interval, P(best), expected regret, P(ROI >= lambda)); candidates beyond the
validated range are compared on the law's extrapolated draws and flagged (:func:`.decisions.decide`).

The candidates are the configured models: a decision is "which of the sizes we can build do we
train", and P(best) over a continuous grid of sizes would spread over neighbours that nobody
distinguishes. Under a budget every candidate spends all of it (D(N) from eq. 11, with serving
cost): its ROI is V(M) / B. In the ROI choice D is fixed and the cost is Z(N, D).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from rerank_scaling.planning.cost_model import CostModel
from rerank_scaling.planning.decisions import Decision, decide
from rerank_scaling.planning.forecast import FormMixture, MetricForecast
from rerank_scaling.planning.plan_settings import PlanSettings
from rerank_scaling.planning.roi import value_of

FULL_SCOPE = "data+train+inference"


def _rows(
    decision: Decision,
    base: dict[str, Any],
    sizes: np.ndarray,
    examples: np.ndarray,
    forecast: MetricForecast | FormMixture,
    note: str,
) -> list[dict[str, Any]]:
    """The decision row, then a candidate row per configured size."""
    validated = forecast.validated.ratio if forecast.validated else np.nan
    reason = "; ".join(filter(None, [decision.reason, note]))
    status = "undecided" if decision.verdict == "cannot decide" else "decided"
    rows = [
        {**base, "kind": "decision", "status": status}
        | decision.record()
        | {"reason": reason, "validated_ratio": validated}
    ]
    for (_, candidate), size, d in zip(decision.candidates.iterrows(), sizes, examples, strict=True):
        rows.append(
            {
                **base,
                "kind": "candidate",
                "model": candidate["label"],
                "status": candidate["status"],
                "size": float(size),
                "examples": float(d),
                "steps": float(d) / forecast.examples_per_step,
                "validated_ratio": validated,
            }
            | {k: candidate[k] for k in ("extrapolation", "predicted", "low", "high", "p_best")}
            | {k: candidate[k] for k in ("expected_regret", "p_roi")}
        )
    return rows


def budget_decision(
    base: dict[str, Any],
    forecast: MetricForecast | FormMixture,
    cost: CostModel,
    budget: float,
    configured: dict[str, float],
    settings: PlanSettings,
    reference: float,
    note: str = "",
) -> list[dict[str, Any]]:
    """Which configured size to train when each spends the whole ``budget`` (eq. 11, serving included);
    ``forecast``'s draws (a :class:`FormMixture`: bootstrap and form draws) go through the argmax."""
    sizes = np.array(list(configured.values()), float)
    examples = cost.affordable_examples(sizes, budget, inference=True)
    affordable = np.isfinite(examples)
    spent = np.where(affordable, examples, 1.0)
    draws = forecast.sample(sizes, spent, extrapolate=True)  # beyond the range: compared, flagged
    draws[:, ~affordable] = np.nan
    extrapolation = np.where(affordable, forecast.extrapolation(sizes, spent), np.nan)
    roi = None
    if settings.value_per_metric_point is not None:
        value = value_of(draws, forecast.sign, settings.value_per_metric_point, reference)
        roi = value / cost.total(sizes, examples, inference=True)
    decision = decide(
        list(configured),
        draws,
        extrapolation,
        forecast.validated.ratio if forecast.validated else np.inf,
        forecast.sign,
        settings.decision_p_best,
        roi,
        settings.roi_lambda,
        unaffordable=~affordable,
    )
    row = {**base, "question": "budget", "budget": budget, "cost_scope": FULL_SCOPE}
    return _rows(decision, row, sizes, examples, forecast, note)


def roi_decision(
    base: dict[str, Any],
    forecast: MetricForecast,
    cost: CostModel,
    examples: float,
    configured: dict[str, float],
    settings: PlanSettings,
    reference: float,
    note: str = "",
) -> list[dict[str, Any]]:
    """Eqs. 5-6 per draw: the best configured size among those with V / Z(N, D) >= lambda (D fixed)."""
    sizes = np.array(list(configured.values()), float)
    d = np.full(len(sizes), float(examples))
    draws = forecast.sample(sizes, d, extrapolate=True)
    value = value_of(draws, forecast.sign, settings.value_per_metric_point, reference)
    roi = value / cost.total(sizes, d, inference=True)
    decision = decide(
        list(configured),
        draws,
        forecast.extrapolation(sizes, d),
        forecast.validated.ratio if forecast.validated else np.inf,
        forecast.sign,
        settings.decision_p_best,
        roi,
        settings.roi_lambda,
        feasible=np.isfinite(roi) & (roi >= settings.roi_lambda),
    )
    return _rows(decision, {**base, "question": "roi", "cost_scope": FULL_SCOPE}, sizes, d, forecast, note)


def undecided(base: dict[str, Any], reason: str) -> dict[str, Any]:
    """The decision row of a question no fit can answer (missing or failed fit)."""
    return {**base, "kind": "decision", "status": "undecided", "verdict": "cannot decide"} | {
        "candidate": "",
        "reason": reason,
    }
