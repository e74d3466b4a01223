"""Evaluate checkpoints (and the BM25 first stage) on evaluation splits, as long metric tables.

Per split, the BM25 top ``rerank_depth`` candidates are reranked by each checkpoint and scored
with every metric of :mod:`rerank_scaling.evaluation.metrics`, per query (``records.PER_QUERY_COLUMNS``) and
as the long table's means (``records.METRIC_COLUMNS``). A checkpoint whose files fail the SHA-256
its sidecar records is an error naming the file and the repair, before it scores anything. The
per-query rows are cached per (checkpoint, split) under a key made of the checkpoint's content,
the evaluation settings, the split's data and the evaluation code (:mod:`.cache_keys`), so a
killed job resumes, a re-run after adding one checkpoint scores only that checkpoint, a re-run
of training that made the same weights (a training-code edit that changes no number) scores
nothing again, and a code edit never serves old rows. The scores are cached too, keyed without
the qrels, the metric settings and the metric code: a qrels fix or a metric edit recomputes the
metrics without loading a model. The keys
ignore ``evaluation.unit`` (how the work is split into jobs), so the units share one cache.

``evaluation.max_queries`` ({split: n}) evaluates a seeded random subset of n queries of a large
split (:func:`subsample_queries`); the ``queries`` column of the metrics table records how many.
``evaluation.final_only_splits`` scores those splits at a run's final checkpoint only (a test split
that reports the end result but is not fitted along training); ``evaluation.precision`` picks
fp32 or bfloat16 scoring (:func:`rerank_scaling.precision.resolve_precision`: ``auto`` is bf16 where
the device has bf16 units; on a CPU with the weights cast to bf16 once, :func:`.rerank.score_pairs`),
recorded in the table's ``precision`` column; ``evaluation.batch_size: auto`` is the CPU kind's
measured batch size (:func:`rerank_scaling.compute.cpu_profiles.eval_batch_size`).
"""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import pandas as pd

from rerank_scaling.atomic import write_table
from rerank_scaling.compute.cpu_profiles import eval_batch_size
from rerank_scaling.data.collection import CollectionDir, Queries, load_texts, read_split
from rerank_scaling.data.subsets import subsample_queries
from rerank_scaling.data.trec import Qrels, Run, read_run, top_k, write_run
from rerank_scaling.evaluation.cache_keys import cache_key, checkpoint_identity, evaluation_code
from rerank_scaling.evaluation.eval_settings import EvalSettings
from rerank_scaling.evaluation.metrics import (
    DROPPED,
    aggregate,
    evaluate_per_query,
    metric_names,
)
from rerank_scaling.evaluation.rerank import (
    TokenizedPairs,
    candidate_pairs,
    matches_tokenizer,
    score_pairs,
    tokenize_pairs,
)
from rerank_scaling.evaluation.split_texts import read_split_texts
from rerank_scaling.families.models import attention_implementation
from rerank_scaling.precision import casts_weights, resolve_precision
from rerank_scaling.records import METRIC_COLUMNS, PER_QUERY_COLUMNS

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class SplitData:
    name: str
    queries: Queries
    qrels: Qrels
    candidates: Run  # BM25 top rerank_depth
    texts: dict[str, str]


def load_split(
    collection: str,
    bm25_run: str,
    split: str,
    depth: int,
    max_queries: int | None = None,
    seed: int = 0,
    texts_file: str | None = None,
    with_texts: bool = True,
) -> SplitData:
    """Queries, qrels, BM25 candidates (top ``depth``) and the candidates' texts of one split;
    with ``max_queries``, only a seeded subset of the judged queries (:func:`subsample_queries`).

    Texts come from the split's :mod:`.split_texts` table when ``texts_file`` is given (the
    workflow's evaluation jobs), else from a scan of the corpus; none when ``with_texts`` is False
    (BM25's own evaluation needs none)."""
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
    if not with_texts:
        texts: dict[str, str] = {}
    elif texts_file is not None:
        texts = read_split_texts(texts_file, docids)
    else:
        texts = load_texts(CollectionDir(collection).corpus, docids)
    return SplitData(split, queries, qrels, candidates, texts)


def per_query_rows(
    run: Run, split: SplitData, settings: EvalSettings, fields: dict[str, Any]
) -> pd.DataFrame:
    """Per-query rows (PER_QUERY_COLUMNS) of every metric of ``run`` on ``split``, tagged with ``fields``."""
    # Every query with qrels counts; a query whose candidates are all missing scores 0, as in trec_eval.
    complete = {qid: run.get(qid, {}) for qid in split.qrels if qid in split.queries}
    candidates = {q: list(d) for q, d in split.candidates.items()}
    rows = evaluate_per_query(complete, split.qrels, candidates, settings.metric_settings())
    rows = rows.assign(split=split.name, run=fields["run"], checkpoint=fields["checkpoint"])
    return rows.reindex(columns=list(PER_QUERY_COLUMNS))


def metric_rows(
    per_query: pd.DataFrame, split: str, settings: EvalSettings, fields: dict[str, Any]
) -> pd.DataFrame:
    """Long rows (METRIC_COLUMNS) from ``split``'s :func:`per_query_rows`; logs the queries CE drops."""
    table = aggregate(per_query, metric_names(settings.metric_settings()))
    for _, row in table[table["metric"].str.endswith(DROPPED)].iterrows():
        if row["value"]:
            log.warning(
                "%s checkpoint %s on %s: %s: %d of %d judged queries have no CE instance "
                "(no relevant candidate, or too few non-relevant ones); CE averages over the rest",
                fields["run"],
                fields["checkpoint"],
                split,
                row["metric"],
                row["value"],
                row["n"],
            )
    queries = per_query["qid"].nunique()
    table = table[["metric", "value"]].assign(split=split, queries=queries, **fields)
    return table.reindex(columns=list(METRIC_COLUMNS))


def bm25_tables(splits: list[SplitData], settings: EvalSettings) -> tuple[pd.DataFrame, pd.DataFrame]:
    """(long metric table, per-query table) of the BM25 candidate ranking on every split."""
    fields = bm25_fields()
    per_query = [per_query_rows(split.candidates, split, settings, fields) for split in splits]
    long = [
        metric_rows(rows, split.name, settings, fields) for rows, split in zip(per_query, splits, strict=True)
    ]
    return pd.concat(long, ignore_index=True), pd.concat(per_query, ignore_index=True)


def bm25_fields() -> dict[str, Any]:
    return {
        "run": "bm25",
        "model": "bm25",
        "family": "bm25",
        "model_commit": None,
        "role": "baseline",
        "objective": "bm25",
        "attention": "bm25",
        "annotations": "none",
        "data_fraction": 0.0,
        "annotated_pairs": 0,
        "checkpoint": 0,
        "step": 0,
        "examples": 0,
        "tokens": 0,
        "flops": 0.0,
        "train_precision": "none",
        "precision": "none",
    }


def _write_scores(scores: Run, path: Path) -> None:
    rows = [(qid, docid, score) for qid, docs in scores.items() for docid, score in docs.items()]
    write_table(pd.DataFrame(rows, columns=["qid", "docid", "score"]), path)


def _read_scores(path: Path) -> Run:
    scores: Run = {}
    table = pd.read_parquet(path)
    for qid, docid, score in zip(table["qid"], table["docid"], table["score"], strict=True):
        scores.setdefault(qid, {})[docid] = float(score)
    return scores


class CheckpointScorer:
    """One checkpoint's cross-encoder, loaded on first use, scoring a split's candidate pairs."""

    def __init__(
        self,
        ckpt: Path,
        sidecar: dict[str, Any],
        settings: EvalSettings,
        max_length: int,
        device: str,
        precision: str,
    ) -> None:
        from sentence_transformers.cross_encoder import CrossEncoder

        # FlashAttention-2 where training would use it; never under fp32 scoring
        attn = attention_implementation(device, precision != "fp32")
        kwargs = {"attn_implementation": attn} if attn and sidecar["attention"] == "full" else None
        self.model = CrossEncoder(str(ckpt), device=device, max_length=max_length, model_kwargs=kwargs)
        if sidecar["attention"] != "full":
            from rerank_scaling.training.sparse_encoder import (
                apply_window_attention,
                attention_variant_from_name,
            )

            apply_window_attention(self.model.model, attention_variant_from_name(sidecar["attention"]))
        self.ckpt, self.settings, self.max_length = ckpt, settings, max_length
        self.device, self.precision = device, precision

    def scores(
        self, split: SplitData, pretokenized: dict[str, TokenizedPairs], tokenized: dict[str, Any]
    ) -> Run:
        """The model's scores of ``split``'s candidates; ``tokenized`` (split -> pairs) is filled
        for the next checkpoint, from the ``split_tokens`` table when it holds this split's
        candidates and matches this tokenizer, else by tokenizing here."""
        tokenizer, depth = self.model.tokenizer, self.settings.rerank_depth
        ready = pretokenized.get(split.name)
        if split.name not in tokenized and ready is not None:
            # the table's pairs must be this split's candidates (not those of another BM25 run)
            same = set(ready.keys) == set(candidate_pairs(split.candidates, depth))
            if same and matches_tokenizer(ready, tokenizer, split.queries, split.texts, self.max_length):
                tokenized[split.name] = ready
            else:
                log.warning(
                    "%s: the pre-tokenized pairs of %s differ; tokenizing here", self.ckpt, split.name
                )
        if split.name not in tokenized:
            pairs = candidate_pairs(split.candidates, depth)
            tokenized[split.name] = tokenize_pairs(
                tokenizer, pairs, split.queries, split.texts, self.max_length
            )
        pad = tokenizer.pad_token_id or 0
        batch = self.settings.batch_size
        tokens = tokenized[split.name]
        grades = [split.qrels.get(qid, {}).get(docid, 0) for qid, docid in tokens.keys]
        compiled = self.settings.compile == "on"
        return score_pairs(self.model, tokens, batch, pad, self.device, self.precision, grades, compiled)


def resolved_compile(
    settings: EvalSettings, checkpoint_dirs: list[Path], splits: list[SplitData], precision: str, device: str
) -> EvalSettings:
    """``settings`` with ``compile`` resolved to ``on`` or ``off`` for this job (and so in the cache
    keys, like the resolved precision): only the bf16-weights scoring compiles
    (:func:`rerank_scaling.precision.casts_weights`); ``auto`` weighs the pairs this job scores
    against the CPU kind's break-even (:func:`rerank_scaling.compute.compiled_graphs.resolve_compile`)."""
    from rerank_scaling.compute.compiled_graphs import resolve_compile
    from rerank_scaling.compute.cpu_profiles import cpu_profile

    per_split = {s.name: len(candidate_pairs(s.candidates, settings.rerank_depth)) for s in splits}
    pairs = 0
    for ckpt in checkpoint_dirs:
        sidecar = json.loads((ckpt / "checkpoint.json").read_text())
        final = sidecar["step"] == sidecar["total_steps"]
        pairs += sum(per_split[s.name] for s in settings.splits_at(splits, final))
    threshold = cpu_profile().eval_compile_pairs
    compiled = casts_weights(precision, device) and resolve_compile(
        settings.compile, device, "evaluation.compile", pairs, threshold
    )
    if settings.compile != "off":
        log.info(
            "compiled scoring: %s (evaluation.compile %s, %d pairs, break-even %s)",
            "on" if compiled else "off",
            settings.compile,
            pairs,
            threshold,
        )
    return replace(settings, compile="on" if compiled else "off")


def evaluate_checkpoints(
    checkpoint_dirs: list[Path],
    splits: list[SplitData],
    settings: EvalSettings,
    max_length: int,
    device: str,
    runs_dir: Path,
    cache_dir: Path,
    pretokenized: dict[str, TokenizedPairs] | None = None,
) -> tuple[pd.DataFrame, pd.DataFrame]:
    """Rerank every split with every checkpoint of one run: (long metric table, per-query table).

    ``pretokenized``: split -> its pairs tokenized by the workflow's ``split_tokens`` job, used when
    the checkpoint's tokenizer gives the same ids on a sample (else the split is tokenized here)."""
    precision = resolve_precision(settings.precision, device, "evaluation.precision")
    log.info("scoring in %s (evaluation.precision: %s, %s)", precision, settings.precision, device)
    settings = resolved_compile(settings, checkpoint_dirs, splits, precision, device)
    requested_batch = settings.batch_size
    settings = replace(settings, batch_size=eval_batch_size(requested_batch, device))
    log.info("batches of %d pairs (evaluation.batch_size: %s)", settings.batch_size, requested_batch)
    tokenized: dict[str, Any] = {}
    tables, per_query = [], []
    code = evaluation_code()
    for index, ckpt in enumerate(checkpoint_dirs, 1):
        sidecar = json.loads((ckpt / "checkpoint.json").read_text())
        fields = {c: sidecar[c] for c in METRIC_COLUMNS if c in sidecar}
        fields.setdefault("train_precision", "unknown")  # trained before the sidecars recorded it
        fields.setdefault("data_fraction", 1.0)  # trained before the data axes: on every query
        fields.setdefault("annotations", "human")  # of the collection's own qrels
        fields.setdefault("model_commit", None)  # trained before the sidecars recorded it
        fields["precision"] = precision
        scorer, identity = None, checkpoint_identity(ckpt, sidecar)
        scored = settings.splits_at(splits, final=sidecar["step"] == sidecar["total_steps"])
        for split in scored:
            key = cache_key(identity, split, settings, max_length, precision, device, code)
            cached = cache_dir / f"{ckpt.name}.{split.name}.{key}.parquet"
            if cached.exists():
                per_query.append(pd.read_parquet(cached))
                tables.append(metric_rows(per_query[-1], split.name, settings, fields))
                continue
            scores_key = cache_key(identity, split, settings, max_length, precision, device, code, "scores")
            scores_file = cache_dir / f"{ckpt.name}.{split.name}.scores.{scores_key}.parquet"
            if scores_file.exists():  # e.g. after a qrels fix: the metrics again, no model
                scores = _read_scores(scores_file)
            else:
                scorer = scorer or CheckpointScorer(ckpt, sidecar, settings, max_length, device, precision)
                scores = scorer.scores(split, pretokenized or {}, tokenized)
                _write_scores(scores, scores_file)
                write_run(scores, runs_dir / f"{ckpt.name}.{split.name}.trec", tag=sidecar["run"])
            per_query.append(per_query_rows(scores, split, settings, fields))
            write_table(per_query[-1], cached)
            tables.append(metric_rows(per_query[-1], split.name, settings, fields))
        log.info(
            "[%d/%d] %s evaluated on %s",
            index,
            len(checkpoint_dirs),
            ckpt.name,
            ", ".join(s.name for s in scored),
        )
    return pd.concat(tables, ignore_index=True), pd.concat(per_query, ignore_index=True)
