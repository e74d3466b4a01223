"""The summary's scaling-evidence table: training gain, size gap against seed spread, BM25."""

from __future__ import annotations

import pandas as pd
import pytest
from test_laws import synthetic_metrics_table

from rerank_scaling.scaling_evidence import scaling_evidence


def with_second_seed(table: pd.DataFrame, model: str, shift: float) -> pd.DataFrame:
    """Add a second seed of ``model`` whose values are ``shift`` higher (losses: lower)."""
    extra = table[table["model"] == model].copy()
    extra["seed"] = 2
    extra["run"] = extra["run"].str.replace("__s1", "__s2")
    extra["value"] += [shift if m.startswith("nDCG") else -shift for m in extra["metric"]]
    return pd.concat([table, extra], ignore_index=True)


def with_bm25(table: pd.DataFrame, value: float) -> pd.DataFrame:
    bm25 = table.iloc[:1].copy()
    bm25[["run", "model", "family", "objective", "attention"]] = "bm25"
    bm25[["split", "metric", "value"]] = ["dev", "nDCG@10", value]
    return pd.concat([table, bm25], ignore_index=True)


def test_a_size_gap_above_the_seed_spread_is_real_scaling():
    table = with_bm25(with_second_seed(synthetic_metrics_table(noise=0.0), "s1", 0.001), 0.3)
    evidence = scaling_evidence(table, "nDCG@10", "dev").set_index("objective")
    assert set(evidence.index) == {"pointwise", "listwise"}
    row = evidence.loc["pointwise"]
    assert row["training_gain"] > 0 and row["size_gap"] > 0.01
    assert row["seed_spread"] == pytest.approx(0.001)
    assert row["real_scaling"] and row["largest_beats_bm25"]


def test_a_seed_spread_larger_than_the_size_gap_is_not_scaling():
    table = with_bm25(with_second_seed(synthetic_metrics_table(noise=0.0), "s1", 0.5), 0.99)
    row = scaling_evidence(table, "nDCG@10", "dev").set_index("objective").loc["listwise"]
    assert not row["real_scaling"] and not row["largest_beats_bm25"]


def test_losses_count_lower_as_better():
    table = with_second_seed(synthetic_metrics_table(noise=0.0), "s1", 0.001)
    row = scaling_evidence(table, "CE@16", "dev").iloc[0]
    assert row["size_gap"] > 0 and row["training_gain"] > 0 and row["real_scaling"]
