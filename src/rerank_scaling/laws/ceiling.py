"""The reranking ceiling: the best value a reranker of BM25's top-k candidates can reach.

A reranker only reorders the ``evaluation.rerank_depth`` candidates BM25 retrieved, so a rank
metric of any reranker is at most the metric of the *oracle* order of those candidates (judged
documents by grade, then the rest): nDCG@10 of a reranker of the default's top 20 cannot exceed
0.530 on its dev split, however large the model. That value, not the metric's nominal maximum 1,
is the upper bound of a saturating law's asymptote (:func:`rerank_scaling.laws.registry.bounds_for`)
and the fixed asymptote of the ensemble's ceiling form (:mod:`.ensemble`).

The oracle is scored with the evaluation's own code (:func:`~rerank_scaling.evaluation.metrics.ir_metrics`),
over the same queries (every judged query of the split, or the seeded ``max_queries`` subset; a
query without candidates scores 0, as in the evaluation).
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

import numpy as np

from rerank_scaling.data.trec import Qrels, Run
from rerank_scaling.evaluation.checkpoints import load_split
from rerank_scaling.evaluation.metrics import ir_metrics, ranking

Ceilings = tuple[tuple[str, str, float], ...]  # (split, metric, oracle value)


def oracle_run(candidates: Run, qrels: Qrels) -> Run:
    """Each query's candidates ordered by relevance grade, BM25's order breaking ties."""
    oracle: Run = {}
    for qid, docs in candidates.items():
        judged, order = qrels.get(qid, {}), ranking(docs)
        oracle[qid] = {d: judged.get(d, 0) * len(order) - i for i, d in enumerate(order)}
    return oracle


def oracle_values(
    candidates: Run, qrels: Qrels, queries: Iterable[str], relevance_threshold: int = 1
) -> dict[str, float]:
    """Mean oracle value of every rank metric of :func:`ir_metrics` over ``queries`` with qrels."""
    oracle = oracle_run(candidates, qrels)
    complete = {q: oracle.get(q, {}) for q in queries if q in qrels}
    per_query = ir_metrics(complete, qrels, relevance_threshold)
    return {
        metric: float(np.mean([values.get(q, 0.0) for q in complete])) for metric, values in per_query.items()
    }


def split_ceilings(collection: str, runs: dict[str, str], evaluation: dict[str, Any]) -> Ceilings:
    """(split, metric, ceiling) of every split in ``runs`` (split -> BM25 run file), with the
    evaluation section's ``rerank_depth``, ``max_queries``, ``seed`` and ``relevance_threshold``."""
    depth = int(evaluation.get("rerank_depth", 100))
    limits = evaluation.get("max_queries") or {}
    out = []
    for split, run in sorted(runs.items()):
        data = load_split(
            collection, run, split, depth, limits.get(split), int(evaluation.get("seed", 0)), with_texts=False
        )
        values = oracle_values(
            data.candidates, data.qrels, data.queries, int(evaluation.get("relevance_threshold", 1))
        )
        out += [(split, metric, value) for metric, value in sorted(values.items())]
    return tuple(out)
