"""Real data check: Cranfield (../shared/data/cranfield) through ir_datasets' own parser and BM25."""

from __future__ import annotations

import shutil
import tarfile

import ir_measures
import pytest
from conftest import CRANFIELD
from test_datasets import prepare_in_subprocess

from rerank_scaling.data import bm25
from rerank_scaling.data.collection import CollectionDir, read_queries
from rerank_scaling.data.trec import read_qrels, read_run

# Cleverdon's codes: 1 = complete answer ... 4 = minimum interest, -1 = none (shared README).
CRANFIELD_GAINS = {"1": 4, "2": 3, "3": 2, "4": 1, "-1": 0}


@pytest.mark.slow
def test_cranfield_bm25_ndcg(tmp_path):
    if not CRANFIELD.exists():
        pytest.skip(
            f"Cranfield not found at {CRANFIELD}; this real-data check needs ../shared/data/cranfield"
        )
    home = tmp_path / "irds" / "cranfield"
    home.mkdir(parents=True)
    with tarfile.open(home / "cran.tar.gz", "w:gz") as tar:
        for name in ("cran.all.1400", "cran.qry", "cranqrel"):
            tar.add(CRANFIELD / name, arcname=name)
    section = {
        "name": "cranfield",
        "source": "ir_datasets",
        "train_split": "test",
        "eval_splits": ["test"],
        "allow_judged_empty_documents": True,  # document 995 is empty and judged relevant
        "ir_datasets": {
            "corpus": "cranfield",
            "splits": {"test": "cranfield"},
            "relevance_map": CRANFIELD_GAINS,
        },
    }
    strict = prepare_in_subprocess(
        {**section, "allow_judged_empty_documents": False}, tmp_path / "strict", tmp_path / "irds"
    )
    assert strict.returncode != 0 and "document '995' has no text" in strict.stderr, strict.stderr
    result = prepare_in_subprocess(section, tmp_path / "collection", tmp_path / "irds")
    assert result.returncode == 0, result.stderr
    assert "document '995' has no text" in result.stderr and "allow_judged_empty_documents" in result.stderr
    collection = CollectionDir(tmp_path / "collection")
    assert sum(1 for _ in open(collection.corpus)) == 1400
    qrels = read_qrels(collection.qrels("test"))
    assert len(qrels) == 225
    bm25.build_index(collection.corpus, tmp_path / "index")
    bm25.search(tmp_path / "index", read_queries(collection.queries("test")), tmp_path / "run.trec")
    run = read_run(tmp_path / "run.trec")
    ndcg = ir_measures.calc_aggregate([ir_measures.nDCG @ 10], qrels, run)[ir_measures.nDCG @ 10]
    print(f"Cranfield BM25 nDCG@10 = {ndcg:.4f}")
    # Published BM25 figures on Cranfield are around 0.3-0.45 depending on gains and stemming.
    assert 0.25 < ndcg < 0.6
    shutil.rmtree(tmp_path / "index")
