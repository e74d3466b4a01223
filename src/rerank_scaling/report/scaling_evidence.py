"""Is there real scaling in a metrics table, or only noise? One row per objective (× attention) and split.

For one metric and split, compares

* **training**: the metric at the first and at the final checkpoint, averaged over sizes (the
  first seed of each);
* **size**: the largest size against the smallest at the final checkpoint (the first seed of each);
* **BM25**: the largest size's final value against the first-stage ranking.

Every comparison carries its noise yardsticks, and its verdict is read against them:

* the **per-query standard error** of the difference, paired query by query: the SE of the mean
  per-query difference (:mod:`rerank_scaling.report.paired`), not the two runs' separate SEs, which
  count each query's difficulty twice. It is the noise of having judged these queries and not
  others; always computed when the per-query table is given;
* the **seed spread**: max - min over seeds of one size at the final checkpoint, the largest such
  range over the sizes trained with ``training.extra_seeds``: the noise of training one run and not
  another. It applies to comparisons between runs (size gap, vs BM25), not to one run's training
  gain, and only where there are seeds. ``seed_spread_se`` is the paired SE of that range (its two
  seeds compared query by query): a spread within 1.96 of them is per-query noise, not seed noise.

A verdict is ``yes`` when the difference, in the metric's own direction (losses such as CE: lower
is better), exceeds ``z`` standard errors (z = 1.96: a two-sided 5% test) and the seed spread where
there is one; ``worse`` when it lies below minus that yardstick (the other side of the same
two-sided test: the larger run, or the reranker, is worse beyond the noise); ``no`` when it lies
within; ``unknown`` when there is no per-query yardstick (no per-query table, or fewer than
:data:`~.paired.MIN_QUERIES` queries) -- never ``yes`` or ``worse`` without one. ``real_scaling`` is
``yes`` when both the training gain and the size gap are, ``no`` when either is not (``no`` or
``worse``), else ``unknown``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pandas as pd

from rerank_scaling.registries.measures import metric_direction
from rerank_scaling.report.paired import paired_standard_error

Term = tuple[str, int]  # (run, checkpoint)


@dataclass(frozen=True)
class QueryTable:
    """The per-query values of one metric and split, one column per (run, checkpoint).

    A run's metric at a checkpoint is M = sum_q n_q v_q / sum_q n_q over the per-query rows
    (``records.PER_QUERY_COLUMNS``; n = 1 for the trec measures). Every standard error is paired
    query by query (:func:`rerank_scaling.report.paired.paired_standard_error`).
    """

    weighted: pd.DataFrame  # qid x (run, checkpoint): n * value (0 where the query is absent)
    weights: pd.DataFrame  # qid x (run, checkpoint): n

    @classmethod
    def build(cls, per_query: pd.DataFrame, metric: str, split: str) -> QueryTable:
        rows = per_query[(per_query["metric"] == metric) & (per_query["split"] == split)]
        rows = rows.assign(weighted=rows["value"] * rows["n"])
        weighted = rows.pivot_table(
            index="qid", columns=["run", "checkpoint"], values="weighted", aggfunc="sum"
        )
        weights = rows.pivot_table(index="qid", columns=["run", "checkpoint"], values="n", aggfunc="sum")
        return cls(weighted.fillna(0.0), weights.fillna(0.0))

    @property
    def queries(self) -> int:
        return len(self.weighted)

    def standard_error(self, terms: dict[Term, float]) -> float:
        """Paired standard error of sum_j w_j M_j (``terms``: (run, checkpoint) -> w_j); NaN when
        a term has no per-query rows or there are fewer than :data:`~.paired.MIN_QUERIES` queries."""
        return paired_standard_error(self.weighted, self.weights, terms)


#: How the report words each verdict (summary.md's claims, the answer's comparison with the largest
#: fitted size).
VERDICT_WORDS = {
    "yes": "exceeds its noise",
    "no": "within its noise",
    "worse": "below, beyond its noise",
    "unknown": "unknown (no yardstick)",
}


def verdict(
    difference: float, standard_error: float, seed_spread: float = float("nan"), z: float = 1.96
) -> str:
    """``yes`` / ``worse`` / ``no`` / ``unknown``: does ``difference`` (larger is better) exceed its
    yardstick, fall below minus it, or lie within?"""
    if not np.isfinite(difference) or not np.isfinite(standard_error):
        return "unknown"
    noise = max(z * standard_error, seed_spread if np.isfinite(seed_spread) else 0.0)
    if difference > noise:
        return "yes"
    return "worse" if difference < -noise else "no"


def both(first: str, second: str) -> str:
    """Conjunction of two verdicts: ``no`` if either is not (``no`` or ``worse``), ``yes`` if both
    are, else ``unknown``."""
    if {"no", "worse"} & {first, second}:
        return "no"
    return "yes" if first == second == "yes" else "unknown"


def _terms(rows: pd.DataFrame, weight: float) -> dict[Term, float]:
    """Standard-error terms: each row's (run, checkpoint) with ``weight``."""
    return {(r["run"], int(r["checkpoint"])): weight for _, r in rows.iterrows()}


def final_rows(rows: pd.DataFrame) -> pd.DataFrame:
    """Each run's rows at its final checkpoint (its largest step)."""
    return rows[rows["step"] == rows.groupby("run")["step"].transform("max")]


def _seed_spread(
    finals: pd.DataFrame, se: Callable[[dict[Term, float]], float]
) -> tuple[float, float, pd.Series]:
    """(largest max - min over seeds of one size, the paired SE of that size's best minus worst
    seed, every size's range); NaN without seeds."""
    seeds = finals.groupby("model")["value"]
    spread = (seeds.max() - seeds.min())[seeds.count() > 1]
    if not len(spread):
        return np.nan, np.nan, spread
    runs = finals[finals["model"] == spread.idxmax()].sort_values("value")
    return float(spread.max()), se(_terms(runs.iloc[[-1]], 1.0) | _terms(runs.iloc[[0]], -1.0)), spread


def _evidence_rows(
    selected: pd.DataFrame, queries: QueryTable | None, metric: str, split: str, z: float
) -> list[dict[str, object]]:
    sign = metric_direction(metric)
    bm25 = selected[selected["family"] == "bm25"]
    trained = selected[selected["family"] != "bm25"]

    def se(terms: dict[Term, float]) -> float:
        return queries.standard_error(terms) if queries is not None else float("nan")

    rows = []
    for (objective, attention), group in trained.groupby(["objective", "attention"]):
        first_seed = group[group["seed"] == group.groupby("model")["seed"].transform("min")]
        first_checkpoint = first_seed.groupby("run")["checkpoint"].transform("min")
        start = first_seed[first_seed["checkpoint"] == first_checkpoint]
        final = final_rows(first_seed)
        by_size = final.sort_values("non_embedding_params", kind="stable")
        smallest, largest = by_size.iloc[0], by_size.iloc[-1]
        seed_spread, seed_spread_se, spread = _seed_spread(final_rows(group), se)
        # Training gain: mean over sizes of (final - first), each size one run.
        gain_terms = _terms(final, 1.0 / len(final)) | _terms(start, -1.0 / len(start))
        training_gain = sign * (final["value"].mean() - start["value"].mean())
        gain_se = se(gain_terms)
        if first_seed.groupby("run")["checkpoint"].nunique().max() < 2:
            # one checkpoint per run (evaluation.final_only_splits): no curve, no gain to judge
            training_gain = gain_se = np.nan
        size_gap = sign * (largest["value"] - smallest["value"]) if len(by_size) > 1 else np.nan
        size_se = (
            se(_terms(by_size.iloc[[-1]], 1.0) | _terms(by_size.iloc[[0]], -1.0))
            if len(by_size) > 1
            else np.nan
        )
        bm25_value = float(bm25["value"].iloc[0]) if len(bm25) else np.nan
        vs_bm25 = sign * (largest["value"] - bm25_value)
        bm25_se = se(_terms(by_size.iloc[[-1]], 1.0) | _terms(bm25.iloc[:1], -1.0)) if len(bm25) else np.nan
        gain_verdict = verdict(training_gain, gain_se, z=z)
        size_verdict = verdict(size_gap, size_se, seed_spread, z)
        rows.append(
            {
                "objective": objective,
                "attention": attention,
                "metric": metric,
                "split": split,
                "queries": queries.queries if queries is not None else 0,
                "first_checkpoint": start["value"].mean(),
                "final_checkpoint": final["value"].mean(),
                "training_gain": training_gain,
                "training_gain_se": gain_se,
                "training_gain_verdict": gain_verdict,
                "smallest": smallest["model"],
                "largest": largest["model"],
                "smallest_final": smallest["value"],
                "largest_final": largest["value"],
                "size_gap": size_gap,
                "size_gap_se": size_se,
                "seed_spread": seed_spread,
                "seed_spread_se": seed_spread_se,
                "seed_spread_models": ", ".join(map(str, spread.index)),  # the sizes it is measured at
                "size_gap_verdict": size_verdict,
                "bm25": bm25_value,
                "largest_minus_bm25": vs_bm25,
                "largest_minus_bm25_se": bm25_se,
                "largest_beats_bm25": verdict(vs_bm25, bm25_se, seed_spread, z),
                "real_scaling": both(gain_verdict, size_verdict),
            }
        )
    return rows


def scaling_evidence(
    metrics: pd.DataFrame,
    per_query: pd.DataFrame | None = None,
    metric: str = "nDCG@10",
    split: str = "dev",
    z: float = 1.96,
) -> pd.DataFrame:
    """The evidence table described in the module docstring (empty when the table lacks the metric).

    Without ``per_query`` (``records.PER_QUERY_COLUMNS``) every standard error is NaN and every
    verdict ``unknown``.
    """
    selected = metrics[(metrics["metric"] == metric) & (metrics["split"] == split)]
    queries = QueryTable.build(per_query, metric, split) if per_query is not None else None
    return pd.DataFrame(_evidence_rows(selected, queries, metric, split, z))


def final_standard_errors(
    metrics: pd.DataFrame, per_query: pd.DataFrame | None, metric: str = "nDCG@10"
) -> pd.DataFrame:
    """Every run's final-checkpoint ``metric`` per split with its standard error over queries."""
    final = final_rows(metrics[metrics["metric"] == metric])
    out = []
    for split, group in final.groupby("split"):
        queries = QueryTable.build(per_query, metric, split) if per_query is not None else None
        for index, r in group.iterrows():
            out.append(
                {
                    "objective": r["objective"],
                    "model": r["model"],
                    "seed": r["seed"],
                    "split": split,
                    "checkpoint": r["checkpoint"],
                    metric: r["value"],
                    "se": queries.standard_error(_terms(group.loc[[index]], 1.0))
                    if queries is not None
                    else np.nan,
                    "queries": queries.queries if queries is not None else 0,
                }
            )
    return pd.DataFrame(out)
