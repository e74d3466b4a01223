"""Synthetic metrics tables from a known law, with the noise structure of real runs.

Used by the tests (known truth for recovery and coverage) and by the fitting benchmark (a table the
size of the default's). Rows have the columns of ``results/<run>/metrics/all.parquet``
(:data:`rerank_scaling.records.METRIC_COLUMNS`). Every run (model x objective x seed) gets one
offset per (split, metric), drawn once, N(0, ``run_sigma``), shared by all its checkpoints; every
checkpoint gets its own N(0, ``checkpoint_sigma``): the dependence between checkpoints of one run
that an i.i.d. analysis ignores. nDCG@10 follows the additive joint law (Scaling Laws for Cross-Encoder
Reranking eq. 3); CE@16 is a decreasing affine map of it, kept inside [0, ln 16].
"""

from __future__ import annotations

from collections.abc import Mapping

import numpy as np
import pandas as pd

from rerank_scaling.laws import forms as laws
from rerank_scaling.records import METRIC_COLUMNS

#: Truth of the additive law a, b, alpha, c, beta on the law's scale (N in millions, S in thousands).
TRUTH = (0.7, 0.2, 0.5, 0.05, 0.4)
#: name -> (non-embedding params, total params, role)
SIZES: dict[str, tuple[float, float, str]] = {
    "s1": (2e6, 12e6, "fit"),
    "s2": (4e6, 14e6, "fit"),
    "s3": (8e6, 18e6, "fit"),
    "s4": (16e6, 26e6, "held_out"),
}


def synthetic_metrics_table(
    sizes: Mapping[str, tuple[float, float, str]] = SIZES,
    objectives: tuple[str, ...] = ("pointwise", "listwise"),
    checkpoints: int = 15,
    splits: tuple[str, ...] = ("dev", "test"),
    metrics: tuple[str, ...] = ("nDCG@10", "CE@16"),
    seeds: Mapping[str, int] | None = None,
    run_sigma: float = 0.0,
    checkpoint_sigma: float = 0.002,
    truth: tuple[float, ...] = TRUTH,
    steps: tuple[float, float] = (10.0, 1000.0),
    random_state: int = 5,
) -> pd.DataFrame:
    """A long metrics table; ``seeds`` maps a model to its number of seeds (default 1)."""
    rng = np.random.default_rng(random_state)
    law = laws.additive_law(+1)
    step_values = np.geomspace(*steps, checkpoints).round()
    rows = []
    for objective in objectives:
        for model, (size, total, role) in sizes.items():
            for seed in range(1, (seeds or {}).get(model, 1) + 1):
                clean = law.predict(
                    np.array(truth), {"N": np.full(checkpoints, size / 1e6), "S": step_values / 1e3}
                )
                for split in splits:
                    for metric in metrics:
                        value = (
                            clean + rng.normal(0, run_sigma) + rng.normal(0, checkpoint_sigma, checkpoints)
                        )
                        if metric.startswith("CE@"):
                            value = np.clip(3.0 - 2.0 * value, 0.0, np.log(16))
                        for k, (step, v) in enumerate(zip(step_values, value, strict=True), 1):
                            rows.append(
                                {
                                    "run": f"{model}__{objective}__full__s{seed}",
                                    "model": model,
                                    "family": "ladder",
                                    "role": role,
                                    "params": total,
                                    "non_embedding_params": size,
                                    "layers": 1,
                                    "hidden": 8,
                                    "objective": objective,
                                    "attention": "full",
                                    "seed": seed,
                                    "checkpoint": k,
                                    "step": step,
                                    "examples": step * 16,
                                    "tokens": step * 1000,
                                    "flops": 6 * size * step * 1000,
                                    "split": split,
                                    "metric": metric,
                                    "value": v,
                                }
                            )
    return pd.DataFrame(rows, columns=list(METRIC_COLUMNS))
