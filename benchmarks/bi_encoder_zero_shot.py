"""What the ladder's checkpoint knows before fine-tuning: its first L layers used as a **bi-encoder**
(mean-pooled token states, cosine similarity; how the sentence-embedding checkpoint was trained,
Reimers & Gurevych 2019, "Sentence-BERT") to rerank BM25's top ``rerank_depth`` on a run folder's
dev queries, without any training. Read by benchmarks/ladder_options.py (``--bi-encoder``).

A fine-tuned cross-encoder of the same depth that scores below this has not used what the
checkpoint already knows; one whose zero-shot bi-encoder already beats BM25 shows that the
collection rewards more than lexical overlap.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd
import torch
from transformers import AutoModel, AutoTokenizer

from rerank_scaling.data.trec import read_qrels, read_run
from rerank_scaling.evaluation.metrics import ir_metrics, ranking
from rerank_scaling.families.paths import resolve_path

BATCH = 64


def _texts(run_dir: Path, split: str) -> tuple[dict[str, str], dict[str, str]]:
    """(docid -> passage, qid -> query) of the run folder's collection."""
    collection = run_dir / "data" / "collection"
    with open(collection / "corpus.jsonl", encoding="utf-8") as handle:
        docs = {row["id"]: row["contents"] for row in map(json.loads, handle)}
    with open(collection / "queries" / f"{split}.tsv", encoding="utf-8") as handle:
        queries = dict(line.rstrip("\n").split("\t", 1) for line in handle if line.strip())
    return docs, queries


def mean_pooled(
    texts: list[str], model_dir: str, layers: list[int], max_length: int
) -> dict[int, np.ndarray]:
    """Unit-length mean of each text's token states after each of ``layers`` layers (one forward
    pass of the whole checkpoint, every depth read from its hidden states)."""
    tokenizer = AutoTokenizer.from_pretrained(model_dir)
    model = AutoModel.from_pretrained(model_dir).eval()
    out: dict[int, list[np.ndarray]] = {layer: [] for layer in layers}
    for start in range(0, len(texts), BATCH):
        chunk = texts[start : start + BATCH]
        batch = tokenizer(chunk, padding=True, truncation=True, max_length=max_length, return_tensors="pt")
        with torch.no_grad():
            states = model(**batch, output_hidden_states=True).hidden_states
        mask = batch["attention_mask"].unsqueeze(-1).float()
        for layer in layers:
            pooled = (states[layer] * mask).sum(1) / mask.sum(1)
            out[layer].append(torch.nn.functional.normalize(pooled, dim=-1).numpy())
    return {layer: np.concatenate(parts) for layer, parts in out.items()}


def zero_shot_rows(
    run_dir: Path, model_path: str, layers: list[int], depth: int, max_length: int, split: str = "dev"
) -> list[dict[str, object]]:
    """Per depth: dev nDCG@10 of the bi-encoder reranking BM25's top ``depth`` (BM25's order below),
    and its difference from BM25 with the paired SE (SD of per-query differences / sqrt(queries))."""
    docs, queries = _texts(run_dir, split)
    bm25 = read_run(run_dir / "bm25" / "runs" / f"{split}.trec")
    qrels = read_qrels(run_dir / "data" / "collection" / "qrels" / f"{split}.txt")
    qids = sorted(q for q in queries if q in bm25)
    top = {q: ranking(bm25[q])[:depth] for q in qids}
    needed = sorted({d for q in qids for d in top[q]})
    model_dir = resolve_path(model_path)
    query_vectors = mean_pooled([queries[q] for q in qids], model_dir, layers, max_length)
    doc_vectors = mean_pooled([docs[d] for d in needed], model_dir, layers, max_length)
    base = pd.Series(ir_metrics({q: bm25[q] for q in qids}, qrels)["nDCG@10"])
    row_of = {d: i for i, d in enumerate(needed)}
    rows = []
    for layer in layers:
        reranked = {}
        for i, q in enumerate(qids):
            similarity = doc_vectors[layer][[row_of[d] for d in top[q]]] @ query_vectors[layer][i]
            # cosine + 2 ranks the top ``depth`` above BM25's rest (minus their rank)
            reranked[q] = {d: 2.0 + float(s) for d, s in zip(top[q], similarity, strict=True)}
            reranked[q] |= {d: -float(r) for r, d in enumerate(ranking(bm25[q])[depth:])}
        values = pd.Series(ir_metrics(reranked, qrels)["nDCG@10"])
        diff = (values - base).loc[qids]
        se = float(diff.std(ddof=1) / np.sqrt(len(diff)))
        rows.append(
            {
                "layers": f"L{layer}",
                "queries": len(qids),
                "dev nDCG@10": f"{values.mean():.3f}",
                "BM25": f"{base.mean():.3f}",
                "minus BM25 (paired SE)": f"{diff.mean():+.3f} ({se:.3f}, {diff.mean() / se:+.1f} SE)",
            }
        )
    return rows
