"""Rerank first-stage candidates with a cross-encoder checkpoint, efficiently.

Each split's (query, passage) pairs are tokenized once (:func:`tokenize_pairs`) and reused for
every checkpoint of a run; batches are formed from pairs of similar length and padded only to
the batch's longest pair (dynamic padding); scoring runs under ``torch.inference_mode``, in the
precision :func:`rerank_scaling.precision.resolve_precision` picks (config ``evaluation.precision``;
bf16 on a CPU with its near ties rescored in fp32, :mod:`.near_ties`, so candidate orders are fp32's).
The workflow tokenizes each split once per model (:mod:`.split_tokens`, :func:`tokens_table`); jobs
read it (:func:`read_split_tokens`) after checking it against their checkpoint's tokenizer
(:func:`matches_tokenizer`).
"""

from __future__ import annotations

import copy
import logging
import os
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np
import pandas as pd

from rerank_scaling.data.collection import Queries
from rerank_scaling.data.trec import Run, ranked
from rerank_scaling.evaluation.near_ties import CALIBRATION_PAIRS, calibration_sample, rescore_near_ties

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class TokenizedPairs:
    """Token ids of a split's candidate pairs, sorted by length for bucketing."""

    keys: list[tuple[str, str]]  # (qid, docid) per pair, in the sorted order
    input_ids: list[Any]  # per pair: a list of ints, or a numpy view (read_split_tokens)
    token_type_ids: list[Any] | None  # None: the tokenizer has none (ModernBERT/Ettin)

    def select(self, indices: list[int]) -> TokenizedPairs:
        """The pairs at ``indices`` (ascending: they stay sorted by length)."""
        types = self.token_type_ids
        return TokenizedPairs(
            [self.keys[i] for i in indices],
            [self.input_ids[i] for i in indices],
            None if types is None else [types[i] for i in indices],
        )


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


#: Pairs the evaluation job re-tokenizes to check the table against the checkpoint's tokenizer.
CHECK_PAIRS = 64


def tokens_table(tokens: TokenizedPairs) -> pd.DataFrame:
    """The Parquet rows of :class:`TokenizedPairs`, in its (length-sorted) order."""
    table = pd.DataFrame(
        {
            "qid": [q for q, _ in tokens.keys],
            "docid": [d for _, d in tokens.keys],
            "input_ids": [np.asarray(ids, dtype=np.int32) for ids in tokens.input_ids],
        }
    )
    if tokens.token_type_ids is not None:
        table["token_type_ids"] = [np.asarray(t, dtype=np.int8) for t in tokens.token_type_ids]
    return table


def _rows(column: Any) -> list[np.ndarray]:
    """A Parquet list column as one numpy view per row (no Python lists of ints)."""
    array = column.combine_chunks()
    offsets = array.offsets.to_numpy()
    values = array.values.to_numpy().astype(np.int64)
    return np.split(values, offsets[1:-1] - offsets[0]) if len(array) else []


def read_split_tokens(path: str | os.PathLike[str]) -> TokenizedPairs:
    """:class:`TokenizedPairs` from a :func:`tokens_table` file."""
    import pyarrow.parquet as pq

    table = pq.read_table(path)
    keys = list(zip(table["qid"].to_pylist(), table["docid"].to_pylist(), strict=True))
    types = _rows(table["token_type_ids"]) if "token_type_ids" in table.column_names else None
    return TokenizedPairs(keys, _rows(table["input_ids"]), types)


def matches_tokenizer(
    tokens: TokenizedPairs, tokenizer: Any, queries: dict[str, str], texts: dict[str, str], max_length: int
) -> bool:
    """Whether ``tokenizer`` gives the table's ids on a spread sample of its pairs."""
    step = max(1, len(tokens.keys) // CHECK_PAIRS)
    sample = list(range(0, len(tokens.keys), step))[:CHECK_PAIRS]
    encoded = tokenizer(
        [queries[tokens.keys[i][0]] for i in sample],
        [texts[tokens.keys[i][1]] for i in sample],
        truncation=True,
        max_length=max_length,
    )
    return all(list(tokens.input_ids[i]) == ids for i, ids in zip(sample, encoded["input_ids"], strict=True))


def _padded(rows: list[list[int]], width: int, pad: int) -> Any:
    import torch

    out = torch.full((len(rows), width), pad, dtype=torch.long)
    for row, values in enumerate(rows):
        out[row, : len(values)] = torch.as_tensor(values)
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


def model_scores(
    model: Any,
    tokens: TokenizedPairs,
    batch_size: int,
    pad_id: int,
    device: str,
    autocast: Any = None,
    compiled: bool = False,
    fused: bool = True,
) -> list[float]:
    """Each pair's relevance logit under ``model`` as it is (its weights' dtype), in ``tokens``' order;
    under autocast to the torch dtype ``autocast`` where given; by the forward
    :func:`rerank_scaling.compute.scoring_forward.scoring_forward` picks (``compiled``: the compiled
    graph; else, with ``fused``, the fused oneDNN encoder where one applies; else eager). The score
    layer runs in fp32 (:func:`rerank_scaling.precision.fp32_score_layer`)."""
    import torch

    from rerank_scaling.compute.scoring_forward import scoring_forward
    from rerank_scaling.precision import fp32_score_layer

    model, forward, _ = scoring_forward(model, device, compiled, fused)
    device_type = "cuda" if device.startswith("cuda") else "cpu"
    enabled = autocast is not None
    cast = torch.autocast(device_type=device_type, dtype=autocast or torch.bfloat16, enabled=enabled)
    out: list[float] = []
    with torch.inference_mode(), cast, fp32_score_layer(model, device_type):
        for _, batch in _batches(tokens, batch_size, pad_id):
            batch = {k: v.to(device) for k, v in batch.items()}
            out += forward(batch)["scores"].view(len(batch["input_ids"]), -1)[:, 0].float().cpu().tolist()
    return out


def score_pairs(
    model: Any,
    tokens: TokenizedPairs,
    batch_size: int,
    pad_id: int,
    device: str,
    precision: str = "fp32",
    grades: Sequence[int] | None = None,
    compiled: bool = False,
) -> Run:
    """Relevance scores (logits) of every pair under ``model``, a ``CrossEncoder`` module stack.

    ``precision`` is a resolved one (:func:`rerank_scaling.precision.resolve_precision`). ``bf16`` on
    a CPU (:func:`~rerank_scaling.precision.casts_weights` says where) scores with a copy of the model
    whose weights are cast to bf16 once (:func:`rerank_scaling.precision.to_bf16_weights`;
    ``benchmarks/results/cpu_peak_amx.md`` measured it faster than autocast on a CPU with AMX), then
    rescores in fp32, with ``model`` itself (left fp32), round by round the candidates whose order
    against one of a different relevance grade (``grades``, each pair's, in ``tokens``' order; None:
    any candidate) the estimated bf16 error leaves open, plus a calibration sample of
    :data:`.near_ties.CALIBRATION_PAIRS` pairs whatever the batch size (:mod:`.near_ties`,
    which argues why every metric but CE@k then equals
    fp32's; the safety factor of ``e`` is the CPU kind's measured one,
    :attr:`rerank_scaling.compute.cpu_profiles.CpuProfile.near_tie_factor`). With ``compiled`` the bf16
    scores come from the compiled graph (:mod:`rerank_scaling.compute.compiled_graphs`); the fp32 rescoring
    stays eager, so the guarantee is unchanged: it holds for any bf16 scores, and the bound is
    estimated from the compiled scores themselves. How many pairs were rescored is logged (INFO, with
    the :class:`~.near_ties.NearTieReport` as the record's ``near_ties``). Elsewhere ``bf16`` and ``fp16``
    run under autocast, without rescoring: matmuls in the low precision; layer norms and softmax in
    fp32. The score layer always runs in fp32 (:func:`rerank_scaling.precision.fp32_score_layer`)."""
    from rerank_scaling.precision import autocast_dtype, casts_weights

    model = model.to(device).eval()
    if casts_weights(precision, device):
        values = _bf16_with_fp32_near_ties(model, tokens, batch_size, pad_id, device, grades, compiled)
    else:
        values = model_scores(model, tokens, batch_size, pad_id, device, autocast_dtype(precision))
    scores: Run = {}
    for (qid, docid), score in zip(tokens.keys, values, strict=True):
        scores.setdefault(qid, {})[docid] = score
    return scores


def _bf16_with_fp32_near_ties(
    model: Any,
    tokens: TokenizedPairs,
    batch_size: int,
    pad_id: int,
    device: str,
    grades: Sequence[int] | None,
    compiled: bool = False,
) -> list[float]:
    """:func:`score_pairs`'s scores with bf16 weights and the near ties rescored with ``model`` (fp32)."""
    from rerank_scaling.compute.cpu_profiles import cpu_profile
    from rerank_scaling.precision import to_bf16_weights

    low = to_bf16_weights(copy.deepcopy(model))
    bf16 = model_scores(low, tokens, batch_size, pad_id, device, compiled=compiled)
    factor = cpu_profile().near_tie_factor

    def fp32_of(indices: list[int]) -> list[float]:
        return model_scores(model, tokens.select(indices), batch_size, pad_id, device)

    qids = [qid for qid, _ in tokens.keys]
    calibration = calibration_sample(len(bf16), CALIBRATION_PAIRS)
    values, report = rescore_near_ties(qids, bf16, fp32_of, calibration, factor, grades)
    log.info(
        "bf16 scoring: %d of %d pairs (%.1f%%) scored in fp32 (calibration %d, near ties%s resolved in "
        "%d round(s); e = %.3g = %g x %.3g; largest |bf16 - fp32| of a pair scored both ways %.3g)",
        report.rescored,
        report.pairs,
        100 * report.fraction,
        report.calibration,
        " of different grades" if grades is not None else "",
        report.rounds,
        report.bound,
        factor,
        report.bound / factor,
        report.largest_error,
        extra={"near_ties": report},
    )
    return values
