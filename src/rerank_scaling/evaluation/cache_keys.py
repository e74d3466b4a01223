"""What the evaluation caches are keyed by: everything an entry's content depends on, code included.

The per-query rows of a (checkpoint, split) and the reranker's scores behind them are cached
(:mod:`.checkpoints`) under :func:`cache_key`: the checkpoint's content (:func:`checkpoint_identity`,
not the record of how its training went), the split's data (:func:`split_digest`), the settings,
and the digest of the code that made the entry (:func:`~rerank_scaling.stage_code.running_code_digest`):
the whole evaluation stage for the rows, the stage without the metrics for the scores. So a re-run
of training that made the same weights scores nothing again, other weights under an unchanged
sidecar are scored again, and a metric edit recomputes every row from the cached scores without
loading a model; a comment or a docstring edit changes no key.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any, Protocol

from rerank_scaling.data.collection import Queries
from rerank_scaling.data.source_digests import file_sha256
from rerank_scaling.data.trec import Qrels, Run
from rerank_scaling.evaluation.metric_settings import MetricSettings
from rerank_scaling.precision import casts_weights
from rerank_scaling.settings import SectionSettings
from rerank_scaling.stage_code import running_code_digest
from rerank_scaling.training.checkpoint_store import FILES, SIDECAR, verify_published

#: A checkpoint's files that do not score: its sidecar (read field by field) and the model card that
#: sentence-transformers wrote beside the weights before training turned it off
#: (model_saves.without_model_card).
NOT_SCORING_FILES = (SIDECAR, "README.md")
#: Sidecar fields that say how the training went, not what it made.
TRAINING_TIMING = ("wall_s",)
#: The evaluation stage's code that computes metrics from scores: the scores cache ignores it.
METRIC_CODE = ("evaluation.metrics",)
# Settings that change a metric but no score: a scores cache entry ignores them.
METRIC_ONLY = MetricSettings.names()


class SplitContent(Protocol):
    """What a cache key reads of a split (:class:`.checkpoints.SplitData`)."""

    name: str
    queries: Queries
    qrels: Qrels
    candidates: Run
    texts: dict[str, str]


def checkpoint_identity(ckpt: Path, sidecar: dict[str, Any]) -> dict[str, Any]:
    """What a checkpoint's scores depend on, once its files are verified against the SHA-256 its
    sidecar records (:func:`~rerank_scaling.training.checkpoint_store.verify_published`: a damaged
    file is an error naming it and the repair): the SHA-256 of its files (weights, configs,
    tokenizer; :data:`NOT_SCORING_FILES` aside) and its sidecar without :data:`TRAINING_TIMING`.
    A retrained, bit-identical checkpoint has the same identity; its sidecar's other fields
    (attention variant, step, run) stay in, as before."""
    verify_published(ckpt, sidecar)
    recorded = sidecar.get(FILES)
    if recorded is None:  # a sidecar from before the records: the files hashed here
        files = (path for path in ckpt.rglob("*") if path.is_file())
        recorded = {path.relative_to(ckpt).as_posix(): {"sha256": file_sha256(path)} for path in files}
    digest = hashlib.sha256()
    for name in sorted(recorded):
        if name not in NOT_SCORING_FILES:
            digest.update(f"{name}\0{recorded[name]['sha256']}\n".encode())
    kept = {key: value for key, value in sidecar.items() if key not in (*TRAINING_TIMING, FILES)}
    return {**kept, "files_sha256": digest.hexdigest()}


def split_digest(split: SplitContent, with_qrels: bool = True) -> str:
    """SHA-256 of everything a split's per-query rows are computed from: its (sub-sampled) queries,
    qrels, BM25 candidates and their texts (without the qrels: what its scores are computed from).
    A cache keyed by it can never serve rows scored against other qrels or candidates (a fixed
    qrels file, a re-run BM25)."""
    digest = hashlib.sha256()
    parts = (split.queries, split.qrels if with_qrels else {}, split.candidates, split.texts)
    for part in parts:
        digest.update(json.dumps(part, sort_keys=True).encode())
    return digest.hexdigest()


def evaluation_code() -> dict[str, str]:
    """The code digest of each kind of cache entry: ``per_query`` rows depend on the whole
    evaluation stage, ``scores`` on all of it but :data:`METRIC_CODE`."""
    return {
        "per_query": running_code_digest("evaluation.evaluate"),
        "scores": running_code_digest("evaluation.evaluate", leave_out=METRIC_CODE),
    }


def cache_key(
    checkpoint: dict[str, Any],
    split: SplitContent,
    settings: SectionSettings,
    max_length: int,
    precision: str,
    device: str,
    code: dict[str, str],
    kind: str = "per_query",
) -> str:
    """The key of a cache entry of ``kind`` ("per_query": per-query rows; "scores": the reranker's
    scores, which the qrels and the metric settings do not change); ``checkpoint`` is its
    :func:`checkpoint_identity`, ``code`` :func:`evaluation_code`."""
    # Not the job layout nor which checkpoints score a split; the precision resolved on this device,
    # not the request ("auto" means different things on different machines); the split's content
    # by its digest, not its name
    ignored = ("unit", "final_only_splits", *(METRIC_ONLY if kind == "scores" else ()))
    relevant = {k: v for k, v in settings.__dict__.items() if k not in ignored}
    # the job's size is not what it scores: keyed as null
    relevant.update(dict.fromkeys(type(settings).RESOURCE_KEYS))
    # bf16 with the weights cast once scores differently from bf16 autocast, and with its near ties
    # of different grades rescored in fp32 (.near_ties): an older cache of either must not match,
    # and those scores depend on the qrels' grades
    rescores = casts_weights(precision, device)
    rescored = f"{precision} weights, fp32 near ties of different grades"
    relevant["precision"] = rescored if rescores else precision
    data = [split.name, split_digest(split, with_qrels=kind != "scores" or rescores)]
    blob = json.dumps([checkpoint, data, relevant, max_length, kind, code[kind]], sort_keys=True, default=str)
    return hashlib.sha256(blob.encode()).hexdigest()[:16]
