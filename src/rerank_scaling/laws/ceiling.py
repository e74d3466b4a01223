"""The reranking ceiling: the best value a reranker of BM25's top-k candidates can reach.

A reranker only reorders the ``evaluation.rerank_depth`` candidates BM25 retrieved, so a rank
metric of any reranker is at most the metric of the *oracle* order of those candidates (judged
documents by grade, then the rest): nDCG@10 of a reranker of the default's top 20 cannot exceed
0.534 on its dev split, however large the model. That value, not the metric's nominal maximum 1,
is the upper bound of a saturating law's asymptote (:func:`rerank_scaling.laws.registry.bounds_for`)
and the fixed asymptote of the ensemble's ceiling form (:mod:`.ensemble`).

The oracle's values follow the evaluation's definitions (``tests/laws/test_ceiling.py`` checks them
against :func:`~rerank_scaling.evaluation.metrics.ir_metrics`, the evaluation's registered row
functions, on the oracle order; computed here without ir_measures, which the fitting environment
lacks), over the same queries: every judged
query of the split, or the evaluation's seeded ``max_queries`` subset; a query without candidates
scores 0, as in the evaluation.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

import numpy as np

from rerank_scaling.data.collection import read_split
from rerank_scaling.data.subsets import subsample_queries
from rerank_scaling.data.trec import Qrels, Run, read_run, top_k

Ceilings = tuple[tuple[str, str, float], ...]  # (split, metric, oracle value)


def _oracle(grades: list[int], judged: list[int], threshold: int, k: int = 10) -> dict[str, float]:
    """One query's oracle values: candidates' relevance ``grades`` sorted best first; ``judged``
    the grades of all its judged documents. Same definitions as the evaluation's ir_metrics:
    nDCG@k = sum_i g_i / log2(i + 1) over the ideal DCG of all judged grades (trec_eval ndcg_cut);
    the relevant (grade >= threshold) candidates come first, so RR@k is 1 when there is one, AP and
    R@k are the share of relevant documents among the candidates (R@k capped at k), P@k min(., k)/k."""
    discount = 1 / np.log2(np.arange(2, k + 2))
    ideal = sorted(judged, reverse=True)[:k]
    idcg = float(np.dot(ideal, discount[: len(ideal)]))
    top = grades[:k]
    found = sum(g >= threshold for g in grades)
    relevant = sum(g >= threshold for g in judged)
    return {
        "nDCG@10": float(np.dot(top, discount[: len(top)])) / idcg if idcg > 0 else 0.0,
        "RR@10": float(found > 0),
        "P@10": min(found, k) / k,
        "R@10": min(found, k) / relevant if relevant else 0.0,
        "AP": found / relevant if relevant else 0.0,
    }


def oracle_values(
    candidates: Run, qrels: Qrels, queries: Iterable[str], relevance_threshold: int = 1
) -> dict[str, float]:
    """Mean oracle value of every rank metric over ``queries`` with qrels (a query without
    candidates scores 0, as in the evaluation)."""
    per_query = []
    for qid in (q for q in queries if q in qrels):
        judged = qrels[qid]
        grades = sorted((max(judged.get(d, 0), 0) for d in candidates.get(qid, {})), reverse=True)
        per_query.append(_oracle(grades, [max(g, 0) for g in judged.values()], relevance_threshold))
    return {m: float(np.mean([q[m] for q in per_query])) if per_query else math.nan for m in ORACLE_METRICS}


ORACLE_METRICS = ("nDCG@10", "AP", "RR@10", "R@10", "P@10")


def split_ceilings(collection: str, runs: dict[str, str], evaluation: dict[str, Any]) -> Ceilings:
    """(split, metric, ceiling) of every split in ``runs`` (split -> BM25 run file), with the
    evaluation section's ``rerank_depth``, ``max_queries``, ``seed`` and ``relevance_threshold`` (the
    section with the schema's defaults: :func:`rerank_scaling.settings.with_defaults`)."""
    depth = int(evaluation["rerank_depth"])
    limits = evaluation["max_queries"] or {}
    seed, threshold = int(evaluation["seed"]), int(evaluation["relevance_threshold"])
    out = []
    for split, run in sorted(runs.items()):
        queries, qrels = read_split(collection, split)
        candidates = top_k(read_run(run), depth)
        if limits.get(split) is not None:
            keep = subsample_queries([q for q in qrels if q in queries], limits[split], seed, split)
            queries = {q: text for q, text in queries.items() if q in keep}
        values = oracle_values(candidates, qrels, queries, threshold)
        out += [(split, metric, value) for metric, value in sorted(values.items())]
    return tuple(out)
