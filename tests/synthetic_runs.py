"""Synthetic runs shared by tests of several stages: a metrics table from the additive law, a
scratch model entry, a cost model and forecast, and joint-fit rows with bootstrap draws."""

from __future__ import annotations

import json

import numpy as np
import pandas as pd

from rerank_scaling.laws import forms as laws
from rerank_scaling.laws.synthetic import synthetic_metrics_table as synthetic_table
from rerank_scaling.planning.cost_model import CostModel, PowerLaw
from rerank_scaling.planning.forecast import MetricForecast


def synthetic_metrics_table(noise: float = 0.002) -> pd.DataFrame:
    """A long metrics table from the additive law: 5 sizes (2 held out), 15 checkpoints, 2 splits."""
    sizes = {
        "s1": (2e6, 12e6, "fit"),
        "s2": (4e6, 14e6, "fit"),
        "s3": (8e6, 18e6, "fit"),
        "s4": (16e6, 26e6, "held_out"),
        "s5": (32e6, 42e6, "held_out"),
    }
    return synthetic_table(sizes, checkpoint_sigma=noise)


SCRATCH = {
    "name": "tiny",
    "family": "scratch",
    "layers": 2,
    "hidden": 64,
    "heads": 2,
    "intermediate": 256,
    "vocab_size": 300,
    "role": "fit",
}
ADDITIVE = np.array([0.7, 0.2, 0.5, 0.05, 0.4])  # a, b, alpha, c, beta of M = a - b N^-alpha - c S^-beta


def synthetic_costs(z_data: float = 1e-4, pairs: float = 1e6) -> CostModel:
    """Training FLOPs ~ N^1.05, inference ~ N, achieved FLOP/s growing slowly with N."""
    return CostModel(
        train_flops=PowerLaw(6e8, 1.05),
        infer_flops=PowerLaw(2e8, 1.0),
        train_rate=PowerLaw(2e10, 0.1),
        infer_rate=PowerLaw(4e10, 0.1),
        price_per_hour=2.0,
        z_data=z_data,
        pairs_served=pairs,
    )


def synthetic_forecast() -> MetricForecast:
    return MetricForecast(
        laws.additive_law(+1), ADDITIVE, +1, examples_per_step=16.0, tokens_per_example=60.0
    )


def joint_fit_rows(status: dict[str, tuple[str, str]], validated_ratio: float = 2.0) -> pd.DataFrame:
    """Joint additive fits of dev nDCG@10 per objective (the synthetic table's law), with given
    (status, reason) per objective, 200 bootstrap draws around the truth and a validated ratio;
    protocol "joint" as :func:`planning.forecast.joint_fits` selects it."""
    params = json.dumps(dict(zip(laws.additive_law(+1).params, ADDITIVE.tolist(), strict=True)))
    draws = ADDITIVE * np.exp(np.random.default_rng(0).normal(0, 0.02, (200, len(ADDITIVE))))
    rows = [
        {"family": "ladder", "objective": objective, "attention": "full", "metric": "nDCG@10", "split": "dev"}
        | {
            "annotations": "human",
            "protocol": "joint",
            "law": "additive",
            "status": st,
            "reason": reason,
            "params": params,
        }
        | {"params_draws": json.dumps(draws.tolist()), "validated_ratio": validated_ratio}
        for objective, (st, reason) in status.items()
    ]
    return pd.DataFrame(rows)
