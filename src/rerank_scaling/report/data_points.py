"""The two data curves of the data-scaling figure: the checkpoints of one full-data run
(the paper's protocol: mid-schedule models whose learning rate has not decayed) and the ends of the
``training.data_fractions`` runs (each trained to the end of its own schedule), per annotation source."""

from __future__ import annotations

import pandas as pd

from rerank_scaling.laws.protocols import annotation_sources as row_sources
from rerank_scaling.laws.protocols import data_fractions

#: Marker of each annotation source's points (filled: checkpoints; hollow: fraction ends).
SOURCE_MARKERS = {"human": "o", "ict": "^"}


def sources_present(rows: pd.DataFrame) -> list[str]:
    """The sources present, ``human`` first (tables from before the axis: human only)."""
    return sorted(set(row_sources(rows)), key=lambda s: (s != "human", s))


def of_source(rows: pd.DataFrame, source: str) -> pd.DataFrame:
    return rows[row_sources(rows) == source]


def checkpoint_curve(rows: pd.DataFrame) -> pd.DataFrame:
    """(model, step, value): the full-data runs' checkpoints, seeds averaged."""
    full = rows[data_fractions(rows) == 1.0]
    return full.groupby(["model", "step"], as_index=False)["value"].mean()


def fraction_curve(rows: pd.DataFrame) -> pd.DataFrame:
    """(model, step, value): each fraction run's final checkpoint, seeds averaged; empty with one
    fraction (there is no second curve to draw)."""
    if data_fractions(rows).nunique() < 2:
        return rows.iloc[:0][["model", "step", "value"]]
    ends = rows[rows["checkpoint"] == rows.groupby("run")["checkpoint"].transform("max")]
    ends = ends.assign(fraction=data_fractions(ends))
    return ends.groupby(["model", "fraction"], as_index=False)[["step", "value"]].mean()[
        ["model", "step", "value"]
    ]
