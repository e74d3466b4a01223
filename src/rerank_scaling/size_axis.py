"""The size axis N of the laws (``fitting.size_axis``): the one owner of which parameter count an
axis reads.

Kaplan et al. (2020) fit N as the non-embedding parameters; the seed paper reports total parameters
too. Each axis names a column of the metrics table (:data:`rerank_scaling.records.METRIC_COLUMNS`),
the same field of :class:`rerank_scaling.families.models.ModelStats` and of planning's measured
:class:`rerank_scaling.planning.measured_profiles.CostProfile`, so the laws (``laws.protocols``) and
planning (``planning.plan_rows``) read one model's N the same way.
"""

from __future__ import annotations

from typing import Any

#: ``fitting.size_axis`` -> the column (and record field) it reads
SIZE_COLUMNS: dict[str, str] = {"non_embedding": "non_embedding_params", "total": "params"}


def size_column(axis: str) -> str:
    """The metrics-table column that size axis ``axis`` reads as N."""
    if axis not in SIZE_COLUMNS:
        raise KeyError(f"fitting.size_axis: unknown size axis {axis!r}; use one of {', '.join(SIZE_COLUMNS)}")
    return SIZE_COLUMNS[axis]


def model_size(counts: Any, axis: str) -> float:
    """N of one model on ``axis``, from a record with the parameter counts as fields
    (:class:`~rerank_scaling.families.models.ModelStats`, a measured ``CostProfile``)."""
    return float(getattr(counts, size_column(axis)))
