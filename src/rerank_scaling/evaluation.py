"""Evaluate checkpoints (and the BM25 first stage) on evaluation splits, as long metric tables.

Per split, the BM25 top ``rerank_depth`` candidates are reranked by each checkpoint and scored
with every metric of :mod:`rerank_scaling.metrics`. Results are cached per (checkpoint, split) under
a key made of the checkpoint's sidecar and the evaluation settings, so a killed job resumes and a
re-run after adding one checkpoint scores only that checkpoint. The key ignores
``evaluation.unit`` (how the work is split into jobs), so the units share one cache.

``evaluation.max_queries`` ({split: n}) evaluates a seeded random subset of n queries of a large
split (:func:`subsample_queries`); the ``queries`` column of the metrics table records how many.
"""

from __future__ import annotations

import hashlib
import json
import logging
import random
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pandas as pd

from rerank_scaling.atomic import write_table
from rerank_scaling.collection import CollectionDir, Queries, load_texts, read_split
from rerank_scaling.metrics import MetricSettings, evaluate
from rerank_scaling.records import METRIC_COLUMNS
from rerank_scaling.rerank import candidate_pairs, score_pairs, tokenize_pairs
from rerank_scaling.trec import Qrels, Run, read_run, top_k, write_run

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class EvalSettings:
    """Config ``evaluation``."""

    rerank_depth: int = 100
    relevance_threshold: int = 1
    ce_sizes: tuple[int, ...] = (64,)
    rbp_k: tuple[int, ...] = (1, 3, 10)
    rr_m: tuple[int, ...] = (2, 10)
    batch_size: int = 64
    seed: int = 0
    threads: int | None = None
    mem_mb: int | None = None
    runtime: int | None = None
    unit: str = "run"  # "run" | "checkpoint" | "checkpoint_split": one evaluation job per ...
    max_queries: dict[str, int | None] | None = None  # split -> queries evaluated (None: all)

    def metric_settings(self) -> MetricSettings:
        return MetricSettings(
            relevance_threshold=self.relevance_threshold,
            ce_sizes=self.ce_sizes,
            rbp_k=self.rbp_k,
            rr_m=self.rr_m,
            seed=self.seed,
        )


@dataclass(frozen=True)
class SplitData:
    name: str
    queries: Queries
    qrels: Qrels
    candidates: Run  # BM25 top rerank_depth
    texts: dict[str, str]


def subsample_queries(qids: list[str], n: int | None, seed: int, split: str) -> set[str]:
    """A reproducible random subset of ``n`` of ``qids`` (all when ``n`` is None or >= len).

    Seeded by (``seed``, ``split``), independent of the order ``qids`` come in, so every job and
    every unit draws the same queries.
    """
    ordered = sorted(set(qids))
    if n is None or n >= len(ordered):
        return set(ordered)
    return set(random.Random(f"{seed}:{split}").sample(ordered, n))


def load_split(
    collection: str, bm25_run: str, split: str, depth: int, max_queries: int | None = None, seed: int = 0
) -> SplitData:
    """Queries, qrels, BM25 candidates (top ``depth``) and the candidates' texts of one split;
    with ``max_queries``, only a seeded subset of the judged queries (:func:`subsample_queries`)."""
    queries, qrels = read_split(collection, split)
    candidates = top_k(read_run(bm25_run), depth)
    missing = sorted(set(candidates) - set(queries))
    if missing:
        raise ValueError(f"BM25 run {bm25_run} has queries not in split {split!r}: {missing[:5]}")
    if max_queries is not None:
        keep = subsample_queries([q for q in qrels if q in queries], max_queries, seed, split)
        queries = {q: text for q, text in queries.items() if q in keep}
        qrels = {q: judged for q, judged in qrels.items() if q in keep}
        candidates = {q: docs for q, docs in candidates.items() if q in keep}
    docids = {d for docs in candidates.values() for d in docs}
    return SplitData(split, queries, qrels, candidates, load_texts(CollectionDir(collection).corpus, docids))


def metric_rows(run: Run, split: SplitData, settings: EvalSettings, fields: dict[str, Any]) -> pd.DataFrame:
    """Long rows (METRIC_COLUMNS) of every metric of ``run`` on ``split``, tagged with ``fields``."""
    # Every query with qrels counts; a query whose candidates are all missing scores 0, as in trec_eval.
    complete = {qid: run.get(qid, {}) for qid in split.qrels if qid in split.queries}
    table = evaluate(
        complete, split.qrels, {q: list(d) for q, d in split.candidates.items()}, settings.metric_settings()
    )
    table = table[["metric", "value"]].assign(split=split.name, queries=len(complete), **fields)
    return table.reindex(columns=list(METRIC_COLUMNS))


def bm25_fields() -> dict[str, Any]:
    return {
        "run": "bm25",
        "model": "bm25",
        "family": "bm25",
        "role": "baseline",
        "objective": "bm25",
        "attention": "bm25",
        "checkpoint": 0,
        "step": 0,
        "examples": 0,
        "tokens": 0,
        "flops": 0.0,
    }


def _cache_key(sidecar: dict[str, Any], split: str, settings: EvalSettings, max_length: int) -> str:
    relevant = {k: v for k, v in settings.__dict__.items() if k != "unit"}  # job layout, not results
    blob = json.dumps([sidecar, split, relevant, max_length], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def evaluate_checkpoints(
    checkpoint_dirs: list[Path],
    splits: list[SplitData],
    settings: EvalSettings,
    max_length: int,
    device: str,
    runs_dir: Path,
    cache_dir: Path,
) -> pd.DataFrame:
    """Rerank every split with every checkpoint of one run; returns the run's long metric table."""
    from sentence_transformers.cross_encoder import CrossEncoder

    tokenized: dict[str, Any] = {}
    tables = []
    for index, ckpt in enumerate(checkpoint_dirs, 1):
        sidecar = json.loads((ckpt / "checkpoint.json").read_text())
        fields = {c: sidecar[c] for c in METRIC_COLUMNS if c in sidecar}
        model = None
        for split in splits:
            key = _cache_key(sidecar, split.name, settings, max_length)
            cached = cache_dir / f"{ckpt.name}.{split.name}.{key}.parquet"
            if cached.exists():
                tables.append(pd.read_parquet(cached))
                continue
            if model is None:
                model = CrossEncoder(str(ckpt), device=device, max_length=max_length)
                if sidecar["attention"] != "full":
                    from rerank_scaling.sparse_encoder import (
                        apply_window_attention,
                        attention_variant_from_name,
                    )

                    apply_window_attention(model.model, attention_variant_from_name(sidecar["attention"]))
                tokenizer = model.tokenizer
            if split.name not in tokenized:
                pairs = candidate_pairs(split.candidates, settings.rerank_depth)
                tokenized[split.name] = tokenize_pairs(
                    tokenizer, pairs, split.queries, split.texts, max_length
                )
            scores = score_pairs(
                model, tokenized[split.name], settings.batch_size, tokenizer.pad_token_id or 0, device
            )
            write_run(scores, runs_dir / f"{ckpt.name}.{split.name}.trec", tag=sidecar["run"])
            table = metric_rows(scores, split, settings, fields)
            write_table(table, cached)
            tables.append(table)
        log.info(
            "[%d/%d] %s evaluated on %s",
            index,
            len(checkpoint_dirs),
            ckpt.name,
            ", ".join(s.name for s in splits),
        )
    return pd.concat(tables, ignore_index=True)
