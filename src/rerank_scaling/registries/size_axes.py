"""The size-axis registry: the one owner of what N is (``fitting.size_axis``).

Kaplan et al. (2020) fit N as the non-embedding parameters; "Scaling Laws for Cross-Encoder
Reranking" reports total parameters too. Each axis names a column of the metrics table
(:data:`rerank_scaling.records.METRIC_COLUMNS`), the same field of
:class:`rerank_scaling.training.models.ModelStats` and of planning's measured
:class:`rerank_scaling.planning.measured_profiles.CostProfile`, and how the answer and the
figures name it, so the laws (``laws.protocols``), planning (``planning.plan_rows``,
``planning.cost_model``, the plan's figures) and the report read one model's N the same way.

A new axis is one :func:`register` line (plus its name in the schema's ``fitting.size_axis``
enum); ``tests/test_registries.py`` shows it. Standard library only.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any


@dataclass(frozen=True)
class SizeAxis:
    """``fitting.size_axis`` = ``name`` reads N from ``column``; ``label`` names it to a reader."""

    name: str
    column: str
    label: str


#: ``fitting.size_axis`` -> its axis; the first is the default reading of a table without fits.
SIZE_AXES: dict[str, SizeAxis] = {}


def register(axis: SizeAxis) -> SizeAxis:
    """Make ``axis`` known to the laws, planning and the report."""
    SIZE_AXES[axis.name] = axis
    return axis


NON_EMBEDDING = register(SizeAxis("non_embedding", "non_embedding_params", "non-embedding parameters"))
TOTAL = register(SizeAxis("total", "params", "total parameters"))


def size_axis(name: str) -> SizeAxis:
    """The registered axis ``name``; a KeyError naming ``fitting.size_axis`` otherwise."""
    if name not in SIZE_AXES:
        raise KeyError(f"fitting.size_axis: unknown size axis {name!r}; use one of {', '.join(SIZE_AXES)}")
    return SIZE_AXES[name]


def size_column(name: str) -> str:
    """The metrics-table column that size axis ``name`` reads as N."""
    return size_axis(name).column


def model_size(counts: Any, name: str) -> float:
    """N of one model on axis ``name``, from a record with the parameter counts as fields
    (:class:`~rerank_scaling.training.models.ModelStats`, a measured ``CostProfile``)."""
    return float(getattr(counts, size_column(name)))


def axis_of_column(column: str) -> SizeAxis:
    """The registered axis reading ``column``."""
    for axis in SIZE_AXES.values():
        if axis.column == column:
            return axis
    raise KeyError(f"no size axis reads column {column!r}; registered: {', '.join(SIZE_AXES)}")
