"""The plan as a table (plan.parquet's typed columns) and as Markdown (plan.md)."""

from __future__ import annotations

from typing import Any

import pandas as pd

from rerank_scaling.laws.protocols import GROUP_KEYS
from rerank_scaling.planning.cost_model import COST_FIELDS
from rerank_scaling.planning.costs import CostProfile, flop_check
from rerank_scaling.planning.plan_settings import PlanSettings

PLAN_COLUMNS = [
    "kind",
    *GROUP_KEYS,
    "law",
    "model",
    "status",
    "reason",
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
    for column in ("at_boundary", "cached"):
        table[column] = table[column].astype("boolean")
    for column in (
        "kind",
        *GROUP_KEYS,
        "law",
        "model",
        "status",
        "reason",
        "cost_scope",
        "currency",
        "device",
        "precision",
    ):
        table[column] = table[column].astype("string")
    return table


def plan_markdown(table: pd.DataFrame, settings: PlanSettings, profiles: list[CostProfile]) -> str:
    """Three sections: cost profiles, budget allocation, ROI-constrained choice."""
    parts = ["# Planning: costs, budget allocation, ROI-constrained model choice", ""]
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
            "Budget allocation (seed 001 eq. 11)",
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
            f"ROI-constrained choice (seed 003 eqs. 5-6), lambda = {settings.roi_lambda}",
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
            "is made; a size is ROI-feasible for a value per point >= its break-even value",
            [
                *GROUP_KEYS[1:],
                "law",
                "model",
                "size",
                "predicted",
                "cost_total",
                "break_even_value_per_point",
            ],
        ),
    )
    for kind, title, columns in sections:
        if kind == "frontier" and not (table["kind"] == kind).any():
            continue
        rows = table[table["kind"] == kind][columns].dropna(axis=1, how="all")
        text = rows.select_dtypes(include=["string", "boolean"]).columns
        rows[text] = rows[text].astype(object).fillna("")
        parts += [
            f"## {title}",
            "",
            rows.to_markdown(index=False, floatfmt=".4g") if len(rows) else "(none)",
            "",
        ]
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
