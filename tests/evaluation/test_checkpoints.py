"""evaluation.max_queries: a seeded subset of a large split, the same in every job and unit."""

from __future__ import annotations

import random

from rerank_scaling.data.subsets import subsample_queries


def test_subsample_is_reproducible_sized_and_order_independent() -> None:
    qids = [f"q{i}" for i in range(1000)]
    subset = subsample_queries(qids, 50, seed=0, split="dev")
    assert len(subset) == 50 and subset <= set(qids)
    shuffled = qids[:]
    random.Random(1).shuffle(shuffled)
    assert subsample_queries(shuffled, 50, seed=0, split="dev") == subset  # order of the input
    assert subsample_queries(qids, 50, seed=1, split="dev") != subset  # the seed matters
    assert subsample_queries(qids, 50, seed=0, split="test") != subset  # splits draw independently
    assert subsample_queries(qids, None, seed=0, split="dev") == set(qids)
    assert subsample_queries(qids[:10], 50, seed=0, split="dev") == set(qids[:10])


def test_subsample_draws_queries_uniformly() -> None:
    """Each query is drawn with probability n/N: counts over many seeds stay within 5 sigma."""
    qids = [f"q{i}" for i in range(40)]
    draws, n = 2000, 10
    counts = dict.fromkeys(qids, 0)
    for seed in range(draws):
        for qid in subsample_queries(qids, n, seed=seed, split="dev"):
            counts[qid] += 1
    p = n / len(qids)
    sigma = (draws * p * (1 - p)) ** 0.5
    assert all(abs(c - draws * p) < 5 * sigma for c in counts.values())
