"""Nested, seeded subsets of the training queries: the data-size axis (``training.data_fractions``).

A run on fraction f trains on the first ceil(f * n) of the n training queries in an order fixed by
the run's seed (SHA-256 of ``<seed>/<qid>``), so for one seed the 1/8 queries lie inside the 1/4,
which lie inside the 1/2: the difference between two fractions is data, not the luck of the draw
(Fang et al., Scaling Laws for Dense Retrieval §4.2 fits its data law on models trained on that many
annotations). Seeds draw different orders, so seed replicates measure the draw's noise too.

The evaluated queries of a split have their own seeded subset (``evaluation.max_queries``:
:func:`subsample_queries`), which the evaluation and the fit stage's ceilings draw alike.
"""

from __future__ import annotations

import hashlib
import math
import random
from collections.abc import Iterable
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # the frames' type only: the Snakefile's step checks import this module
    import pandas as pd


def query_order(qids: Iterable[str], seed: int) -> list[str]:
    """The distinct ``qids`` in the run's seeded order (independent of their input order)."""
    key = {qid: hashlib.sha256(f"{seed}/{qid}".encode()).hexdigest() for qid in set(qids)}
    return sorted(key, key=lambda qid: (key[qid], qid))


def subset_size(queries: int, fraction: float) -> int:
    """Queries a fraction keeps: ceil(fraction * queries), at least one."""
    if not 0.0 < fraction <= 1.0:
        raise ValueError(f"training.data_fractions: {fraction} is not in (0, 1]")
    return max(1, math.ceil(fraction * queries - 1e-9))


def nested_subset(qids: Iterable[str], fraction: float, seed: int) -> set[str]:
    """The queries of fraction ``fraction`` for ``seed``: a prefix of :func:`query_order`."""
    order = query_order(qids, seed)
    return set(order[: subset_size(len(order), fraction)])


def subset_examples(frame: pd.DataFrame, fraction: float, seed: int) -> pd.DataFrame:
    """The rows of ``frame`` (training examples with a ``qid`` column) whose query is in the subset."""
    if fraction == 1.0:
        return frame
    keep = nested_subset(frame["qid"], fraction, seed)
    return frame[frame["qid"].isin(keep)].reset_index(drop=True)


def annotated_pairs(frame: pd.DataFrame) -> int:
    """Judged (query, relevant passage) pairs behind the examples: one per group row; the positive
    rows of pointwise examples (``label`` 1)."""
    if "labels" in frame.columns:
        return len(frame)
    return int((frame["label"] > 0).sum())


def subsample_queries(qids: list[str], n: int | None, seed: int, split: str) -> set[str]:
    """A reproducible random subset of ``n`` of ``qids`` (all when ``n`` is None or >= len).

    Seeded by (``seed``, ``split``), independent of the order ``qids`` come in, so every job and
    every unit draws the same queries.
    """
    ordered = sorted(set(qids))
    if n is None or n >= len(ordered):
        return set(ordered)
    return set(random.Random(f"{seed}:{split}").sample(ordered, n))
