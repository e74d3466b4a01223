"""Length-bucketed training batches: every row once per epoch, batches of similar length.

A batch is padded to its longest pair, so random batches of MS MARCO pairs (mean ~90 tokens, a
tail to the 256-token cap) spend most of their FLOPs on padding. As in fairseq's and
tensor2tensor's bucketing, each epoch draws a seeded permutation of the rows, cuts it into pools of
``pool_steps`` optimizer steps, sorts each pool by length, cuts it into steps and shuffles the order
of the steps; a step of ``step_rows`` rows is then cut into consecutive micro-batches of
``batch_size`` rows (gradient accumulation, :mod:`rerank_scaling.planning.memory`), so micro-batching
trains on the same rows per optimizer step as one full batch. Within a pool the rows are sorted, so
a step still mixes queries from all over the permutation (the pool is ``pool_steps`` steps wide).

Lengths are character counts of the query and its longest document (no tokenization), capped at
``max_chars``: beyond the token cap every pair is truncated to the same length, so the order among
them does not matter.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sentence_transformers.base.sampler import DefaultBatchSampler

#: Steps per sorting pool: wide enough to find similar lengths, narrow enough to stay random.
POOL_STEPS = 50


def row_lengths(dataset: Any, max_chars: int) -> list[int]:
    """Character length of each training row: query + document (pointwise) or + its longest document."""
    queries = dataset["query"]
    if "document" in dataset.column_names:
        docs = [len(d) for d in dataset["document"]]
    else:
        docs = [max((len(d) for d in group), default=0) for group in dataset["documents"]]
    return [min(len(q) + d, max_chars) for q, d in zip(queries, docs, strict=True)]


def bucketed_steps(
    lengths: Sequence[int], step_rows: int, seed: int, pool_steps: int = POOL_STEPS
) -> list[list[int]]:
    """Optimizer steps (lists of row indices) of one epoch: every row exactly once (module docstring)."""
    import torch

    generator = torch.Generator().manual_seed(seed)
    order = torch.randperm(len(lengths), generator=generator).tolist()
    pool = step_rows * pool_steps
    steps: list[list[int]] = []
    for start in range(0, len(order), pool):
        rows = sorted(order[start : start + pool], key=lambda i: lengths[i])
        steps.extend(rows[i : i + step_rows] for i in range(0, len(rows), step_rows))
    full = [s for s in steps if len(s) == step_rows]
    partial = [s for s in steps if len(s) < step_rows]  # at most one: the last pool's tail
    shuffled = [full[i] for i in torch.randperm(len(full), generator=generator).tolist()]
    return shuffled + partial


class LengthBucketBatchSampler(DefaultBatchSampler):
    """Micro-batches of :func:`bucketed_steps`, seeded by (``seed``, epoch), for sentence-transformers'
    ``batch_sampler`` argument (``functools.partial`` fixes ``lengths`` and ``step_rows``)."""

    def __init__(
        self,
        dataset: Any,
        batch_size: int,
        drop_last: bool,
        valid_label_columns: list[str] | None = None,
        generator: Any = None,
        seed: int = 0,
        *,
        lengths: Sequence[int],
        step_rows: int,
    ) -> None:
        super().__init__(dataset, batch_size, drop_last, valid_label_columns, generator, seed)
        if step_rows % batch_size:
            raise ValueError(f"a step of {step_rows} rows cannot be cut into micro-batches of {batch_size}")
        self.lengths = list(lengths)
        self.step_rows = step_rows

    def __iter__(self) -> Iterator[list[int]]:
        for step in bucketed_steps(self.lengths, self.step_rows, self.seed * 1_000_003 + self.epoch):
            for start in range(0, len(step), self.batch_size):
                yield step[start : start + self.batch_size]

    def __len__(self) -> int:
        full, rest = divmod(len(self.lengths), self.step_rows)
        return full * (self.step_rows // self.batch_size) + -(-rest // self.batch_size)
