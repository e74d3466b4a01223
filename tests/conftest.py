"""Shared fixtures: the repository root, configs, and a small built-in collection with BM25 runs."""

from __future__ import annotations

import copy
import os
from pathlib import Path

import pytest
import yaml

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")

REPO = Path(__file__).resolve().parents[1]
CRANFIELD = REPO.parent / "shared" / "data" / "cranfield"


@pytest.fixture(scope="session")
def repo() -> Path:
    return REPO


@pytest.fixture
def default_config() -> dict:
    with open(REPO / "config.yaml") as handle:
        return copy.deepcopy(yaml.safe_load(handle))


@pytest.fixture(scope="session")
def small_collection(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """A small built-in ICT collection with a real Lucene index and BM25 runs for every split."""
    from rerank_scaling import bm25
    from rerank_scaling.collection import write_collection
    from rerank_scaling.ict import IctSettings, build_ict_collection

    root = tmp_path_factory.mktemp("ict")
    docs, queries, qrels = build_ict_collection(
        IctSettings(train_queries=80, dev_queries=20, test_queries=40)
    )
    collection = write_collection(root / "collection", docs, queries, qrels)
    bm25.build_index(collection.corpus, root / "index")
    for split in queries:
        bm25.search(root / "index", queries[split], root / "runs" / f"{split}.trec")
    return {
        "root": root,
        "collection": collection,
        "queries": queries,
        "qrels": qrels,
        "runs": root / "runs",
        "index": root / "index",
    }
