"""The reranking ceiling: the oracle value of the candidates a reranker reorders (issue 24)."""

from __future__ import annotations

import math

import pytest

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
