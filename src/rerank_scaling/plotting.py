"""The plotting helpers every stage that draws shares: a headless backend, one theme, row
selection and atomic saving. Below the stages (laws, planning, report) that draw figures, so none
of them imports another's figures.

Importing this module selects matplotlib's Agg backend (no display on cluster nodes) and seaborn's
colour-blind-safe palette for every C0..C9 colour of the figures.
"""

from __future__ import annotations

from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pandas as pd  # noqa: E402
import seaborn as sns  # noqa: E402
from matplotlib.transforms import Bbox  # noqa: E402

from rerank_scaling.atomic import atomic_path  # noqa: E402

sns.set_theme(context="paper", style="whitegrid", font_scale=1.1, palette="colorblind")


def select_rows(frame: pd.DataFrame, **equals: object) -> pd.DataFrame:
    """Rows matching every ``column == value`` (NaN never matches); empty when a column is missing."""
    if frame.empty or any(key not in frame.columns for key in equals):
        return frame.iloc[0:0]
    mask = np.ones(len(frame), dtype=bool)
    for key, value in equals.items():
        mask &= (frame[key] == value).fillna(False).to_numpy(dtype=bool)
    return frame[mask]


#: The PNGs' resolution.
DPI = 150


def tight_box(fig: plt.Figure, dpi: float = DPI) -> Bbox:
    """The box (inches) ``savefig(bbox_inches="tight")`` crops a ``dpi`` raster to: the figure's
    tight bounding box laid out by an Agg renderer at ``dpi``, padded by ``savefig.pad_inches``.

    Measured without the draw savefig makes first: the figures here set no layout engine (their
    ``tight_layout`` call is done when they are saved), and the box of every artist they hold
    updates its ticks, titles and legend positions itself; the draw cost about as much again."""
    old = fig.dpi
    fig.set_dpi(dpi)
    try:
        box = fig.get_tightbbox(fig.canvas.get_renderer())
    finally:
        fig.set_dpi(old)
    return box.padded(matplotlib.rcParams["savefig.pad_inches"])


def save_figure(fig: plt.Figure, stem: Path) -> None:
    """Write ``stem``.png and ``stem``.pdf atomically, then close the figure. Both are cropped to
    :func:`tight_box`, measured once: ``bbox_inches="tight"`` lays a figure out three times per
    file to measure it (more than half of saving a figure with many tick labels)."""
    box = tight_box(fig)
    for suffix in (".png", ".pdf"):
        with atomic_path(stem.with_suffix(suffix)) as tmp:
            fig.savefig(tmp, format=suffix[1:], dpi=DPI, bbox_inches=box)
    plt.close(fig)
