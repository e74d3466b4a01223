"""Column contracts of the tables that cross stage boundaries.

The merged metrics table (``results/metrics/all.parquet``) is long: one row per
(run, checkpoint, split, metric). The law-fitting stage needs nothing else.
"""

from __future__ import annotations

#: Columns of the long metrics table, in order.
METRIC_COLUMNS: tuple[str, ...] = (
    "run",  # "<model>__<objective>__<attention>__s<seed>"; "bm25" for the first stage
    "model",  # size name from the config, e.g. "L2"; "bm25" for the baseline rows
    "family",  # "ladder" | "scratch" | "hf" | "bm25"
    "role",  # "fit" | "held_out" (which sizes the model-scaling protocol fits on); "baseline" for BM25
    "params",  # total parameters
    "non_embedding_params",  # parameters outside the token/position/type embeddings (Kaplan et al. 2020)
    "layers",
    "hidden",
    "objective",  # "pointwise" | "pairwise" | "listwise" | "bm25"
    "attention",  # "full" | "window<w>" | "bm25"
    "seed",
    "checkpoint",  # index 1..K along the epoch (0 = untrained start, not evaluated by default)
    "step",  # optimizer steps taken
    "examples",  # training examples (query-document pairs) seen
    "tokens",  # training tokens seen (non-padding)
    "flops",  # training FLOPs ~= 6 * non_embedding_params * tokens
    "split",  # evaluation split, e.g. "dev", "test", "dl19"
    "queries",  # queries the value averages over (fewer than the split's with evaluation.max_queries)
    "metric",  # "nDCG@10", "AP", "RR@10", "R@10", "P@10", "CE@64", "RBP@k", "RRstar@m"
    "value",
)


def metric_direction(metric: str) -> int:
    """Return +1 when larger values of ``metric`` are better, -1 for losses (contrastive entropy)."""
    return -1 if metric.startswith("CE@") else 1
