"""The reranking ceiling: the oracle value of the candidates a reranker reorders."""

from __future__ import annotations

import math

import numpy as np
import pytest

from rerank_scaling.evaluation.metrics import ir_metrics
from rerank_scaling.laws.ceiling import oracle_values


def test_the_oracle_puts_judged_candidates_first_and_misses_what_bm25_missed() -> None:
    # q1: BM25 ranks the relevant d2 second and never retrieved the relevant d3;
    # q2: its one relevant document is not among the candidates: the ceiling is 0
    candidates = {"q1": {"d1": 2.0, "d2": 1.0}, "q2": {"d4": 3.0}}
    qrels = {"q1": {"d2": 1, "d3": 1}, "q2": {"d5": 2}}
    values = oracle_values(candidates, qrels, ["q1", "q2"])
    q1 = 1.0 / (1.0 + 1.0 / math.log2(3))  # DCG of d2 at rank 1 over the ideal DCG of d2, d3
    assert values["nDCG@10"] == pytest.approx((q1 + 0.0) / 2)
    assert values["RR@10"] == pytest.approx(0.5)


def test_a_higher_grade_goes_above_a_lower_one_and_unjudged_queries_count_zero() -> None:
    candidates = {"q1": {"a": 3.0, "b": 2.0, "c": 1.0}}
    qrels = {"q1": {"c": 2, "b": 1}, "q3": {"x": 1}}
    values = oracle_values(candidates, qrels, ["q1", "q3"])
    assert values["nDCG@10"] == pytest.approx(0.5)  # q1 perfect, q3 has no candidates


def test_the_oracle_values_equal_the_evaluation_s_metrics_of_the_oracle_order() -> None:
    """Random graded qrels and candidate lists: the closed forms match ir_measures (the evaluation's
    code) scoring the candidates ranked by grade."""
    rng = np.random.default_rng(0)
    candidates, qrels = {}, {}
    for q in range(60):
        docs = [f"d{i}" for i in range(30)]
        qrels[f"q{q}"] = {
            d: int(rng.integers(1, 4)) for d in rng.choice(docs, rng.integers(1, 8), replace=False)
        }
        qrels[f"q{q}"].update({d: 0 for d in rng.choice(docs, 3, replace=False) if d not in qrels[f"q{q}"]})
        depth = int(rng.integers(0, 20))
        candidates[f"q{q}"] = {d: float(rng.normal()) for d in rng.choice(docs, depth, replace=False)}
    oracle = {
        q: {d: qrels[q].get(d, 0) * 100 - i for i, d in enumerate(sorted(docs))}
        for q, docs in candidates.items()
    }
    expected = {m: np.mean(list(v.values())) for m, v in ir_metrics(oracle, qrels).items()}
    found = oracle_values(candidates, qrels, qrels)
    for metric, value in expected.items():
        assert found[metric] == pytest.approx(value), metric
