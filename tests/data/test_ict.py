"""The built-in Inverse-Cloze-Task collection (:mod:`rerank_scaling.data.ict`)."""

from __future__ import annotations

from collections import Counter

import yaml
from conftest import REPO

from rerank_scaling.data.collection import query_key
from rerank_scaling.data.ict import IctSettings, build_ict_collection
from rerank_scaling.settings import settings_from_dict, with_defaults


def test_the_default_collection_asks_no_query_twice_in_or_across_splits():
    """The shipped text repeats a few articles word for word: the embedded default's 800 queries
    drew one sentence into both train and dev, and three twice into train, before such passages
    were skipped. Now every query text is asked once, and each split still has its size."""
    section = with_defaults("dataset", yaml.safe_load((REPO / "config.yaml").read_text())["dataset"])
    settings = settings_from_dict(IctSettings, section["builtin"], "dataset.builtin")
    _, queries, _ = build_ict_collection(settings)
    texts = Counter(query_key(text) for split in queries.values() for text in split.values())
    assert texts.most_common(1)[0][1] == 1
    sizes = {split: len(found) for split, found in queries.items()}
    assert sizes == {
        "test": settings.test_queries,
        "dev": settings.dev_queries,
        "train": settings.train_queries,
    }
