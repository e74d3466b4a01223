"""Z_data of Fang et al., Scaling Laws for Dense Retrieval eq. 11 per annotation source: a judged (query,
passage) pair has a price (``planning.annotation_cost_per_pair``, e.g. {human: 0.6, ict: 0.0}: about $0.6 a
human judgement, ICT pseudo-labels free), and the budget's D counts training examples, so a source's price per
example is its price per pair times the pairs behind each example its runs saw (the metrics table's
``annotated_pairs / examples`` at each run's end: fewer than one with BM25 negatives in a group, and
over more than one pass). A source without a price keeps ``planning.z_data``.
"""

from __future__ import annotations

import pandas as pd

from rerank_scaling.planning.plan_settings import PlanSettings


def pairs_per_example(metrics: pd.DataFrame, source: str, objective: str) -> float | None:
    """Median over runs of ``source`` and ``objective`` of annotated pairs / examples seen, at each
    run's final checkpoint; None without such a run."""
    if "annotated_pairs" not in metrics.columns:
        return None
    rows = metrics[
        (metrics["annotations"] == source) & (metrics["objective"] == objective) & (metrics["examples"] > 0)
    ]
    ends = rows[rows["checkpoint"] == rows.groupby("run")["checkpoint"].transform("max")]
    ends = ends.drop_duplicates("run")
    if ends.empty:
        return None
    return float((ends["annotated_pairs"] / ends["examples"]).median())


def data_price(settings: PlanSettings, metrics: pd.DataFrame, source: str, objective: str) -> float:
    """Z_data, per training example, of the runs trained on ``source`` annotations with ``objective``."""
    prices = settings.annotation_cost_per_pair or {}
    ratio = pairs_per_example(metrics, source, objective) if source in prices else None
    return settings.z_data if ratio is None else prices[source] * ratio
