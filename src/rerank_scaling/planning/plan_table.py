"""The plan as a table (plan.parquet's typed columns), as Markdown (plan.md: the verdicts first,
then the candidates' numbers, then the profiles and optima) and its decisions (decisions.csv)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rerank_scaling.laws.fit_settings import GROUP_KEYS
from rerank_scaling.planning.cost_model import COST_FIELDS
from rerank_scaling.planning.measured_profiles import CostProfile, flop_check
from rerank_scaling.planning.objective_verdicts import objective_verdicts
from rerank_scaling.planning.plan_settings import PlanSettings

#: decisions.csv: one line per group x question x law, the budgets folded
#: (:mod:`.objective_verdicts`; the report's landing page reads these names).
DECISION_COLUMNS = [
    "objective",
    "metric",
    "budget",
    "verdict",
    "candidate",
    "p_best",
    "expected_regret",
    "p_roi",
    "reason",
    "family",
    "attention",
    "split",
    "question",
    "law",
    "validated_ratio",
    "extrapolated",
]

PLAN_COLUMNS = [
    "kind",
    *GROUP_KEYS,
    "law",
    "question",
    "model",
    "status",
    "verdict",
    "candidate",
    "p_best",
    "expected_regret",
    "p_roi",
    "reason",
    "extrapolated",
    "extrapolation",
    "validated_ratio",
    "low",
    "high",
    "budget",
    "cost_scope",
    "roi_lambda",
    "value_per_point",
    "value_reference",
    "size",
    "examples",
    "steps",
    "predicted",
    "value",
    "roi",
    "break_even_value_per_point",
    *COST_FIELDS,
    "at_boundary",
    "currency",
    "device",
    "precision",
    "train_seconds_per_example",
    "infer_seconds_per_pair",
    "train_flops_per_second",
    "infer_flops_per_second",
    "flops_analytic_over_counted",
    "peak_memory_mb",
    "cost_per_1k_examples",
    "cost_per_1k_pairs",
    "cached",
]


def plan_table(rows: list[dict[str, Any]]) -> pd.DataFrame:
    table = pd.DataFrame(rows).reindex(columns=PLAN_COLUMNS)
    for column in ("at_boundary", "cached", "extrapolated"):
        table[column] = table[column].astype("boolean")
    for column in (
        "kind",
        *GROUP_KEYS,
        "law",
        "question",
        "model",
        "status",
        "verdict",
        "candidate",
        "reason",
        "cost_scope",
        "currency",
        "device",
        "precision",
    ):
        table[column] = table[column].astype("string")
    return table


def budget_decisions(table: pd.DataFrame) -> pd.DataFrame:
    """The plan's ``decision`` rows, one per group x question x budget, budget questions first."""
    rows = table[table["kind"] == "decision"].reindex(columns=DECISION_COLUMNS)
    order = rows["question"].map({"budget": 0, "roi": 1})
    return (
        rows.assign(_order=order).sort_values(["_order", *GROUP_KEYS[1:4], "budget"]).drop(columns="_order")
    )


def decisions_table(table: pd.DataFrame) -> pd.DataFrame:
    """decisions.csv: one line per objective (group) x question x law, the budgets folded."""
    return objective_verdicts(budget_decisions(table))


def _section(title: str, rows: pd.DataFrame) -> list[str]:
    rows = rows.dropna(axis=1, how="all").copy()
    text = rows.select_dtypes(include=["string", "boolean", "object"]).columns
    rows[text] = rows[text].astype(object).fillna("")
    return [f"## {title}", "", rows.to_markdown(index=False, floatfmt=".4g") if len(rows) else "(none)", ""]


def decision_markdown(table: pd.DataFrame, settings: PlanSettings) -> list[str]:
    """The answer first: one verdict per objective, then per budget, then every candidate's numbers."""
    columns = ["objective", "metric", "split", "question", "law", "budgets", "verdict", "p_best"]
    columns += ["expected_regret", "p_roi", "extrapolated", "reason"]
    intro = (
        f"Verdicts over the fit's bootstrap draws: `train <candidate>` when its P(best) >= "
        f"{settings.decision_p_best} (`planning.decision_p_best`); below it `prefer <candidate>` when the "
        "draws still rank it first beyond their Monte Carlo noise, else `cannot decide` with the numbers; "
        f"P(ROI >= lambda = {settings.roi_lambda}) where a value per metric point is configured. Candidates "
        "beyond the validated extrapolation ratio are compared on the law's extrapolated draws and "
        "flagged (`extrapolated`, status `beyond_validated_range`)."
    )
    per_budget = budget_decisions(table)
    per_budget = per_budget[per_budget["question"] == "budget"]
    candidates = table[table["kind"] == "candidate"]
    fields = ["objective", "metric", "question", "law", "budget", "model", "status", "size", "examples"]
    fields += ["extrapolation", "predicted", "low", "high", "p_best", "expected_regret", "p_roi"]
    return [
        *_section("Decisions, one line per objective", decisions_table(table)[columns]),
        intro,
        "",
        *_section("Decisions per budget", per_budget[[c for c in columns if c != "budgets"] + ["budget"]]),
        *_section("Candidates: P(best), expected regret, P(ROI >= lambda)", candidates[fields]),
    ]


def plan_markdown(table: pd.DataFrame, settings: PlanSettings, profiles: list[CostProfile]) -> str:
    """The decisions first, then cost profiles, budget allocation, ROI-constrained choice."""
    parts = ["# Planning: which model to train, and how sure that is", ""]
    parts += decision_markdown(table, settings)
    sections = (
        (
            "profile",
            "Measured cost profiles",
            [
                "model",
                "status",
                "size",
                "device",
                "precision",
                "train_seconds_per_example",
                "infer_seconds_per_pair",
                "train_flops_per_second",
                "flops_analytic_over_counted",
                "peak_memory_mb",
                "cost_per_1k_examples",
                "cost_per_1k_pairs",
            ],
        ),
        (
            "budget",
            "Budget allocation, point optimum of the central fit (Fang et al., Scaling Laws for Dense "
            "Retrieval, eq. 11, generalised: Z_train D f(N) for Z_train N; planning/budget.py)",
            [
                *GROUP_KEYS[1:],
                "status",
                "budget",
                "cost_scope",
                "size",
                "examples",
                "predicted",
                "cost_data",
                "cost_train",
                "cost_infer",
                "at_boundary",
                "reason",
            ],
        ),
        (
            "roi",
            f"ROI-constrained choice (Scaling Laws for Online Advertisement Retrieval, eqs. 5-6), "
            f"lambda = {settings.roi_lambda}",
            [
                *GROUP_KEYS[1:],
                "law",
                "status",
                "size",
                "predicted",
                "value",
                "cost_total",
                "roi",
                "value_per_point",
                "reason",
            ],
        ),
        (
            "frontier",
            "ROI frontier at the configured sizes: no value per metric point configured, so no choice "
            "is made; a size is ROI-feasible for a value per point >= its break-even value (none beyond "
            "the validated range)",
            [
                *GROUP_KEYS[1:],
                "law",
                "model",
                "size",
                "extrapolation",
                "predicted",
                "cost_total",
                "break_even_value_per_point",
            ],
        ),
    )
    for kind, title, columns in sections:
        if kind == "frontier" and not (table["kind"] == kind).any():
            continue
        parts += _section(title, table[table["kind"] == kind][columns])
    parts += [
        "## FLOPs check (analytic vs torch.utils.flop_counter)",
        "",
        *[f"- {flop_check(p)}" for p in profiles],
        "",
    ]
    parts += [
        "## Settings",
        "",
        f"Currency {settings.currency}; budgets {list(settings.budgets or [])}; training examples (ROI) "
        f"{settings.training_examples:.4g}; queries served {settings.inference_queries:.4g}; "
        f"profiles: {len(profiles)} ({sum(p.cached for p in profiles)} from the cache).",
        "",
    ]
    return "\n".join(parts)
