"""A run's training objective: its examples, in the loss's column order, and its loss.

Objectives (sentence-transformers cross-encoder losses):

* ``pointwise``: ``BinaryCrossEntropyLoss`` on (q, d, label) pairs;
* ``pairwise``: ``RankNetLoss`` (Burges et al. 2005) on groups of 1 positive + n BM25 negatives;
* ``listwise``: ``ListNetLoss`` (Cao et al. 2007) on the same groups. ListNet's target is
  softmax(labels), so 0/1 labels give a soft target; labels are multiplied by
  ``listnet_label_scale`` to make the target nearly one-hot.

What each objective trains on and with which loss: :mod:`rerank_scaling.registries.objectives`.

The examples are the run's nested subset of the training queries
(:mod:`rerank_scaling.data.subsets`); :mod:`.trainer` trains on them.
"""

from __future__ import annotations

from typing import Any

import pandas as pd

from rerank_scaling.data.subsets import annotated_pairs, subset_examples
from rerank_scaling.registries import objectives as objective_registry


def load_examples(
    objective: str, pointwise: str, groups: str, label_scale: float, fraction: float = 1.0, seed: int = 0
) -> tuple[Any, int]:
    """The training dataset of an objective as a ``datasets.Dataset`` in the loss's column order,
    restricted to the run's nested subset of queries (:mod:`rerank_scaling.data.subsets`), and the
    number of annotated (query, relevant passage) pairs behind it."""
    from datasets import Dataset

    spec = objective_registry.objective(objective)
    if spec.examples.grouped:
        frame = subset_examples(pd.read_parquet(groups), fraction, seed)
        pairs = annotated_pairs(frame)
        frame = frame[["query", "documents", "labels"]].copy()
        if spec.label_scaled:
            frame["labels"] = [[label * label_scale for label in labels] for labels in frame["labels"]]
    else:
        frame = subset_examples(pd.read_parquet(pointwise), fraction, seed)
        pairs = annotated_pairs(frame)
        frame = frame[["query", "document", "label"]]
    if frame.empty:
        raise ValueError(f"no training examples for {objective}: check the examples settings")
    return Dataset.from_pandas(frame, preserve_index=False), pairs


def make_loss(objective: str, model: Any) -> Any:
    """The objective's sentence-transformers cross-encoder loss on ``model``
    (:attr:`rerank_scaling.registries.objectives.Objective.loss`)."""
    from sentence_transformers.cross_encoder import losses

    return getattr(losses, objective_registry.objective(objective).loss)(model)
