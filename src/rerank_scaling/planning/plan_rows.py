"""From fitted laws to decisions: the rows of plan.parquet.

:func:`make_plan` assembles them from the fit stage's joint-protocol fits (with their bootstrap
draws), the runs' token and step counts and the cost profiles: one row per profile; per (group,
budget) a ``decision`` among the configured sizes and its ``candidate`` rows
(:mod:`.decision_rows`); per (group, budget, cost scope) the point optimum of budget allocation
(:mod:`.budget`); per (group, law) the ROI choice (:mod:`.roi`, with its decision when a value per
metric point is configured; without one, ``frontier`` rows at the configured sizes). Every forecast
is restricted to its validated range (:class:`.forecast.ValidatedRange`): nothing is optimised
beyond what the backtests validated. A fit whose parameters are not identified (``degenerate``) is
planned with on its draws, saying so; a missing or failed fit yields ``cannot decide`` and its reason.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any

import numpy as np
import pandas as pd

from rerank_scaling.laws.fit_settings import GROUP_KEYS, FitSettings
from rerank_scaling.laws.registry import ADDITIVE, bnsl_name, is_bnsl
from rerank_scaling.planning.annotation_prices import data_price
from rerank_scaling.planning.budget import budget_curve, optimal_allocation
from rerank_scaling.planning.cost_model import COST_FIELDS, CostModel, cost_model, size_points
from rerank_scaling.planning.decision_rows import budget_decision, roi_decision, undecided
from rerank_scaling.planning.forecast import (
    RunStats,
    fit_forecast,
    fit_points,
    form_mixture,
    joint_fits,
    unusable_fit,
)
from rerank_scaling.planning.measured_profiles import CostProfile
from rerank_scaling.planning.plan_settings import PlanSettings
from rerank_scaling.planning.roi import reference_metric, roi_choice, roi_frontier
from rerank_scaling.registries.size_axes import model_size, size_column

BUDGET_MULTIPLES = (0.25, 1.0, 4.0, 16.0)
NO_VALUE = (
    "no value per metric point configured (planning.value_per_metric_point): no choice is made; "
    "the frontier and each size's break-even value per point are reported"
)
SCOPES = {True: "data+train+inference", False: "data+train"}


@dataclass
class Plan:
    """What :func:`make_plan` found: the table's rows, and the curves the figures draw."""

    rows: list[dict[str, Any]]
    curves: pd.DataFrame  # budget curves of every group
    frontiers: pd.DataFrame  # ROI frontiers of every group and law
    settings: PlanSettings  # resolved (budgets filled in)
    sizes: np.ndarray  # candidate sizes
    configured: dict[str, float]  # configured model -> size
    size_label: str


def _missing(kind: str, keys: dict[str, Any], law: str, status: str, reason: str) -> dict[str, Any]:
    return {"kind": kind, **keys, "law": law, "status": status, "reason": reason}


def make_plan(
    metrics: pd.DataFrame,
    fits: pd.DataFrame,
    models: list[dict[str, Any]],
    profiles: list[CostProfile],
    settings: PlanSettings,
    fitting: FitSettings,
    device_kind: str,
    rerank_depth: int,
    stats: RunStats,
) -> Plan:
    """Profile rows, then per fitted group: optimal size per budget (eq. 11) and ROI choice (eqs. 5-6)."""
    column = size_column(fitting.size_axis)
    price = settings.gpu_hour_price if device_kind == "cuda" else settings.cpu_hour_price
    pairs = settings.inference_queries * (settings.candidates_per_query or rerank_depth)
    points = size_points(models, profiles, metrics, column, settings.nominal_flops_per_second)
    rows: list[dict[str, Any]] = []
    for profile in profiles:
        rows.append(
            {
                "kind": "profile",
                "model": profile.model,
                "status": "cached" if profile.cached else "measured",
                "size": model_size(profile, fitting.size_axis),
                "device": profile.device,
                "precision": f"train {profile.train_precision}, "
                f"inference {profile.infer_precision} ({profile.infer_path})",
                "currency": settings.currency,
                "train_seconds_per_example": profile.train_seconds_per_example,
                "infer_seconds_per_pair": profile.infer_seconds_per_pair,
                "train_flops": profile.train_flops_analytic / profile.batch,
                "infer_flops": profile.infer_flops_analytic / profile.batch,
                "train_flops_per_second": profile.train_flops_per_second,
                "infer_flops_per_second": profile.infer_flops_per_second,
                "flops_analytic_over_counted": profile.train_flops_analytic
                / max(profile.train_flops_measured, 1),
                "peak_memory_mb": profile.peak_memory_mb,
                "cost_per_1k_examples": 1000 * profile.train_seconds_per_example / 3600 * price,
                "cost_per_1k_pairs": 1000 * profile.infer_seconds_per_pair / 3600 * price,
                "cached": profile.cached,
            }
        )
    empty = Plan(rows, pd.DataFrame(), pd.DataFrame(), settings, np.array([]), {}, column)
    if not points:
        rows.append(_missing("budget", {}, ADDITIVE, "failed", "no model size could be profiled or found"))
        return empty
    configured = {p.name: p.size for p in points}
    lo, hi = settings.size_range or (min(configured.values()) / 4, max(configured.values()) * 32)
    sizes = np.geomspace(lo, hi, settings.size_count)
    d_roi = settings.training_examples or stats.max_examples
    # Reference run of the default budgets: the largest configured size (kept inside the candidate
    # range) trained on D and served, with full attention.
    reference_cost = cost_model(points, "full", stats.default_tokens, settings, price, pairs)
    n_ref = float(np.clip(max(configured.values()), lo, hi))
    z_ref = float(reference_cost.total(n_ref, d_roi, inference=True))
    budgets = settings.budgets or tuple(round(float(z_ref * m), 6) for m in BUDGET_MULTIPLES)
    settings = replace(settings, budgets=tuple(budgets), training_examples=d_roi)

    joint = joint_fits(fits)
    fitted = fit_points(metrics, fitting)
    groups = joint[GROUP_KEYS].drop_duplicates().to_dict("records")
    if not groups:
        none = "no joint-protocol fit in fits.parquet"
        rows.append(_missing("budget", {}, ADDITIVE, "missing", none))
        rows += [
            undecided({"law": ADDITIVE, "question": "budget", "budget": b}, none) for b in settings.budgets
        ]
    curves, frontiers = [], []
    for keys in groups:
        mask = np.ones(len(joint), dtype=bool)
        for key, value in keys.items():
            mask &= (joint[key] == value).to_numpy()
        group = joint[mask]
        cost = cost_model(
            points,
            keys["attention"],
            stats.tokens(keys["objective"], keys["attention"]),
            settings,
            price,
            pairs,
        )
        cost = replace(cost, z_data=data_price(settings, metrics, keys["annotations"], keys["objective"]))
        additive = group[group["law"] == ADDITIVE]
        unusable = unusable_fit(additive, ADDITIVE)
        reference = reference_metric(metrics, keys["metric"], keys["split"], settings.value_reference)
        if unusable is not None:
            rows.append(_missing("budget", keys, ADDITIVE, *unusable))
            for budget in settings.budgets:
                base = {**keys, "law": ADDITIVE, "question": "budget", "budget": budget}
                rows.append(undecided(base, f"no usable additive joint fit ({unusable[1]})"))
        else:
            group_points = fitted.get(tuple(keys.values()))
            forecast = fit_forecast(additive.iloc[0], stats, fitting, group_points)
            note = _fit_note(additive.iloc[0])
            forms = form_mixture(group, forecast, stats, fitting, group_points)
            mixed = f"draws of {' + '.join(forms.names)}" if len(forms.names) > 1 else ""
            decided = "; ".join(filter(None, [note, mixed]))
            for budget in settings.budgets:
                base = {**keys, "law": ADDITIVE, "currency": settings.currency}
                rows += budget_decision(base, forms, cost, budget, configured, settings, reference, decided)
            for inference in (True, False):
                for budget in settings.budgets:
                    allocation = optimal_allocation(forecast, cost, budget, (lo, hi), inference)
                    row = {
                        "kind": "budget",
                        **keys,
                        "law": ADDITIVE,
                        "status": allocation.status,
                        "reason": "; ".join(filter(None, [allocation.reason, note])),
                        "budget": budget,
                        "cost_scope": SCOPES[inference],
                        "size": allocation.size,
                        "examples": allocation.examples,
                        "steps": allocation.examples / forecast.examples_per_step,
                        "predicted": allocation.predicted,
                        "at_boundary": allocation.at_boundary,
                        "currency": settings.currency,
                    }
                    if allocation.status == "ok":
                        row.update(
                            cost.breakdown(allocation.size, allocation.examples, inference).iloc[0].to_dict()
                        )
                    rows.append(row)
                    curve = budget_curve(forecast, cost, budget, sizes, inference)
                    curves.append(curve.assign(**keys, budget=budget, inference=inference))
        rows += _roi_rows(
            keys, group, fitted, reference, settings, stats, fitting, cost, sizes, configured, frontiers
        )
    return Plan(
        rows,
        pd.concat(curves, ignore_index=True) if curves else pd.DataFrame(),
        pd.concat(frontiers, ignore_index=True) if frontiers else pd.DataFrame(),
        settings,
        sizes,
        configured,
        column,
    )


def _fit_note(fit: pd.Series) -> str:
    """What a degenerate fit's rows say: the parameters are not identified, the forecast is used
    through its draws."""
    if fit["status"] != "degenerate":
        return ""
    return "fit degenerate (parameters not identified, fits.parquet says which): judged on its forecast draws"


def _roi_rows(
    keys: dict[str, Any],
    group: pd.DataFrame,
    fitted: dict[tuple[Any, ...], pd.DataFrame],
    reference: float,
    settings: PlanSettings,
    stats: RunStats,
    fitting: FitSettings,
    cost: CostModel,
    sizes: np.ndarray,
    configured: dict[str, float],
    frontiers: list[pd.DataFrame],
) -> list[dict[str, Any]]:
    """ROI-constrained choice (Scaling Laws for Online Advertisement Retrieval eqs. 5-6) with the additive law
    and the BNSL over FLOPs (eq. 4)."""
    rows = []
    d = float(settings.training_examples)
    names = [ADDITIVE] + sorted(n for n in group["law"].unique() if is_bnsl(str(n)))
    if len(names) == 1:
        names.append(bnsl_name(fitting.bnsl_breaks))
    value_per_point = settings.value_per_metric_point
    for name in names:
        fit = group[group["law"] == name]
        base = {"kind": "roi", **keys, "law": name, "roi_lambda": settings.roi_lambda, "examples": d}
        unusable = unusable_fit(fit, name)
        if unusable is not None:
            rows.append({**base, "status": unusable[0], "reason": unusable[1]})
            continue
        forecast = fit_forecast(fit.iloc[0], stats, fitting, fitted.get(tuple(keys.values())))
        if value_per_point is None:
            frontier = roi_frontier(forecast, cost, sizes, d, np.nan, reference, settings.roi_lambda)
            frontiers.append(frontier.assign(**keys, law=name, reference=reference))
            rows.append({**base, "status": "no_choice", "reason": NO_VALUE, "currency": settings.currency})
            at_sizes = roi_frontier(
                forecast, cost, np.array(list(configured.values())), d, np.nan, reference, settings.roi_lambda
            )
            for model, (_, point) in zip(configured, at_sizes.iterrows(), strict=True):
                fields = ("size", "predicted", "break_even_value_per_point", *COST_FIELDS)
                rows.append(
                    {
                        **base,
                        "kind": "frontier",
                        "model": model,
                        "status": "ok",
                        "currency": settings.currency,
                        "value_reference": reference,
                    }
                    | {k: point[k] for k in fields}
                    | {"extrapolation": float(forecast.extrapolation(point["size"], d))}
                )
            continue
        frontier = roi_frontier(forecast, cost, sizes, d, value_per_point, reference, settings.roi_lambda)
        frontiers.append(frontier.assign(**keys, law=name, reference=reference))
        choice = roi_choice(frontier, forecast.sign)
        base.update(value_per_point=value_per_point, currency=settings.currency, cost_scope=SCOPES[True])
        note = _fit_note(fit.iloc[0])
        rows += roi_decision(
            {**keys, "law": name, "roi_lambda": settings.roi_lambda, "value_per_point": value_per_point},
            forecast,
            cost,
            d,
            configured,
            settings,
            reference,
            note,
        )
        if choice is None:
            best = frontier["roi"].max()
            rows.append({**base, "status": "infeasible", "reason": f"best ROI {best:.3g} < lambda in range"})
            continue
        chosen = {k: choice[k] for k in ("size", "predicted", "value", "roi", *COST_FIELDS)}
        rows.append(
            {
                **base,
                **chosen,
                "status": "ok",
                "steps": d / forecast.examples_per_step,
                "at_boundary": bool(choice["size"] in (sizes[0], sizes[-1])),
            }
        )
    return rows
