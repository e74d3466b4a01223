"""Column contracts of the tables that cross stage boundaries.

The merged metrics table (``results/metrics/all.parquet``) is long: one row per
(run, checkpoint, split, metric). The law-fitting stage needs nothing else.
"""

from __future__ import annotations

#: Columns of the long metrics table, in order.
METRIC_COLUMNS: tuple[str, ...] = (
    "run",  # "<model>__<objective>__<attention>__s<seed>[__d<fraction>][__<source>]"; "bm25" for BM25
    "model",  # size name from the config, e.g. "L2"; "bm25" for the baseline rows
    "family",  # "ladder" | "scratch" | "hf" | "bm25"
    "model_commit",  # the hub snapshot's commit the run started from (models.lock.yaml); null: not pinned
    "role",  # "fit" | "held_out" (which sizes the model-scaling protocol fits on); "baseline" for BM25
    "params",  # total parameters
    "non_embedding_params",  # parameters outside the token/position/type embeddings (Kaplan et al. 2020)
    "layers",
    "hidden",
    "objective",  # "pointwise" | "pairwise" | "listwise" | "bm25"
    "attention",  # "full" | "window<w>" | "bm25"
    "seed",
    "annotations",  # the source of the training annotations (grid.ANNOTATIONS); "none" for BM25
    "data_fraction",  # of the training queries the run trained on (training.data_fractions); 0 for BM25
    "annotated_pairs",  # judged (query, relevant passage) pairs in the run's training subset; 0 for BM25
    "checkpoint",  # index 1..K along the epoch (0 = untrained start, not evaluated by default)
    "step",  # optimizer steps taken
    "examples",  # training examples (query-document pairs) seen
    "tokens",  # training tokens seen (non-padding)
    "flops",  # training FLOPs ~= 6 * non_embedding_params * tokens
    "train_precision",  # what training computed in: "fp32" | "bf16" | "fp16" (precision.resolve_precision)
    "precision",  # what the scores were computed in: "fp32" | "bf16" | "fp16"; "none" for BM25
    "split",  # evaluation split, e.g. "dev", "test", "dl19"
    "queries",  # queries the value averages over (fewer than the split's with evaluation.max_queries)
    "metric",  # "nDCG@10", "AP", "RR@10", "R@10", "P@10", "CE@64", "RelP@k", "RRstar@m" (measures)
    "value",
)


#: Columns of the per-query tables (``results/eval/<run>/per_query.parquet``: every checkpoint;
#: ``results/metrics/per_query.parquet``: each run's first and final checkpoint): the value of every
#: metric per query, from which the long table's value is the n-weighted mean (``metrics.aggregate``).
#: The noise yardsticks of the summary (paired bootstrap over queries) are computed from it.
PER_QUERY_COLUMNS: tuple[str, ...] = (
    "run",
    "checkpoint",
    "split",
    "metric",
    "qid",
    "value",  # the query's score (CE: mean over its instances; CE@n_dropped: 1 if dropped)
    "n",  # its weight in the mean: 1, or its instances (CE, RelP)
)
