"""Synthetic inputs shaped like the paper grid's MS MARCO passage data, at a scale (1.0: full size),
for measuring the CPU jobs' memory and time (``benchmarks/bench_cpu_memory.py``) without the data.

* ``training_examples``'s inputs: a local collection of :data:`PASSAGES` x scale passages of
  ~:data:`~rerank_scaling.workflow.workload.BYTES_PER_DOCUMENT` bytes a line, :data:`TRAIN_QUERIES` x scale
  train queries (config.paper.yaml caps MS MARCO train at 200k) with :data:`POSITIVES_PER_QUERY`
  judged passages each on average, and a BM25 run of the train queries at ``depth`` passages.
* ``merge_metrics``'s inputs: per-part metric and per-query tables of a grid of runs, one part per
  checkpoint (``evaluation.unit: checkpoint``), with MS MARCO's evaluation splits' queries x scale.

Only the sizes are MS MARCO's (counts, text lengths, id forms); the texts are random words.
"""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pandas as pd

from rerank_scaling.records import METRIC_COLUMNS, PER_QUERY_COLUMNS
from rerank_scaling.workflow.workload import BYTES_PER_DOCUMENT

PASSAGES = 8_841_823  # msmarco-passage docs_count
TRAIN_QUERIES = 200_000  # config.paper.yaml: dataset.ir_datasets.max_queries.train
POSITIVES_PER_QUERY = 532_761 / 502_939  # msmarco-passage/train/judged: qrels / queries
EVAL_QUERIES = {"dev": 6980, "dl19": 43, "dl20": 54, "dlhard": 50}
QUERY_CHARS = 34  # mean MS MARCO query length
#: A corpus line's JSON and id around the passage's text.
LINE_OVERHEAD = len('{"id": "1234567", "contents": ""}\n')


def _word_pool(rng: np.random.Generator, chars: int) -> str:
    words = [
        "".join(rng.choice(list("abcdefghijklmnopqrstuvwxyz"), size=n)) for n in rng.integers(2, 10, 5000)
    ]
    text = " ".join(rng.choice(words, size=chars // 5))
    return text[:chars]


def write_collection(
    root: Path, scale: float, depth: int = 100, seed: int = 0, passage_scale: float | None = None
) -> dict[str, int]:
    """The train split's collection and BM25 run under ``root`` (``corpus.jsonl``, ``queries/train.tsv``,
    ``qrels/train.txt``, ``train.trec``), the corpus at ``passage_scale`` (default: ``scale``);
    returns its counts (passages, queries, positives, run_lines)."""
    rng = np.random.default_rng(seed)
    passages = max(depth + 16, round(PASSAGES * (scale if passage_scale is None else passage_scale)))
    queries = max(1, round(TRAIN_QUERIES * scale))
    mean_chars = BYTES_PER_DOCUMENT - LINE_OVERHEAD
    pool = _word_pool(rng, 1 << 20)
    lengths = np.clip(rng.normal(mean_chars, mean_chars / 3, passages), 20, 3 * mean_chars).astype(int)
    starts = rng.integers(0, len(pool) - 3 * mean_chars, passages)
    (root / "queries").mkdir(parents=True, exist_ok=True)
    (root / "qrels").mkdir(exist_ok=True)
    with open(root / "corpus.jsonl", "w", encoding="utf-8") as handle:
        for docid, (start, length) in enumerate(zip(starts, lengths, strict=True)):
            handle.write(json.dumps({"id": str(docid), "contents": pool[start : start + length]}) + "\n")
    qids = np.sort(rng.choice(1_200_000, size=queries, replace=False))
    positives = 1 + rng.poisson(POSITIVES_PER_QUERY - 1, queries)
    with open(root / "queries" / "train.tsv", "w", encoding="utf-8") as handle:
        for qid, start in zip(qids, rng.integers(0, len(pool) - QUERY_CHARS, queries), strict=True):
            handle.write(f"{qid}\t{pool[start : start + QUERY_CHARS].strip() or 'q'}\n")
    run_lines = 0
    with open(root / "qrels" / "train.txt", "w") as qrels, open(root / "train.trec", "w") as run:
        for qid, judged in zip(qids, positives, strict=True):
            docs = list(dict.fromkeys(rng.integers(0, passages, depth + judged + 8).tolist()))
            ranked, relevant = docs[:depth], docs[depth : depth + judged]
            if rng.random() < 2 / 3:  # BM25 finds the judged passage in its top 100 for about 2/3
                ranked[int(rng.integers(0, len(ranked)))] = relevant[0]
            qrels.writelines(f"{qid} 0 {doc} 1\n" for doc in relevant)
            run.writelines(
                f"{qid} Q0 {doc} {r + 1} {100.0 - r * 0.1:.3f} bm25\n" for r, doc in enumerate(ranked)
            )
            run_lines += len(ranked)
    return {
        "passages": passages,
        "queries": queries,
        "positives": int(positives.sum()),
        "run_lines": run_lines,
    }


def write_parts(
    root: Path, scale: float, runs: int, checkpoints: int, metrics: int, seed: int = 0
) -> list[Path]:
    """``runs`` x ``checkpoints`` evaluation parts (metrics and per-query tables, the columns of
    :mod:`rerank_scaling.records`) of the evaluation splits' queries x ``scale``; returns the
    per-query files (each metrics file beside it, without ``.per_query``)."""
    rng = np.random.default_rng(seed)
    names = [f"M{m}" for m in range(metrics)]
    qids = {split: [str(q) for q in range(max(1, round(n * scale)))] for split, n in EVAL_QUERIES.items()}
    frame = pd.DataFrame(
        [(split, metric, qid) for split, ids in qids.items() for metric in names for qid in ids],
        columns=["split", "metric", "qid"],
    )
    paths = []
    for r in range(runs):
        run = f"model{r // 3}__{('pointwise', 'pairwise', 'listwise')[r % 3]}__full__s42"
        for k in range(1, checkpoints + 1):
            per_query = frame.assign(run=run, checkpoint=k, value=rng.random(len(frame)), n=1)
            path = root / run / "parts" / f"ckpt-{k:02d}.per_query.parquet"
            path.parent.mkdir(parents=True, exist_ok=True)
            per_query[list(PER_QUERY_COLUMNS)].to_parquet(path, index=False)
            means = per_query.groupby(["split", "metric"], as_index=False)["value"].mean()
            metrics_rows = means.assign(**{c: 0 for c in METRIC_COLUMNS if c not in means.columns})
            metrics_rows = metrics_rows.assign(run=run, model=run.split("__")[0], checkpoint=k, queries=1)
            metrics_rows[list(METRIC_COLUMNS)].to_parquet(
                path.with_name(f"ckpt-{k:02d}.parquet"), index=False
            )
            paths.append(path)
    return paths
