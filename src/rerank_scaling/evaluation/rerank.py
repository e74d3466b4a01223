"""Rerank first-stage candidates with a cross-encoder checkpoint, efficiently.

Each split's (query, passage) pairs are tokenized once (:func:`tokenize_pairs`) and reused for
every checkpoint of a run; batches are formed from pairs of similar length and padded only to
the batch's longest pair (dynamic padding); scoring runs under ``torch.inference_mode``, in the
precision :func:`rerank_scaling.precision.resolve_precision` picks (config ``evaluation.precision``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rerank_scaling.data.collection import Queries
from rerank_scaling.data.trec import Run, ranked


@dataclass(frozen=True)
class TokenizedPairs:
    """Token ids of a split's candidate pairs, sorted by length for bucketing."""

    keys: list[tuple[str, str]]  # (qid, docid) per pair, in the sorted order
    input_ids: list[list[int]]
    token_type_ids: list[list[int]] | None  # None: the tokenizer has none (ModernBERT/Ettin)


def candidate_pairs(run: Run, depth: int) -> list[tuple[str, str]]:
    """(qid, docid) for each query's top ``depth`` first-stage candidates."""
    return [(qid, docid) for qid in sorted(run) for docid, _ in ranked(run[qid])[:depth]]


def tokenize_pairs(
    tokenizer: Any, pairs: list[tuple[str, str]], queries: Queries, texts: dict[str, str], max_length: int
) -> TokenizedPairs:
    """Tokenize (query, passage) pairs once, truncating the longest side first, sorted by length."""
    encoded = tokenizer(
        [queries[q] for q, _ in pairs], [texts[d] for _, d in pairs], truncation=True, max_length=max_length
    )
    token_types = encoded.get("token_type_ids")
    order = sorted(range(len(pairs)), key=lambda i: len(encoded["input_ids"][i]))
    return TokenizedPairs(
        [pairs[i] for i in order],
        [encoded["input_ids"][i] for i in order],
        None if token_types is None else [token_types[i] for i in order],
    )


def _padded(rows: list[list[int]], width: int, pad: int) -> Any:
    import torch

    out = torch.full((len(rows), width), pad, dtype=torch.long)
    for row, values in enumerate(rows):
        out[row, : len(values)] = torch.tensor(values)
    return out


def _batches(tokens: TokenizedPairs, batch_size: int, pad_id: int) -> Any:
    for start in range(0, len(tokens.keys), batch_size):
        ids = tokens.input_ids[start : start + batch_size]
        width = max(len(row) for row in ids)
        batch = {
            "input_ids": _padded(ids, width, pad_id),
            "attention_mask": _padded([[1] * len(row) for row in ids], width, 0),
        }
        if tokens.token_type_ids is not None:
            batch["token_type_ids"] = _padded(tokens.token_type_ids[start : start + batch_size], width, 0)
        yield start, batch


def score_pairs(
    model: Any, tokens: TokenizedPairs, batch_size: int, pad_id: int, device: str, precision: str = "fp32"
) -> Run:
    """Relevance scores (logits) of every pair under ``model``, a ``CrossEncoder`` module stack.

    ``precision`` is a resolved one (:func:`rerank_scaling.precision.resolve_precision`): ``bf16`` or
    ``fp16`` run under autocast: matmuls in the low precision; layer norms, softmax and the score
    layer (:func:`rerank_scaling.precision.fp32_score_layer`) in fp32. ``benchmarks/bench_cpu_peak.py``
    measured autocast within 10% of casting the weights once."""
    import torch

    from rerank_scaling.precision import autocast_dtype, fp32_score_layer

    model = model.to(device).eval()
    dtype = autocast_dtype(precision)
    device_type = "cuda" if device.startswith("cuda") else "cpu"
    scores: Run = {}
    with (
        torch.inference_mode(),
        torch.autocast(device_type=device_type, dtype=dtype or torch.bfloat16, enabled=dtype is not None),
        fp32_score_layer(model, device_type),
    ):
        for start, batch in _batches(tokens, batch_size, pad_id):
            batch = {k: v.to(device) for k, v in batch.items()}
            logits = model(batch)["scores"].view(len(batch["input_ids"]), -1)[:, 0].float().cpu().tolist()
            for (qid, docid), score in zip(tokens.keys[start : start + len(logits)], logits, strict=True):
                scores.setdefault(qid, {})[docid] = score
    return scores
