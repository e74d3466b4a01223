"""Rerank first-stage candidates with a cross-encoder checkpoint, efficiently.

Each split's (query, passage) pairs are tokenized once (:func:`tokenize_pairs`) and reused for
every checkpoint of a run; batches are formed from pairs of similar length and padded only to
the batch's longest pair (dynamic padding); scoring runs under ``torch.inference_mode`` with
bfloat16 autocast on GPUs that support it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from rerank_scaling.collection import Queries
from rerank_scaling.trec import Run, ranked


@dataclass(frozen=True)
class TokenizedPairs:
    """Token ids of a split's candidate pairs, sorted by length for bucketing."""

    keys: list[tuple[str, str]]  # (qid, docid) per pair, in the sorted order
    input_ids: list[list[int]]
    token_type_ids: list[list[int]]


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
    token_types = encoded.get("token_type_ids") or [[0] * len(ids) for ids in encoded["input_ids"]]
    order = sorted(range(len(pairs)), key=lambda i: len(encoded["input_ids"][i]))
    return TokenizedPairs(
        [pairs[i] for i in order], [encoded["input_ids"][i] for i in order], [token_types[i] for i in order]
    )


def _batches(tokens: TokenizedPairs, batch_size: int, pad_id: int) -> Any:
    import torch

    for start in range(0, len(tokens.keys), batch_size):
        ids = tokens.input_ids[start : start + batch_size]
        types = tokens.token_type_ids[start : start + batch_size]
        width = max(len(row) for row in ids)
        input_ids = torch.full((len(ids), width), pad_id, dtype=torch.long)
        token_type_ids = torch.zeros((len(ids), width), dtype=torch.long)
        attention_mask = torch.zeros((len(ids), width), dtype=torch.long)
        for row, (row_ids, row_types) in enumerate(zip(ids, types, strict=True)):
            input_ids[row, : len(row_ids)] = torch.tensor(row_ids)
            token_type_ids[row, : len(row_types)] = torch.tensor(row_types)
            attention_mask[row, : len(row_ids)] = 1
        yield (
            start,
            {"input_ids": input_ids, "token_type_ids": token_type_ids, "attention_mask": attention_mask},
        )


def score_pairs(model: Any, tokens: TokenizedPairs, batch_size: int, pad_id: int, device: str) -> Run:
    """Relevance scores (logits) of every pair under ``model``, a ``CrossEncoder`` module stack."""
    import torch

    model = model.to(device).eval()
    autocast = device == "cuda" and torch.cuda.is_bf16_supported()
    scores: Run = {}
    with torch.inference_mode(), torch.autocast(device_type="cuda", dtype=torch.bfloat16, enabled=autocast):
        for start, batch in _batches(tokens, batch_size, pad_id):
            batch = {k: v.to(device) for k, v in batch.items()}
            logits = model(batch)["scores"].view(len(batch["input_ids"]), -1)[:, 0].float().cpu().tolist()
            for (qid, docid), score in zip(tokens.keys[start : start + len(logits)], logits, strict=True):
                scores.setdefault(qid, {})[docid] = score
    return scores
