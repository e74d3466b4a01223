"""BM25 with a real Lucene index (Anserini) on the built-in collection; run files; the ICT task."""

from __future__ import annotations

import dataclasses
import json
import re

import ir_measures
import pytest

from rerank_scaling.data import bm25
from rerank_scaling.data.ict import IctSettings, build_ict_collection
from rerank_scaling.data.trec import read_run


def test_bm25_runs_cover_every_query_with_ranked_hits(small_collection):
    run = read_run(small_collection["runs"] / "test.trec")
    queries = small_collection["queries"]["test"]
    assert set(run) == set(queries)
    assert max(len(docs) for docs in run.values()) == bm25.ANSERINI_DEFAULTS.depth
    lines = (small_collection["runs"] / "test.trec").read_text().splitlines()
    first = lines[0].split()
    assert first[1] == "Q0" and first[3] == "1" and first[5] == "bm25"
    scores = [float(line.split()[4]) for line in lines if line.split()[0] == first[0]]
    assert scores == sorted(scores, reverse=True)


def test_bm25_on_ict_is_clearly_imperfect_but_informative(small_collection):
    run = read_run(small_collection["runs"] / "test.trec")
    ndcg = ir_measures.calc_aggregate([ir_measures.nDCG @ 10], small_collection["qrels"]["test"], run)[
        ir_measures.nDCG @ 10
    ]
    # BM25 must leave headroom for rerankers (< 0.7) yet beat a random ranking by far.
    assert 0.15 < ndcg < 0.7, ndcg


def test_bm25_parameters_change_the_ranking(small_collection, tmp_path):
    queries = small_collection["queries"]["dev"]
    bm25.search(
        small_collection["index"],
        queries,
        tmp_path / "b0.trec",
        bm25.Bm25Settings.of(k1=0.9, b=0.0, depth=10),
    )
    bm25.search(
        small_collection["index"],
        queries,
        tmp_path / "b1.trec",
        bm25.Bm25Settings.of(k1=0.9, b=1.0, depth=10),
    )
    assert (tmp_path / "b0.trec").read_text() != (tmp_path / "b1.trec").read_text()


def test_ict_collection_is_deterministic_and_splits_are_disjoint():
    settings = IctSettings.of(train_queries=50, dev_queries=10, test_queries=10)
    first, second = build_ict_collection(settings), build_ict_collection(settings)
    assert first == second
    _, queries, qrels = first
    own = {split: {max(j, key=j.get) for j in qrels[split].values()} for split in qrels}
    assert not own["train"] & own["test"] and not own["dev"] & own["test"]
    # The query sentence is removed from its own passage (ICT), so it is never an exact substring.
    docs = dict(first[0])
    for qid, text in queries["test"].items():
        passage = max(qrels["test"][qid], key=qrels["test"][qid].get)
        assert text not in docs[passage]
    changed = build_ict_collection(IctSettings.of(train_queries=50, dev_queries=10, test_queries=10, seed=8))
    assert changed[1] != first[1]


def test_indexing_a_corpus_with_a_malformed_line_fails_naming_it(tmp_path):
    """Anserini skips a line it cannot parse and exits 0; build_index must not."""
    corpus = tmp_path / "corpus.jsonl"
    good = [json.dumps({"id": f"d{i}", "contents": f"text number {i}"}) for i in range(4)]
    corpus.write_text("\n".join([*good[:2], "not json", *good[2:]]) + "\n")
    with pytest.raises(ValueError, match=r"corpus.jsonl:3: expected a JSON object"):
        bm25.build_index(corpus, tmp_path / "index")
    assert not (tmp_path / "index").exists()


def test_indexing_uses_one_file_per_thread_and_the_run_does_not_depend_on_it(small_collection, tmp_path):
    """IndexCollection gives each input file one thread: retrieval.threads 3 indexes the corpus as
    3 files (Anserini's log says so) into an index that ranks exactly as a 1-file index does, and
    stores no docvectors or raw text."""
    queries = small_collection["queries"]["test"]
    runs = {}
    for threads in (1, 3):
        log = tmp_path / f"index-{threads}.log"
        settings = dataclasses.replace(bm25.ANSERINI_DEFAULTS, threads=threads)
        corpus = small_collection["collection"].corpus
        bm25.build_index(corpus, tmp_path / f"index-{threads}", settings, log=log)
        assert re.search(rf"\b{threads} files? found", log.read_text()), log.read_text()[-2000:]
        bm25.search(tmp_path / f"index-{threads}", queries, tmp_path / f"{threads}.trec", settings)
        runs[threads] = (tmp_path / f"{threads}.trec").read_text()
    assert runs[1] == runs[3] and runs[1]
