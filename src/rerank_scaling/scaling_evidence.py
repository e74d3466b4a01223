"""Is there real scaling in a metrics table, or only noise? One row per objective (× attention).

For one metric and split, compares

* **training**: the metric at the first and at the final checkpoint, averaged over sizes;
* **size**: the largest size against the smallest at the final checkpoint (the first seed of each);
* **noise**: the spread between seeds of the same size at the final checkpoint (the sizes trained
  with ``training.extra_seeds``), the yardstick for the size gap;
* **BM25**: the largest size's final value against the first-stage ranking.

``real_scaling`` is true when training improves the metric and the size gap exceeds the seed
spread, in the metric's own direction (losses such as CE: lower is better).
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from rerank_scaling.records import metric_direction


def _final(rows: pd.DataFrame) -> pd.DataFrame:
    return rows[rows["step"] == rows.groupby("run")["step"].transform("max")]


def scaling_evidence(metrics: pd.DataFrame, metric: str = "nDCG@10", split: str = "dev") -> pd.DataFrame:
    """The evidence table described in the module docstring (empty when the table lacks the metric)."""
    sign = metric_direction(metric)
    selected = metrics[(metrics["metric"] == metric) & (metrics["split"] == split)]
    bm25 = selected.loc[selected["family"] == "bm25", "value"]
    trained = selected[selected["family"] != "bm25"]
    rows = []
    for (objective, attention), group in trained.groupby(["objective", "attention"]):
        first_seed = group[group["seed"] == group.groupby("model")["seed"].transform("min")]
        first_checkpoint = first_seed.groupby("run")["checkpoint"].transform("min")
        start = first_seed[first_seed["checkpoint"] == first_checkpoint]
        final = _final(first_seed)
        by_size = final.groupby("non_embedding_params")["value"].mean().sort_index()
        seeds = _final(group).groupby("model")["value"]
        spread = (seeds.max() - seeds.min())[seeds.count() > 1]
        size_gap = sign * (by_size.iloc[-1] - by_size.iloc[0]) if len(by_size) > 1 else np.nan
        training_gain = sign * (final["value"].mean() - start["value"].mean())
        seed_spread = float(spread.max()) if len(spread) else np.nan
        noise = 0.0 if np.isnan(seed_spread) else seed_spread
        rows.append(
            {
                "objective": objective,
                "attention": attention,
                "metric": metric,
                "split": split,
                "first_checkpoint": start["value"].mean(),
                "final_checkpoint": final["value"].mean(),
                "training_gain": training_gain,
                "smallest_final": by_size.iloc[0],
                "largest_final": by_size.iloc[-1],
                "size_gap": size_gap,
                "seed_spread": seed_spread,
                "bm25": float(bm25.iloc[0]) if len(bm25) else np.nan,
                "largest_beats_bm25": bool(len(bm25)) and sign * (by_size.iloc[-1] - bm25.iloc[0]) > 0,
                "real_scaling": bool(training_gain > 0 and size_gap > noise),
            }
        )
    return pd.DataFrame(rows)
